"""Roofline: placement arithmetic, ceilings measured once and cached per device fingerprint."""

from __future__ import annotations

import pytest

import hw_cost.backends as backends
import hw_cost.roofline as roofline
from hw_cost.roofline import Ceilings, get_ceilings, roofline_point

CEIL = Ceilings(peak_flops=100e9, peak_bytes_per_s=10e9, matmul_n=1024, copy_bytes=1 << 20,
                repeats=3, dtype="fp32", fingerprint={"backend": "cpu"})


def _static(flops: int, weights: int, activations: int) -> dict:
    return {"flops": flops, "model_bytes": weights, "input_bytes": 0,
            "activation_bytes": activations}


def test_memory_bound_left_of_the_ridge():
    point = roofline_point(_static(flops=10**6, weights=10**6, activations=0), 1.0, CEIL)
    assert CEIL.ridge == 10.0 and point["arithmetic_intensity"] == 1.0
    assert point["bound"] == "memory" and point["roof_flops"] == 10e9
    assert point["attained_flops"] == pytest.approx(1e9)  # 1 MFLOP in 1 ms
    assert point["roof_fraction"] == pytest.approx(0.1)


def test_compute_bound_right_of_the_ridge():
    # bytes: weights once, each activation written and read once
    point = roofline_point(_static(flops=10**9, weights=10**6, activations=10**6), 20.0, CEIL)
    assert point["bytes_moved"] == 3 * 10**6
    assert point["bound"] == "compute" and point["roof_flops"] == 100e9
    assert point["attained_flops"] == pytest.approx(50e9)


def test_ceilings_are_measured_once_then_read_from_the_cache(cache, monkeypatch):
    calls = []

    def fake_measure(**kwargs):
        calls.append(kwargs)
        return CEIL
    monkeypatch.setattr(roofline, "measure_ceilings", fake_measure)
    first = get_ceilings(threads=1, cache=cache)
    second = get_ceilings(threads=1, cache=cache)
    assert first == second == CEIL and len(calls) == 1
    get_ceilings(threads=1, cache=cache, remeasure=True)
    get_ceilings(threads=1, dtype="bf16", cache=cache)  # another dtype is another ceiling
    assert len(calls) == 3 and len(cache.entries("ceilings")) == 2


def test_measured_ceilings_are_plausible(monkeypatch):
    # Smaller problem sizes keep this test short; the real sizes live in CpuBackend.matmul_n.
    monkeypatch.setattr(backends.CpuBackend, "matmul_n", (128, 256))
    monkeypatch.setattr(backends.CpuBackend, "copy_bytes", 16 * 2**20)
    c = roofline.measure_ceilings(threads=1, repeats=3, warmup_s=0.02, timed_s=0.05)
    assert 1e8 < c.peak_flops < 1e13 and 1e8 < c.peak_bytes_per_s < 1e12
    assert c.fingerprint["threads"] == 1 and c.copy_bytes == 16 * 2**20
    assert c.matmul_n in (128, 256)
    # Every cache level found gets a ceiling, never below the memory behind it.
    assert set(c.cache_bytes_per_s) == set(c.cache_bytes) <= {"L2", "LLC"}
    assert all(bw >= c.peak_bytes_per_s for bw in c.cache_bytes_per_s.values())


CACHED = Ceilings(peak_flops=100e9, peak_bytes_per_s=10e9, matmul_n=1024, copy_bytes=1 << 20,
                  repeats=3, dtype="fp32", fingerprint={"backend": "cpu"},
                  cache_bytes_per_s={"L2": 80e9, "LLC": 30e9},
                  cache_bytes={"L2": 1 << 20, "LLC": 32 << 20})


@pytest.mark.parametrize("weights, level, bandwidth", [
    (500_000, "L2", 80e9), (4_000_000, "LLC", 30e9), (64_000_000, "DRAM", 10e9)])
def test_the_smallest_cache_holding_the_working_set_binds(weights, level, bandwidth):
    static = {**_static(flops=10**5, weights=weights, activations=0),
              "peak_activation_bytes": 100_000}
    point = roofline_point(static, 1.0, CACHED)
    assert point["memory_level"] == level and point["level_bytes_per_s"] == bandwidth
    assert point["ceiling"] == f"{level} bandwidth" and point["bound"] == "memory"
    assert point["roof_flops"] == pytest.approx(10**5 / weights * bandwidth)


def test_compute_ceiling_is_named_when_it_binds():
    static = {**_static(flops=10**10, weights=10**5, activations=0), "peak_activation_bytes": 0}
    point = roofline_point(static, 200.0, CACHED)
    assert point["ceiling"] == "compute" and point["roof_fraction"] == pytest.approx(0.5)


def test_peak_is_the_best_call_after_warm_up():
    import hw_cost.backends as backends

    times = iter([5.0, 1.0, 3.0, 2.0, 4.0] * 100)

    class Fake(backends.CpuBackend):
        def time_ms(self, fn, n, clock="wall", between=None):
            return [next(times) for _ in range(n)]
    ms, n = roofline.best_ms(lambda: None, Fake(), "cpu", "wall", warmup_s=0.0, timed_s=0.0,
                             min_repeats=5)
    assert ms == 1.0 and n == 5


def test_ceilings_of_an_older_definition_are_measured_again(cache, monkeypatch):
    monkeypatch.setattr(roofline, "measure_ceilings", lambda **kw: CACHED)
    fp = get_ceilings(threads=1, cache=cache).fingerprint
    old_key = roofline.ceilings_key(fp, "fp32").rsplit(":v", 1)[0]
    cache.put_entry("ceilings", old_key, {**CEIL.to_dict()})
    assert get_ceilings(threads=1, cache=cache) == CACHED
