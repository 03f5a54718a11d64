"""Roofline: placement arithmetic, ceilings measured once and cached per device fingerprint."""

from __future__ import annotations

import pytest

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
    # Smaller problem sizes keep this test short; the real sizes live in roofline._MATMUL_N.
    monkeypatch.setitem(roofline._MATMUL_N, "cpu", 256)
    monkeypatch.setitem(roofline._COPY_BYTES, "cpu", 16 * 2**20)
    c = roofline.measure_ceilings(threads=1, repeats=3)
    assert 1e8 < c.peak_flops < 1e13 and 1e8 < c.peak_bytes_per_s < 1e12
    assert c.fingerprint["threads"] == 1 and c.copy_bytes == 2 * 16 * 2**20
