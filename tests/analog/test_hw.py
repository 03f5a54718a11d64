"""Every hardware model in the registry (plus generic fqN/wXaY names): apply from outside,
forward, determinism where promised, and clear errors for bad names and options."""

from __future__ import annotations

import copy

import pytest
import torch

import analog
from analog.aimc import AnalogOptions
from hwnas.common.errors import ConfigError

HW_NAMES = analog.list_hw() + ["w3a16"]  # generic name, codes wider than 8 bits


@pytest.mark.parametrize("name", HW_NAMES)
def test_apply_forward(name, trained_cnn, digits):
    before = copy.deepcopy(trained_cnn.state_dict())
    hw = analog.get_hw(name)
    model = analog.apply(trained_cnn, name, calib=digits.x_train[:64])
    x = digits.x_test[:7]
    with torch.no_grad():
        out = model(x)
        again = model(x)
    assert out.shape == (7, 10) and torch.isfinite(out).all()
    if not hw.stochastic:
        assert torch.equal(out, again)
    # the caller's model is untouched: hardware is applied from outside
    assert all(torch.equal(v, before[k]) for k, v in trained_cnn.state_dict().items())


@pytest.mark.parametrize("name", analog.list_hw())
def test_registry_entries_describe_themselves(name):
    hw = analog.get_hw(name)
    assert hw.name == name and hw.kind in ("digital", "quant", "analog") and hw.description


def test_pcm_ideal_equals_digital(trained_cnn, digits):
    x = digits.x_test[:50]
    with torch.no_grad():
        ideal = analog.apply(trained_cnn, "pcm_ideal")(x)
        digital = trained_cnn(x)
    torch.testing.assert_close(ideal, digital, atol=1e-4, rtol=1e-4)


def test_quantized_batch_dim_is_dynamic(trained_cnn, digits):
    model = analog.apply(trained_cnn, "fq8", calib=digits.x_train[:32])
    for n in (1, 5, 33):
        assert model(digits.x_test[:n]).shape == (n, 10)


def test_generic_names_parse():
    hw = analog.get_hw("w3a5")
    assert (hw.w_bits, hw.a_bits, hw.kind) == (3, 5, "quant")
    assert analog.get_hw("fq8") is analog.get_hw("fq8")


@pytest.mark.parametrize("bad", ["pcm2", "fq1", "fq33", "w4a", "analog", ""])
def test_unknown_hw_lists_known_names(bad):
    with pytest.raises(ConfigError) as err:
        analog.get_hw(bad)
    msg = str(err.value)
    assert repr(bad) in msg and "Fix:" in msg
    assert ("pcm" in msg and "fqN" in msg) or "bit widths" in msg


def test_bad_options_reported_together(trained_cnn):
    with pytest.raises(ConfigError) as err:
        analog.apply(trained_cnn, "pcm", dac_bits=1, out_noise=-0.1, bogus=3, tile="gpu")
    wheres = [p.rule for p in err.value.problems]
    assert len(wheres) == 4
    assert any("bogus" in str(p.value) for p in err.value.problems)


def test_options_change_the_rpu_config():
    rpu = analog.get_hw("pcm").rpu_config(dac_bits=8, adc_bits=10, out_noise=0.0, tile_size=64,
                                          g_max=20.0, compensation=False, tile="torch")
    assert rpu.forward.inp_res == 1 / 254 and rpu.forward.out_res == 1 / 1022
    assert rpu.forward.out_noise == 0.0 and rpu.mapping.max_input_size == 64
    assert rpu.noise_model.g_max == 20.0 and rpu.drift_compensation is None
    assert type(rpu).__name__ == "TorchInferenceRPUConfig"
    assert AnalogOptions.parse("x", {}).problems("x") == []


@pytest.mark.parametrize("name", ["fq8", "int8"])
def test_quantized_needs_calibration(name, trained_cnn):
    with pytest.raises(ConfigError, match="calib"):
        analog.apply(trained_cnn, name)
