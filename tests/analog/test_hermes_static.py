"""``pcm_hermes_static``: HERMES' PCM devices (aihwkit ``HermesNoiseModel``) on the HERMES-like
periphery of ``pcm_static``, programmed, drifted and scored on aihwkit's own tiles."""

from __future__ import annotations

import pytest

import analog
from analog.fast import FastAnalogModel
from hwnas.common.errors import ConfigError

YEAR = 365 * 86400.0
NOISE_KEYS = ("name", "description", "caveats", "noise_model")


def _periphery(desc: dict) -> dict:
    return {k: v for k, v in desc.items() if k not in NOISE_KEYS}


def test_hermes_devices_on_the_static_periphery():
    hw = analog.get_hw("pcm_hermes_static")
    rpu = hw.rpu_config()
    noise = rpu.noise_model
    assert (type(noise).__name__, noise.num_devices, noise.g_max) == ("HermesNoiseModel", 2, 20.7)
    fwd = rpu.forward
    assert (fwd.noise_management.name, fwd.bound_management.name) == ("CONSTANT", "NONE")
    assert rpu.pre_post.input_range.enable and rpu.mapping.max_input_size == 256
    assert _periphery(hw.describe()) == _periphery(analog.get_hw("pcm_static").describe())
    assert "pcm_hermes_static" in analog.list_hw()
    # the same swap as an option: HERMES keeps its characterised converter, not pcm_static's 25 uS
    swapped = analog.get_hw("pcm_static").rpu_config(noise_model="hermes").noise_model
    assert (type(swapped).__name__, swapped.g_max) == ("HermesNoiseModel", 20.7)


def test_programs_drifts_and_scores_on_aihwkit_tiles(trained_cnn, digits, repeat_accs, stats,
                                                     gaps):
    hw, calib = analog.get_hw("pcm_hermes_static"), digits.x_train[:256]
    rpu = hw.rpu_config()
    ready = hw.calibrated(trained_cnn, rpu, calib)
    tiles_model = hw.apply(ready, calib=calib)
    tiles = list(tiles_model.analog_tiles())
    assert {type(t.rpu_config.noise_model).__name__ for t in tiles} == {"HermesNoiseModel"}
    tiles_model.program_analog_weights()
    programmed = [t.programmed_weights.abs().mean() for t in tiles]
    tiles_model.drift_analog_weights(YEAR)
    drifted = [t.tile.get_weights().abs().mean() for t in tiles]
    assert all(d < 0.95 * p for d, p in zip(drifted, programmed, strict=True))  # PCM drifts down
    x, y, times = digits.x_test[:300], digits.y_test[:300], (1.0, YEAR)
    ref = repeat_accs(hw.apply(ready, calib=calib), x, y, 0, 4, times)
    fast = repeat_accs(FastAnalogModel(ready, rpu), x, y, 1, 4, times)
    for i in range(len(times)):
        assert abs(stats(ref[i])[0] - stats(fast[i])[0]) <= gaps[0](ref[i], fast[i]) + 0.015
    assert stats(ref[0])[0] > 0.6  # a scored model, not noise


def test_evaluate_records_the_device_and_refuses_beyond_its_range(trained_cnn, digits):
    res = analog.evaluate(trained_cnn, digits.x_test[:100], digits.y_test[:100],
                          "pcm_hermes_static", times=("1d",), calib=digits.x_train[:256],
                          adabs=0)
    assert res.hw_config["noise_model"]["class"] == "HermesNoiseModel" and res.path == "fast"
    with pytest.raises(ConfigError, match=r"g_max must be <= 20.7") as err:
        analog.get_hw("pcm_hermes_static").rpu_config(g_max=25.0)
    assert err.value.problems[0].fix == "use g_max <= 20.7"
    with pytest.raises(ConfigError, match="noise_model must be one of.*hermes"):
        analog.get_hw("pcm_static").rpu_config(noise_model="hermes_v2")
