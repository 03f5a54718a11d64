"""Tabular evaluation: look a candidate's metrics up in a CSV/Parquet table keyed by arch string.

Used to benchmark search strategies on NAS-Bench-201-style tables (thousands of evaluations in
seconds) and to reuse earlier measurements. Columns are metric keys (``acc_digital``,
``latency_ms``, ``acc_pcm@1d`` ...) or are mapped onto them with ``columns={key: column}``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from hwnas.common.errors import ConfigError, Problem
from search_spaces import get_space

SUFFIXES = (".csv", ".parquet", ".pq")


@functools.cache
def _read(path: str, mtime: float) -> pd.DataFrame:  # mtime in the key: a rewritten file reloads
    p = Path(path)
    return pd.read_csv(p) if p.suffix == ".csv" else pd.read_parquet(p)


def read_table(path: str | Path) -> pd.DataFrame:
    p = Path(path)
    if p.suffix not in SUFFIXES:
        raise ConfigError.one("tabular.path", f"must end with one of {SUFFIXES}", str(p),
                              "give a CSV or Parquet file")
    if not p.is_file():
        raise ConfigError.one("tabular.path", "file must exist", str(p),
                              "build it first (e.g. `python -m bench.search.nb201_table`) or "
                              "fix the path")
    return _read(str(p.resolve()), p.stat().st_mtime)


class TabularEvaluator:
    """Maps an arch string to its metrics; every lookup returns floats keyed by metric key."""

    def __init__(self, path: str | Path, *, key: str = "arch",
                 columns: Mapping[str, str] | None = None):
        self.path = Path(path)
        frame = read_table(self.path)
        if key not in frame.columns:
            raise ConfigError.one("tabular.key", "must name a column of the table", key,
                                  f"use one of {list(frame.columns)}")
        self.columns = {k: v for k, v in (columns or {}).items()}
        missing = [c for c in self.columns.values() if c not in frame.columns]
        if missing:
            raise ConfigError.one("tabular.columns", "mapped columns must exist in the table",
                                  missing, f"use columns of {list(frame.columns)}")
        if frame[key].duplicated().any():
            dup = frame[key][frame[key].duplicated()].iloc[0]
            raise ConfigError.one("tabular table", "arch strings must be unique", dup,
                                  "keep one row per architecture")
        self.key = key
        self._rows = frame.set_index(key)
        self._inverse = {col: k for k, col in self.columns.items()}
        self._numeric = [c for c in self._rows.columns
                         if pd.api.types.is_numeric_dtype(self._rows[c])]
        # A dict of dicts: lookups run thousands of times per second in benchmarks.
        self._table = (self._rows[self._numeric].astype(float)
                       .rename(columns=self._inverse).to_dict("index"))

    def __len__(self) -> int:
        return len(self._rows)

    def metric_keys(self) -> list[str]:
        """Every metric key the table can answer."""
        return [self._inverse.get(c, c) for c in self._numeric]

    def has(self, metric_key: str) -> bool:
        return metric_key in self.metric_keys()

    def archs(self) -> list[str]:
        return list(self._rows.index)

    def lookup(self, arch: str) -> dict[str, float]:
        if arch not in self._table:
            raise ConfigError.one("tabular lookup", f"arch must be a row of {self.path.name}", arch,
                                  "use the table's space, or add the architecture to the table")
        return dict(self._table[arch])

    def values(self, keys: list[str]) -> list[float]:
        """Many rows at once (benchmarks): a matrix-friendly list of metric columns."""
        cols = [self.columns.get(k, k) for k in keys]
        return self._rows[cols].to_numpy(dtype=float).tolist()



    # -- checks behind `hwnas search --check` -----------------------------------------------
    def key_problems(self, space_name: str, *, checked: int = 200, drawn: int = 20
                     ) -> list[Problem]:
        """The key column must hold the space's arch strings, and the space's samples must be
        rows; otherwise every trial would fail its lookup. Checks a spread of rows and a seeded
        draw of archs (seconds would be spent on all 15,625 NB201 rows for no new information).
        """
        space = get_space(space_name)
        rows = self.archs()[:: max(1, len(self) // checked)]
        bad = [a for a in rows if not _valid(space, a)]
        if bad:
            return [Problem("tabular.key", f"column {self.key!r} must hold {space_name} arch "
                            f"strings ({len(bad)} of {len(rows)} rows checked do not)", bad[0],
                            f"point tabular.key at the arch-string column (columns: "
                            f"{[self.key, *self._rows.columns]}) or use the table's space")]
        rng = random.Random(0)
        archs = [space.random_arch(rng) for _ in range(drawn)]
        missing = [a for a in archs if a not in self._table]
        if len(missing) == len(archs):
            return [Problem("tabular", f"the table must cover space {space_name}: none of "
                            f"{drawn} sampled archs is a row of {self.path.name}", missing[0],
                            "use the space the table was built for, or a table of this space")]
        return []

    def percent_problems(self, fraction_keys: list[str]) -> list[Problem]:
        """A fraction metric (accuracy) stored as a percentage scores 100x too high and breaks
        the hypervolume's reference: report columns whose values exceed 1."""
        out = []
        for key in fraction_keys:
            col = self.columns.get(key, key)
            if col not in self._rows.columns:
                continue
            top = float(self._rows[col].max())
            if top > 1.0:
                out.append(Problem(f"tabular column {col!r}", f"{key} is a fraction in [0, 1]",
                                   f"max {top:.4g} (a percentage?)",
                                   "divide the column by 100 before searching"))
        return out


def _valid(space, arch: object) -> bool:  # noqa: ANN001 - a SearchSpace
    try:
        space.validate(str(arch))
        return True
    except ConfigError:
        return False
