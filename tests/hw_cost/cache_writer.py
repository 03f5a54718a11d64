"""Worker for the many-writers test: imports nothing heavy, so spawned processes start fast."""

from __future__ import annotations

from hw_cost.cache import CostCache, CostKey


def key(arch: str) -> CostKey:
    return CostKey("mbconv", arch, "f" * 16, 1, "fp32", (1, 28, 28), {"num_classes": 10})


def write(path: str, worker: int, n: int, start) -> None:  # noqa: ANN001 - an mp.Event
    cache = CostCache(path)
    cache.stats()  # open the file (WAL switch, schema) before the race starts
    start.wait()  # every worker writes at the same moment
    for i in range(n):
        cache.put(key(f"w{worker}-{i}"), {"worker": worker, "i": i})
        cache.put(key("shared"), {"worker": worker, "i": i})  # every worker upserts one key
        cache.put_entry("lut_block", f"w{worker}-{i}", {"ms": i})
