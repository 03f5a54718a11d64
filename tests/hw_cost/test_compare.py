"""Side-by-side latency: interleaved rounds cancel a host that slows down; unsteady figures warn."""

from __future__ import annotations

import pytest
from torch import nn

import hw_cost.compare as compare
from hw_cost.backends import CpuBackend
from hw_cost.compare import Timing, compare_latency, warnings_for


class Cost(nn.Module):
    """A model whose simulated call costs ``ms``."""

    def __init__(self, ms: float):
        super().__init__()
        self.ms = ms

    def forward(self, x):
        return x


class DriftingHost(CpuBackend):
    """Every call is slower than the last: a machine filling up with other work."""

    def __init__(self) -> None:
        self.calls = 0

    def time_ms(self, fn, n, clock="wall", between=None):
        out = []
        for _ in range(n):
            self.calls += 1
            out.append(fn.module.ms * (1 + 0.002 * self.calls))
        return out


def test_interleaved_rounds_cancel_a_drifting_host(monkeypatch):
    host = DriftingHost()
    monkeypatch.setattr(compare, "get_backend", lambda device: host)
    r = compare_latency({"before": Cost(2.0), "after": Cost(1.0)}, (1, 4, 4), threads=1,
                        seconds=0.0, window=10, warmup=0, min_rounds=40)
    before = r["models"]["before"]
    # Each figure alone carries the drift (medians ~1.8x the call's cost, wide spread) ...
    assert before["median_ms"] > 2.5 and before["p90_ms"] / before["p10_ms"] > 1.5
    # ... the ratio of figures taken side by side does not.
    assert r["ratios"]["after"]["ratio"] == pytest.approx(0.5, rel=0.02)
    assert r["rounds"] == 40 and r["unit"] == "ms" and before["repeats"] == 400


def test_real_models_are_timed_with_their_spread():
    small = nn.Sequential(nn.Conv2d(1, 4, 3), nn.Flatten())
    big = nn.Sequential(nn.Conv2d(1, 64, 3), nn.Conv2d(64, 64, 3), nn.Flatten())
    r = compare_latency({"small": small, "big": big}, (1, 16, 16), threads=1, seconds=0.2,
                        window=5, min_rounds=4)
    big_t = r["models"]["big"]
    assert big_t["p10_ms"] <= big_t["median_ms"] <= big_t["p90_ms"]
    assert r["ratios"]["big"]["ratio"] > 1.5  # 64x64 3x3 conv costs far more than 1x4


def test_unsteady_figures_warn():
    steady = Timing(1.0, 0.98, 1.02, 0.02, 100)
    noisy = Timing(1.0, 0.7, 1.6, 0.31, 100)
    assert warnings_for(["a", "b"], {"a": steady, "b": steady},
                        {"b": {"ratio": 1.0, "ratio_p10": 0.99, "ratio_p90": 1.01}}) == []
    got = warnings_for(["a", "b"], {"a": noisy, "b": steady},
                       {"b": {"ratio": 0.27, "ratio_p10": 0.2, "ratio_p90": 0.4}})
    assert len(got) == 2 and "31%" in got[0] and "rough" in got[1]
