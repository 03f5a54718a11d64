"""Layer-wise mapping (digital= patterns), parameter sweeps, device-model errors, provenance."""

from __future__ import annotations

import pytest
import torch

import analog
from analog.aimc import AnalogHW
from analog.devices import device_config
from analog.fast import FastAnalogModel, FastLayer
from analog.sweep import parse_sweeps, run_sweeps
from hwnas.common.errors import ConfigError
from nas.cli import main


def test_digital_layers_stay_digital_on_both_paths(trained_cnn, digits):
    x = digits.x_test[:50]
    converted = analog.apply(trained_cnn, "pcm", digital=["0"])
    from aihwkit.nn.modules.base import AnalogLayerBase

    kinds = {n: isinstance(m, AnalogLayerBase) for n, m in converted.named_modules()
             if n in ("0", "3", "8")}
    assert kinds == {"0": False, "3": True, "8": True}
    fast = FastAnalogModel(trained_cnn, analog.get_hw("pcm").rpu_config(), digital=["0"])
    assert not isinstance(fast.net[0], FastLayer) and isinstance(fast.net[3], FastLayer)
    with torch.no_grad():
        assert torch.equal(fast.net[0](x), trained_cnn[0](x))


def test_coverage_and_provenance_reflect_the_assignment(trained_cnn, digits):
    x, y = digits.x_test[:60], digits.y_test[:60]
    full = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), repeats=2)
    mixed = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), repeats=2,
                            digital=["0", "8"])
    assert full.coverage["mac_fraction"] == pytest.approx(1.0)
    assert 0 < mixed.coverage["mac_fraction"] < 1.0
    assert mixed.coverage["digital_layers"] == ["0", "8"]
    assert mixed.hw_config["digital"] == ["0", "8"] and full.hw_config["digital"] == []
    desc = full.hw_config
    assert desc["weight_scaling_omega"] == 1.0 and desc["weight_scaling_columnwise"]
    assert desc["noise_model"]["class"] == "PCMLikeNoiseModel" and desc["name"] == "pcm"


def test_pattern_that_matches_nothing_is_an_error(trained_cnn, digits):
    with pytest.raises(ConfigError, match="match at least one") as err:
        analog.apply(trained_cnn, "pcm", digital=["stem.*", "0"])
    assert "'stem.*'" in str(err.value) and "Fix:" in str(err.value)
    with pytest.raises(ConfigError, match="analog hardware"):
        analog.apply(trained_cnn, "fq8", digital=["0"], calib=digits.x_train[:32])


@pytest.mark.parametrize(("spec", "needle"), [
    (["bits=6,7"], "parameter must be one of"),
    (["adc_bits=1,8"], "adc_bits must be an integer in 2..16"),
    (["tile_size=0"], "tile_size must be an integer >= 1"),
    (["out_noise=-0.1"], "out_noise must be >= 0"),
    (["adc_bits=six"], "comma-separated list of integers"),
])
def test_bad_sweeps_are_clear_errors(spec, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_sweeps(spec)


def test_sweep_parses_and_runs_one_parameter_at_a_time(trained_cnn, digits):
    sweeps = parse_sweeps(["adc_bits=4,9", "compensation=off"])
    assert sweeps == {"adc_bits": [4, 9], "compensation": [False]}
    x, y = digits.x_test[:120], digits.y_test[:120]
    seen = []

    def run(opts):
        seen.append(opts)
        return analog.evaluate(trained_cnn, x, y, "pcm", times=("1s", "1d"), repeats=2,
                               options=opts)

    points = run_sweeps(run, sweeps, log=lambda _: None)
    assert seen == [{"adc_bits": 4}, {"adc_bits": 9}, {"compensation": False}]
    assert len(points) == 6 and {p.param for p in points} == {"adc_bits", "compensation"}
    low = [p.acc_mean for p in points if p.value == 4]
    high = [p.acc_mean for p in points if p.value == 9]
    assert sum(high) > sum(low)  # a 4-bit ADC loses accuracy: the sweep is not a no-op


def test_sweep_scores_as_the_main_curve_does(trained_cnn, digits):
    # with AdaBS on, a swept value equal to the model's own (pcm's 9-bit ADC) reproduces the
    # main curve exactly; a sweep that dropped AdaBS would score stale batch norms instead
    from dataclasses import replace

    from analog.experiment import ExperimentConfig, run_experiment

    small = replace(digits, x_test=digits.x_test[:120], y_test=digits.y_test[:120])
    cfg = ExperimentConfig(hw="pcm", times=("1d",), repeats=2, adabs=64, references=(),
                           sweeps={"adc_bits": [9]})
    out = run_experiment(trained_cnn, small, cfg, log=lambda _: None)
    (curve,) = out.curves
    assert [p.acc_mean for p in out.sweep] == [p.acc_mean for p in curve.result.points]


def test_device_model_aihwkit_cannot_build_is_a_clear_error(trained_cnn):
    hw = AnalogHW("future_device", "a noise model this aihwkit does not ship",
                  base=device_config("MemristorFrom2030NoiseModel"))
    with pytest.raises(ConfigError, match="aihwkit 1.2.0 cannot build") as err:
        hw.rpu_config()
    assert "MemristorFrom2030NoiseModel" in str(err.value)
    # aihwkit refuses a HERMES g_max beyond the characterized 20.7 uS (an assertion there)
    big = AnalogHW("hermes_big", "HERMES beyond its characterized range",
                   base=device_config("HermesNoiseModel", g_max=30.0))
    with pytest.raises(ConfigError, match="cannot build"):
        analog.apply(trained_cnn, big)


def test_device_model_defined_only_at_some_times(trained_cnn, digits):
    x, y = digits.x_test[:40], digits.y_test[:40]
    with pytest.raises(ConfigError, match="defined only at") as err:
        analog.evaluate(trained_cnn, x, y, "reram_wan2022", times=("1s", "30d"))
    assert "30d" in str(err.value)
    res = analog.evaluate(trained_cnn, x, y, "reram_wan2022", times=("1s", "2d"), repeats=2)
    assert res.path == "fast" and res.hw_config["noise_model"]["class"] == \
        "ReRamWan2022NoiseModel"


@pytest.mark.parametrize(("args", "needle"), [
    (["--sweep", "bits=6,7"], "parameter must be one of"),
    (["--sweep", "adc_bits=1"], "adc_bits must be an integer"),
    (["--set", "adc_bits=8,9"], "one value per parameter"),
])
def test_cli_bad_sweep_exits_2(args, needle, capsys):
    code = main(["analog-eval", "--space", "resnet", "--arch", "rn:s16-d1r1c16", "--data",
                 "digits", *args])
    assert code == 2 and needle in capsys.readouterr().err


def test_cli_digital_layer_typo_fails_before_training(capsys, tmp_path):
    code = main(["analog-eval", "--space", "resnet", "--arch", "rn:s16-d1r1c16", "--data",
                 "digits", "--digital-layers", "no_such_layer", "--out", str(tmp_path)])
    err = capsys.readouterr()
    assert code == 2 and "no_such_layer" in err.err and "digital training" not in err.out


def test_analog_list_names_every_model_exactly(capsys):
    assert main(["analog", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("reram_cmo", "reram_wan2022", "pcm_hermes", "pcm_custom_drift",
                 "pcm_aihwkit_default", "pcm_preset_io"):
        assert name in out
    pcm = next(line for line in out.splitlines() if line.startswith("pcm "))
    assert "InferenceRPUConfig defaults" in pcm and "omega 1" in pcm
