"""Latency predictors: block decomposition, LUT calibration, regressors, scores, end to end."""

from __future__ import annotations

import random

import numpy as np
import pytest
from torch import nn

import hw_cost.backends as backends
import hw_cost.roofline as roofline
from hw_cost.lut import LatencyLUT, block_signature, iter_blocks, record_blocks
from hw_cost.predictors import (
    Setting,
    build_lut,
    evaluate,
    measure_more,
    measured_rows,
    predict_latency,
    scores,
)
from hw_cost.regressor import REGRESSORS, LatencyRegressor
from hwnas.common.errors import ConfigError
from search_spaces import get_space


@pytest.fixture
def setting(fast_rule, monkeypatch) -> Setting:
    monkeypatch.setattr(backends.CpuBackend, "matmul_n", (256,))
    monkeypatch.setattr(backends.CpuBackend, "copy_bytes", 16 * 2**20)
    monkeypatch.setattr(roofline, "_WARMUP_S", 0.01)
    monkeypatch.setattr(roofline, "_TIMED_S", 0.02)
    return Setting("resnet", (1, 8, 8), 10, threads=1, block_rule=fast_rule,
                   model_rule=fast_rule)


def test_blocks_open_plain_containers_only():
    model = get_space("resnet").build("rn:s16-d2r1c48-d1r2c96", in_chans=1, num_classes=10,
                                      img_size=8)
    names = [name for name, _ in iter_blocks(model)]
    assert names[:3] == ["stem.0", "stem.1", "stem.2"]  # Sequential opened
    assert "groups.0" in names and not any(n.startswith("groups.0.") for n in names)
    assert names[-1] == "fc"


def test_identical_blocks_share_a_signature():
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU())
    calls, modules = record_blocks(model, (8,), batch_size=2)
    assert [c.input_shape for c in calls] == [(2, 8)] * 4
    assert calls[0].signature == calls[2].signature and len(modules) == 2
    assert block_signature(nn.Linear(8, 8), (2, 8)) != block_signature(nn.Linear(8, 8), (4, 8))
    assert block_signature(nn.Linear(8, 8), (2, 8)) != block_signature(nn.Linear(8, 9), (2, 8))
    assert model[0].training  # the caller's model keeps its mode


def test_calibration_recovers_a_linear_law():
    sums = [1.0, 2.0, 3.0, 5.0]
    cal = LatencyLUT.fit(sums, [1.5 * s + 0.2 for s in sums], ["a", "b", "c", "d"])
    assert cal.a == pytest.approx(1.5) and cal.b == pytest.approx(0.2)
    assert cal.archs == ("a", "b", "c", "d")


def test_blocks_are_timed_once_then_read_from_the_cache(setting, cache):
    model = setting.build("rn:s16-d2r1c48")
    first = setting.lut(cache)
    total = first.block_sum(model, setting.input_shape)
    assert total > 0 and first.measured == len(cache.entries("lut_block")) > 0
    again = setting.lut(cache)
    assert again.block_sum(model, setting.input_shape) == total and again.measured == 0


def test_scores_by_hand():
    s = scores([1.0, 2.2, 2.7, 4.0], [1.0, 2.0, 3.0, 5.0])
    assert s["n"] == 4 and s["within_10"] == 0.75
    assert s["mape"] == pytest.approx(100 * (0 + 0.1 + 0.1 + 0.2) / 4)
    assert s["kendall_tau"] == pytest.approx(1.0)


def _synthetic_rows(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        macs, params = rng.uniform(1e5, 1e7), rng.uniform(1e4, 1e6)
        rows.append({"macs": macs, "params": params, "activation_bytes": 4 * macs / 50,
                     "peak_activation_bytes": macs / 100, "model_bytes": 4 * params,
                     "features": {"depth": float(rng.integers(1, 5))},
                     "latency_ms": 0.05 + macs / 2e6})
    return rows


@pytest.mark.parametrize("kind", REGRESSORS.list())
def test_every_regressor_learns_a_smooth_law(kind):
    model = LatencyRegressor(kind, seed=0).fit(_synthetic_rows(120, 0))
    test = _synthetic_rows(40, 1)
    s = scores(model.predict(test), [r["latency_ms"] for r in test])
    assert s["within_10"] >= 0.8 and s["kendall_tau"] > 0.9, s


def test_regressor_needs_data_and_a_known_family():
    with pytest.raises(ConfigError, match="needs at least 5 measured archs"):
        LatencyRegressor("gbr").fit(_synthetic_rows(3, 0))
    with pytest.raises(ConfigError, match="regressor: must be one of"):
        LatencyRegressor("transformer")


def test_measure_more_stops_when_told_and_skips_what_is_cached(setting, cache):
    assert measure_more(setting, cache, 5, seed=0, go_on=lambda done: done < 2) == 2
    assert len(measured_rows(setting, cache)) == 2
    # the same seed draws the same archs; the two cached ones are not measured again
    assert measure_more(setting, cache, 3, seed=0) == 3
    assert len({r["arch"] for r in measured_rows(setting, cache)}) == 5


@pytest.mark.slow
def test_build_lut_then_evaluate_end_to_end(setting, cache):
    built = build_lut(setting, cache, n=3, seed=0)
    assert built["archs"] == 3 and built["blocks_timed"] > 0
    assert built["fit_median"]["a"] > 0 and built["fit_p10"]["n"] == 3
    result = evaluate(setting, cache, measure=6, holdout=0.5, regressor="gbr", seed=0)
    # held out: half of the 6 archs not used to calibrate the LUT; the regressor trains on the rest
    assert result["measured"] == 9 and result["test"] == 3 and result["train"] == 6
    for name in ("lut", "lut_train", "gbr"):
        s = result["predictors"][name]
        assert s["n"] == 3 and 0 <= s["within_10"] <= 1 and np.isfinite(s["mape"])
    p10 = evaluate(setting, cache, target="p10", seed=0)  # default family: ridge
    assert p10["measured"] == 9 and set(p10["predictors"]) == {"lut", "lut_train", "ridge"}
    arch = get_space("resnet").random_arch(random.Random(99))
    kw = {"input_shape": setting.input_shape, "num_classes": 10, "threads": 1, "cache": cache}
    lut = predict_latency("resnet", arch, **kw)
    reg = predict_latency("resnet", arch, method="regressor", **kw)
    assert lut > 0 and reg > 0


def test_unknown_target(setting, cache):
    with pytest.raises(ConfigError, match="target: must be one of"):
        evaluate(setting, cache, target="p99")


def test_predict_with_a_lut_that_was_never_built(cache):
    with pytest.raises(ConfigError, match="must be built for this space and setting first"):
        predict_latency("resnet", "rn:s16-d2r1c48", input_shape=(1, 8, 8), num_classes=10,
                        threads=1, cache=cache, method="lut")
    with pytest.raises(ConfigError, match="must be auto, lut or regressor"):
        predict_latency("resnet", "rn:s16-d2r1c48", input_shape=(1, 8, 8), num_classes=10,
                        cache=cache, method="psychic")
