"""A persistent cost cache shared by every study and every process on a machine.

SQLite in WAL mode with a busy timeout: readers never block, writers queue for a moment, and each
write is one short upsert, so the workers of a study may write at once without losing rows. Costs
are keyed by (space, arch, device fingerprint hash, batch, dtype, input shape, options); other
records (roofline ceilings, latency LUTs, fingerprints) live in ``entries`` keyed by (kind, key).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.common.errors import ConfigError

if TYPE_CHECKING:  # pandas is imported where a table is written, not by every cache reader
    import pandas as pd

_SCHEMA = """
CREATE TABLE IF NOT EXISTS costs (
    key TEXT PRIMARY KEY, space TEXT NOT NULL, arch TEXT NOT NULL, fingerprint TEXT NOT NULL,
    batch INTEGER NOT NULL, dtype TEXT NOT NULL, input_shape TEXT NOT NULL,
    options TEXT NOT NULL, value TEXT NOT NULL, updated REAL NOT NULL);
CREATE INDEX IF NOT EXISTS costs_by_space ON costs (space, fingerprint);
CREATE TABLE IF NOT EXISTS entries (
    kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated REAL NOT NULL,
    PRIMARY KEY (kind, key));
"""
_COLUMNS = ("space", "arch", "fingerprint", "batch", "dtype", "input_shape", "options")


def default_path() -> Path:
    """``$HWNAS_CACHE`` if set, else ``~/.cache/hwnas/costs.db``."""
    env = os.environ.get("HWNAS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "hwnas" / "costs.db"


def _dumps(value: object) -> str:
    def fallback(obj: object) -> object:
        if hasattr(obj, "item"):  # numpy / torch scalars
            return obj.item()
        if isinstance(obj, tuple | set):
            return list(obj)
        return str(obj)

    return json.dumps(value, sort_keys=True, default=fallback)


@dataclass(frozen=True)
class CostKey:
    """Everything a measured cost depends on. ``fingerprint`` is the device fingerprint hash."""

    space: str
    arch: str
    fingerprint: str
    batch: int
    dtype: str
    input_shape: tuple[int, ...]
    options: dict = field(default_factory=dict, hash=False)

    def columns(self) -> tuple:
        return (self.space, self.arch, self.fingerprint, self.batch, self.dtype,
                ",".join(map(str, self.input_shape)), _dumps(self.options))

    def digest(self) -> str:
        return hashlib.sha256(_dumps(asdict(self)).encode()).hexdigest()


class CostCache:
    """``CostCache(path)``: ``get``/``put`` costs, ``get_entry``/``put_entry`` other records,
    ``rows`` to read many, ``stats()`` and ``export(path)`` (CSV or Parquet)."""

    def __init__(self, path: str | os.PathLike | None = None, *, timeout_s: float = 60.0):
        self.path = Path(path).expanduser() if path else default_path()
        self.timeout_s = timeout_s
        self._conn: sqlite3.Connection | None = None
        self._pid = -1

    @property
    def conn(self) -> sqlite3.Connection:
        # One connection per process: a connection must not cross a fork.
        if self._conn is None or self._pid != os.getpid():
            self._conn = self._connect()
            self._pid = os.getpid()
        return self._conn

    def _connect(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self.timeout_s, isolation_level=None)
        except (OSError, sqlite3.Error) as err:
            raise ConfigError.one("cost cache", "must be a writable SQLite file", str(self.path),
                                  f"pass another --cache path or set HWNAS_CACHE ({err})") from err
        conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
        self._retry(lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        self._retry(lambda: conn.executescript(_SCHEMA))
        return conn

    def _retry(self, fn):
        # Switching to WAL and creating the schema can report "locked" without waiting on the busy
        # handler when many processes open a fresh file at once; retry for up to the timeout.
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

    def get(self, key: CostKey) -> dict | None:
        row = self.conn.execute("SELECT value FROM costs WHERE key = ?", (key.digest(),)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: CostKey, value: dict) -> None:
        self._retry(lambda: self.conn.execute(
            "INSERT OR REPLACE INTO costs (key, space, arch, fingerprint, batch, dtype,"
            " input_shape, options, value, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (key.digest(), *key.columns(), _dumps(value), time.time())))

    def get_entry(self, kind: str, key: str) -> dict | None:
        row = self.conn.execute("SELECT value FROM entries WHERE kind = ? AND key = ?",
                                (kind, key)).fetchone()
        return json.loads(row[0]) if row else None

    def put_entry(self, kind: str, key: str, value: object) -> None:
        self._retry(lambda: self.conn.execute(
            "INSERT OR REPLACE INTO entries (kind, key, value, updated) VALUES (?, ?, ?, ?)",
            (kind, key, _dumps(value), time.time())))

    def rows(self, **where: object) -> list[dict]:
        """Cost rows matching column values, e.g. ``rows(space="mbconv", fingerprint=h)``."""
        unknown = sorted(set(where) - set(_COLUMNS))
        if unknown:
            raise ConfigError.one("cost cache rows", f"filters must be among {list(_COLUMNS)}",
                                  unknown, "filter on key columns only")
        if isinstance(where.get("input_shape"), Sequence) and not isinstance(
                where.get("input_shape"), str):
            where["input_shape"] = ",".join(map(str, where["input_shape"]))
        sql = "SELECT " + ", ".join(_COLUMNS) + ", value, updated FROM costs"
        if where:
            sql += " WHERE " + " AND ".join(f"{c} = ?" for c in where)
        out = []
        for row in self.conn.execute(sql + " ORDER BY updated", tuple(where.values())):
            record = dict(zip((*_COLUMNS, "value", "updated"), row, strict=True))
            record["options"] = json.loads(record["options"])
            record["value"] = json.loads(record["value"])
            out.append(record)
        return out

    def entries(self, kind: str) -> dict[str, object]:
        rows = self.conn.execute("SELECT key, value FROM entries WHERE kind = ?", (kind,))
        return {key: json.loads(value) for key, value in rows}

    def stats(self) -> dict[str, object]:
        q = self.conn.execute
        devices = self.entries("fingerprint")
        by_fp = dict(q("SELECT fingerprint, COUNT(*) FROM costs GROUP BY fingerprint").fetchall())
        return {
            "path": str(self.path),
            "bytes": self.path.stat().st_size if self.path.exists() else 0,
            "costs": q("SELECT COUNT(*) FROM costs").fetchone()[0],
            "by_space": dict(q("SELECT space, COUNT(*) FROM costs GROUP BY space").fetchall()),
            "by_device": {f"{h} ({devices.get(h, {}).get('device', '?')})": n
                          for h, n in by_fp.items()},
            "entries": dict(q("SELECT kind, COUNT(*) FROM entries GROUP BY kind").fetchall()),
        }

    def export(self, path: str | os.PathLike) -> int:
        """Write every cost row, value flattened into columns, to ``.csv`` or ``.parquet``."""
        import pandas as pd

        path = export_path(path)
        rows = self.rows()
        records = [{**{k: r[k] for k in _COLUMNS}, "options": _dumps(r["options"]),
                    "updated": r["updated"], **r["value"]} for r in rows]
        flat = pd.json_normalize(records, sep=".") if records else pd.DataFrame(columns=_COLUMNS)
        return write_table(flat, path)


def export_path(path: str | os.PathLike) -> Path:
    """An export target, checked: ``.csv`` or ``.parquet``."""
    path = Path(path)
    if path.suffix not in (".csv", ".parquet"):
        raise ConfigError.one("export path", "must end in .csv or .parquet", str(path),
                              "name the file e.g. costs.parquet")
    return path


def write_table(flat: pd.DataFrame, path: Path) -> int:
    """Write a table to ``path`` (``export_path``); returns its rows."""
    path.parent.mkdir(parents=True, exist_ok=True)
    flat.to_csv(path, index=False) if path.suffix == ".csv" else flat.to_parquet(path)
    return len(flat)
