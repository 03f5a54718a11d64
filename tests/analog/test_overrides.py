"""Options a hardware model cannot apply are clear errors, and the fast path honours what aihwkit
does with the options it can: ``forward.out_scale`` and input ranges under abs-max noise
management, each against aihwkit's own tile."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import analog
from analog.fast import FastAnalogModel
from analog.input_ranges import set_learned_input_ranges, store_input_ranges
from hwnas.common.errors import ConfigError


@pytest.mark.parametrize("option", ["prog_noise_scale", "read_noise_scale", "drift_scale"])
def test_scale_a_noise_model_lacks_is_an_error(option):
    with pytest.raises(ConfigError, match=f"{option}.*ReRamWan2022NoiseModel has only"):
        analog.get_hw("reram_wan2022").rpu_config(**{option: 0.5})


@pytest.mark.parametrize("name", ["pcm", "pcm_hermes", "reram_cmo"])
def test_scales_a_noise_model_has_are_applied(name):
    noise = analog.get_hw(name).rpu_config(prog_noise_scale=0.5, drift_scale=0.0).noise_model
    assert (noise.prog_noise_scale, noise.drift_scale) == (0.5, 0.0)


@pytest.mark.parametrize(("name", "g_max", "rule"), [
    ("pcm_hermes", 25.0, "g_max must be <= 20.7"),
    ("reram_cmo", 5.0, "g_max must exceed the conductance converter's g_min"),
    ("pcm", 0.0, "g_max must be > 0"),
])
def test_g_max_outside_the_model_is_an_error(name, g_max, rule):
    with pytest.raises(ConfigError, match=rule):
        analog.get_hw(name).rpu_config(g_max=g_max)


@pytest.mark.parametrize(("name", "g_max"), [("pcm_hermes", 15.0), ("reram_cmo", 60.0)])
def test_g_max_inside_the_model_is_applied(name, g_max):
    noise = analog.get_hw(name).rpu_config(g_max=g_max).noise_model
    assert noise.g_max == noise.g_converter.g_max == g_max


def test_errors_come_together():
    with pytest.raises(ConfigError) as err:
        analog.get_hw("pcm_hermes").rpu_config(g_max=30.0, tile="torch", drift_scale=2.0)
    assert len(err.value.problems) == 1  # hermes has drift_scale; the torch tile takes it
    with pytest.raises(ConfigError) as err:
        analog.get_hw("reram_wan2022").rpu_config(tile="torch", drift_scale=2.0)
    assert len(err.value.problems) == 2  # no drift_scale; read noise on the torch tile


@pytest.mark.parametrize("name", ["pcm_hwa", "reram_cmo", "reram_wan2022"])
def test_torch_tile_refuses_what_aihwkit_refuses(name, make_cnn):
    with pytest.raises(ConfigError, match="torch tile"):
        analog.get_hw(name).rpu_config(tile="torch")
    with pytest.raises(ConfigError, match="torch tile"):
        analog.evaluate(make_cnn().eval(), torch.randn(4, 1, 8, 8), torch.zeros(4).long(),
                        name, options={"tile": "torch"}, times=("1d",))


def test_torch_tile_runs_what_aihwkit_runs(make_cnn):
    rpu = analog.get_hw("pcm").rpu_config(tile="torch")
    assert type(rpu).__name__ == "TorchInferenceRPUConfig"
    analog.apply(make_cnn(), "pcm", tile="torch")(torch.randn(2, 1, 8, 8))


def _reference_and_fast(model: nn.Module, rpu):
    from aihwkit.nn.conversion import convert_to_analog

    ref = convert_to_analog(copy.deepcopy(model), copy.deepcopy(rpu)).eval()
    set_learned_input_ranges(model, ref)
    return ref, FastAnalogModel(model, copy.deepcopy(rpu))


@pytest.mark.parametrize("perfect", [False, True])
def test_fast_path_honours_out_scale(perfect):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16)).eval()
    rpu = analog.get_hw("pcm").rpu_config(out_noise=0.0)
    rpu.forward.out_scale, rpu.forward.is_perfect = 2.0, perfect
    ref, fast = _reference_and_fast(model, rpu)
    x = torch.randn(200, 64)
    with torch.no_grad():
        a, b = ref(x), fast(x)
        bias = model[0].bias
        ratio = float((a - bias).div(model(x) - bias).median())
    assert ratio == pytest.approx(2.0, rel=1e-3)
    assert torch.allclose(a, b, atol=1e-4)


@pytest.mark.parametrize("nm", ["ABS_MAX", "MAX", "CONSTANT"])
def test_input_ranges_under_noise_management_match_aihwkit(nm):
    """aihwkit clips to the range and divides by it before the tile, so abs-max management
    scales by the clipped input's max: vectors below the range use the DAC's full span."""
    from aihwkit.simulator.parameters.enums import NoiseManagementType, WeightNoiseType

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 16)).eval()
    store_input_ranges(model[0], torch.tensor([1.5]))
    rpu = analog.get_hw("pcm_hwa").rpu_config(out_noise=0.0)
    fwd = rpu.forward
    fwd.noise_management, fwd.nm_thres = NoiseManagementType[nm], 0.0
    fwd.w_noise, fwd.w_noise_type, fwd.ir_drop = 0.0, WeightNoiseType.NONE, 0.0
    ref, fast = _reference_and_fast(model, rpu)
    x = torch.randn(400, 64) * torch.rand(400, 1) * 3  # some vectors clip, some stay inside
    with torch.no_grad():
        a, b = ref(x), fast(x)
    assert 0.1 < (x.abs().amax(1) < 1.5).float().mean() < 0.9
    assert (a - b).abs().max() < 1e-4 * a.std()


def test_experiment_refuses_what_the_model_refuses_before_scoring(capsys):
    from analog.experiment import ExperimentConfig
    from nas.cli import main

    with pytest.raises(ConfigError, match="drift_scale needs a noise model") as err:
        ExperimentConfig(hw="reram_wan2022", times=("1d",), options={"g_max": 30.0},
                         sweeps={"drift_scale": [0.5, 0.7], "tile": ["torch"]})
    assert len(err.value.problems) == 3  # both scales, and read noise on the torch tile
    code = main(["analog-eval", "--space", "resnet", "--arch", "rn:s16-d1r1c16", "--data",
                 "digits", "--hw", "pcm_hermes", "--set", "g_max=25", "--times", "1d"])
    out = capsys.readouterr()
    assert code == 2 and "g_max must be <= 20.7" in out.err and "digital training" not in out.out
