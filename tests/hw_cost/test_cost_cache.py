"""The SQLite cost cache: round trips, keys, upserts, stats, export, many writers at once."""

from __future__ import annotations

import multiprocessing as mp
import sqlite3

import cache_writer
import pandas as pd
import pytest

from hw_cost.cache import CostCache, CostKey, default_path
from hwnas.common.errors import ConfigError


def _key(arch: str = "a1", **changes) -> CostKey:
    fields = {"space": "mbconv", "arch": arch, "fingerprint": "f" * 16, "batch": 1,
              "dtype": "fp32", "input_shape": (1, 28, 28), "options": {"num_classes": 10}}
    return CostKey(**{**fields, **changes})


def test_round_trip_and_miss(cache):
    value = {"latency_ms": 1.5, "nested": {"x": [1, 2]}, "flag": True}
    assert cache.get(_key()) is None
    cache.put(_key(), value)
    assert cache.get(_key()) == value


@pytest.mark.parametrize("change", [
    {"space": "resnet"}, {"arch": "a2"}, {"fingerprint": "0" * 16}, {"batch": 8},
    {"dtype": "bf16"}, {"input_shape": (3, 32, 32)}, {"options": {"num_classes": 100}},
])
def test_every_key_field_matters(cache, change):
    cache.put(_key(), {"v": 1})
    assert cache.get(_key(**change)) is None


def test_upsert_replaces_and_persists(tmp_path):
    path = tmp_path / "c.db"
    first = CostCache(path)
    first.put(_key(), {"v": 1})
    first.put(_key(), {"v": 2})
    first.close()
    again = CostCache(path)
    assert again.get(_key()) == {"v": 2} and again.stats()["costs"] == 1
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_entries_rows_and_stats(cache):
    for i in range(3):
        cache.put(_key(f"a{i}"), {"latency_ms": float(i)})
    cache.put(_key("r", space="resnet"), {"latency_ms": 9.0})
    cache.put_entry("fingerprint", "f" * 16, {"device": "Test CPU"})
    cache.put_entry("ceilings", "k", {"peak_flops": 1e9})
    assert cache.get_entry("ceilings", "k") == {"peak_flops": 1e9}
    rows = cache.rows(space="mbconv", input_shape=(1, 28, 28))
    assert [r["arch"] for r in rows] == ["a0", "a1", "a2"]
    assert rows[0]["options"] == {"num_classes": 10} and rows[2]["value"]["latency_ms"] == 2.0
    stats = cache.stats()
    assert stats["costs"] == 4 and stats["by_space"] == {"mbconv": 3, "resnet": 1}
    assert stats["by_device"] == {"ffffffffffffffff (Test CPU)": 4}
    assert stats["entries"] == {"ceilings": 1, "fingerprint": 1}


def test_rows_rejects_unknown_filters(cache):
    with pytest.raises(ConfigError, match="filters must be among"):
        cache.rows(colour="red")


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_flattens_values(cache, tmp_path, suffix):
    for i in range(4):
        cache.put(_key(f"a{i}"), {"latency_ms": float(i), "analog": {"tiles": i}})
    out = tmp_path / f"costs{suffix}"
    assert cache.export(out) == 4
    df = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert sorted(df["arch"]) == ["a0", "a1", "a2", "a3"]
    assert sorted(df["analog.tiles"]) == [0, 1, 2, 3] and "latency_ms" in df.columns


def test_export_rejects_other_formats(cache, tmp_path):
    with pytest.raises(ConfigError, match=r"must end in \.csv or \.parquet"):
        cache.export(tmp_path / "costs.xlsx")


def test_default_path_and_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HWNAS_CACHE", str(tmp_path / "env.db"))
    assert CostCache().path == tmp_path / "env.db"
    monkeypatch.delenv("HWNAS_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_path() == tmp_path / ".cache" / "hwnas" / "costs.db"
    assert CostCache(tmp_path / "arg.db").path == tmp_path / "arg.db"


def test_unwritable_path_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(ConfigError, match="must be a writable SQLite file"):
        CostCache(blocker / "costs.db").stats()


def test_concurrent_writers_lose_nothing(tmp_path):
    path, workers, n = str(tmp_path / "shared.db"), 4, 40
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=cache_writer.write, args=(path, w, n, start))
             for w in range(workers)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * workers
    cache = CostCache(path)
    assert cache.stats()["costs"] == workers * n + 1
    for w in range(workers):
        for i in range(n):
            assert cache.get(cache_writer.key(f"w{w}-{i}")) == {"worker": w, "i": i}
    assert cache.get(cache_writer.key("shared"))["i"] == n - 1
    assert len(cache.entries("lut_block")) == workers * n
