"""analog.evaluate: per-time mean/std/all repeats, fresh programming per repeat, compensation
switch, seeded results, train-mode handling and bad input."""

from __future__ import annotations

import copy
import json
import statistics

import pytest
import torch

import analog
from analog.drift import program_and_drift
from hwnas.common.errors import ConfigError


@pytest.fixture(scope="module")
def pcm_result(trained_cnn, digits):
    return analog.evaluate(trained_cnn, digits.x_test[:200], digits.y_test[:200], "pcm",
                           times=("0", "1h", "1y"), repeats=4, seed=3)


def test_result_holds_every_repeat(pcm_result):
    res = pcm_result
    assert res.hw == "pcm" and res.path == "fast" and res.repeats == 4 and res.compensation
    assert res.times == [0.0, 3600.0, 31536000.0]
    assert [p.label for p in res.points] == ["0s", "1h", "1y"]
    for point in res.points:
        assert len(point.accs) == 4 and all(0 <= a <= 1 for a in point.accs)
        assert point.acc_mean == pytest.approx(statistics.mean(point.accs))
        assert point.acc_std == pytest.approx(statistics.stdev(point.accs))
    assert res.at("1h") is res.points[1] and res.at(3600) is res.points[1]
    assert res.coverage["mac_fraction"] == pytest.approx(1.0)
    json.dumps(res.as_dict())
    assert [r["t"] for r in res.rows()] == ["0s", "1h", "1y"]


def test_each_repeat_reprograms(pcm_result):
    # one shared programming draw would give (nearly) equal accuracies at t=0
    assert len(set(pcm_result.points[0].accs)) > 1


def test_drift_costs_accuracy_and_compensation_recovers_it(trained_cnn, digits, pcm_result):
    x, y = digits.x_test[:200], digits.y_test[:200]
    digital = analog.evaluate(trained_cnn, x, y, "digital").acc_mean[0]
    off = analog.evaluate(trained_cnn, x, y, "pcm", times=("1y",), repeats=2, seed=3,
                          compensation=False)
    on_1y = pcm_result.at("1y").acc_mean
    t0 = pcm_result.at("0").acc_mean
    assert t0 <= digital + 0.02
    # drift costs accuracy: a year of uncompensated drift loses far more than the repeats' spread
    assert off.acc_mean[0] < t0 - 0.2 and off.acc_mean[0] < t0 - 5 * max(off.acc_std[0], 0.01)
    # ... and compensation recovers most of it
    assert off.acc_mean[0] < on_1y - 0.2 and not off.compensation


def test_unknown_time_point_is_an_error(pcm_result):
    with pytest.raises(ConfigError, match="must be one of"):
        pcm_result.at("1d")


def test_pcm_ideal_equals_digital_on_both_paths(trained_cnn, digits):
    x, y = digits.x_test, digits.y_test
    digital = analog.evaluate(trained_cnn, x, y, "digital").acc_mean[0]
    for fast in (True, False):
        res = analog.evaluate(trained_cnn, x, y, "pcm_ideal", times=("1y",), fast=fast)
        assert res.acc_mean[0] == pytest.approx(digital, abs=1 / len(y))


def test_deterministic_models_run_once(trained_cnn, digits):
    res = analog.evaluate(trained_cnn, digits.x_test, digits.y_test, "fq8",
                          times=("0", "1d"), repeats=5, calib=digits.x_train[:128])
    assert res.path == "quant" and res.repeats == 1 and res.acc_std == [0.0, 0.0]
    assert res.acc_mean[0] == res.acc_mean[1]
    assert res.coverage == {"weight_fraction": 0.0, "mac_fraction": 0.0}


def test_missing_calibration_warns(trained_cnn, digits):
    with pytest.warns(UserWarning, match="no calib"):
        analog.evaluate(trained_cnn, digits.x_test[:64], digits.y_test[:64], "int8")


def test_aihwkit_model_in_train_mode_is_switched_with_a_warning(trained_cnn, digits):
    model = analog.apply(trained_cnn, "pcm").train()
    with pytest.warns(analog.AnalogModeWarning, match="train mode"):
        res = analog.evaluate(model, digits.x_test[:50], digits.y_test[:50], "pcm",
                              times=("1d",))
    assert not model.training and res.path == "aihwkit"


def test_drift_refuses_train_mode(trained_cnn):
    model = analog.apply(trained_cnn, "pcm").train()
    with pytest.raises(ConfigError) as err:
        program_and_drift(model, 60.0, reprogram=True)
    assert "model.eval()" in str(err.value) and "'train'" in str(err.value)


def test_caller_model_is_untouched(trained_cnn, digits):
    before = copy.deepcopy(trained_cnn.state_dict())
    analog.evaluate(trained_cnn, digits.x_test[:20], digits.y_test[:20], "pcm", times=("1d",))
    assert all(torch.equal(v, before[k]) for k, v in trained_cnn.state_dict().items())


def test_bad_input_reports_every_problem(trained_cnn, digits):
    with pytest.raises(ConfigError) as err:
        analog.evaluate(trained_cnn, digits.x_test[:10], digits.y_test[:9], "pcm", repeats=0,
                        times=())
    assert len(err.value.problems) == 3
    with pytest.raises(ConfigError, match="1 fortnight"):
        analog.evaluate(trained_cnn, digits.x_test, digits.y_test, "pcm", times=("1 fortnight",))
    with pytest.raises(ConfigError, match="hardware model"):
        analog.evaluate(trained_cnn, digits.x_test, digits.y_test, "rram")
