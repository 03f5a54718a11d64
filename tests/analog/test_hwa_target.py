"""HWA trains for what is scored: the study's hardware options, its layer-wise mapping, and the
scored model's per-MVM read noise and IR drop (``analog.hwa.hwa_target``)."""

from __future__ import annotations

import copy
from dataclasses import asdict

import pytest
import torch
from torch import nn

import analog
from analog.hwa import HwaOptions, hwa_target, lightning_model, tile_model
from analog.input_ranges import learned_input_ranges
from hwnas.common.errors import ConfigError
from hwnas.train.loop import FitConfig

OPTIONS = {"adc_bits": 6, "dac_bits": 7, "out_noise": 0.02, "tile_size": 128, "g_max": 20.0}
"""Study options that move the periphery, the tiles and the device away from the preset."""


def _scored_fields(rpu) -> dict:
    """The fields of an aihwkit config that scoring reads: the forward periphery (DAC/ADC,
    noises, read noise, IR drop, noise and bound management), mapping, input ranges, device."""
    noise = rpu.noise_model
    return {"forward": asdict(rpu.forward), "mapping": asdict(rpu.mapping),
            "input_range": asdict(rpu.pre_post.input_range),
            "noise_model": (type(noise).__name__, noise.g_max, noise.prog_noise_scale,
                            noise.read_noise_scale, noise.drift_scale),
            "compensation": type(rpu.drift_compensation).__name__}


@pytest.mark.parametrize("hw", ["pcm", "pcm_static", "pcm_hwa"])
def test_training_config_equals_the_scored_one_field_by_field(hw):
    options = OPTIONS if hw != "pcm_hwa" else {"tile_size": 128}
    trained = hwa_target(hw, options=options).rpu_config()
    scored = analog.get_hw(hw).rpu_config(**options)
    assert _scored_fields(trained) == _scored_fields(scored)
    # ... plus the HWA noise and clipping, which scoring never reads
    assert trained.modifier.type.name == "ADD_NORMAL" and trained.modifier.std_dev == 0.05
    assert trained.clip.type.name == "LAYER_GAUSSIAN" and trained.clip.sigma == 3.0


def test_training_config_differs_from_the_preset_where_the_options_do():
    trained = _scored_fields(hwa_target("pcm_static", options=OPTIONS).rpu_config())
    preset = _scored_fields(hwa_target("pcm_static").rpu_config())
    assert trained["forward"]["out_res"] == 1 / 62 != preset["forward"]["out_res"]
    assert trained["forward"]["out_noise"] == 0.02 != preset["forward"]["out_noise"]
    assert trained["mapping"]["max_input_size"] == 128 != preset["mapping"]["max_input_size"]
    assert trained["noise_model"][1] == 20.0 != preset["noise_model"][1]
    # what the options leave alone stays the preset's
    assert trained["forward"]["ir_drop"] == preset["forward"]["ir_drop"] == 1.0
    assert trained["forward"]["w_noise"] == preset["forward"]["w_noise"] > 0


def test_the_lightning_mirror_follows_the_options():
    from analog.hwa import lightning_config

    target = hwa_target("pcm", options={"adc_bits": 6, "out_noise": 0.02, "tile_size": 128})
    mirrored = lightning_config(target.rpu_config(), target.hwa)
    assert mirrored.forward.out_res == 1 / 62 and mirrored.forward.out_noise == 0.02
    assert mirrored.mapping.max_input_size == 128
    default = lightning_config(hwa_target("pcm").rpu_config(), target.hwa)
    assert default.forward.out_res != 1 / 62 and default.mapping.max_input_size == 512


def test_the_study_trains_with_its_options_and_mapping(make_cnn):
    from nas.scoring import glue
    from nas.study.config import validate_study
    from nas.study.mapping import digital_patterns, fixed_choice

    cfg = validate_study({
        "name": "hwa_match", "space": "resnet", "data": {"name": "digits"},
        "objectives": [{"metric": "accuracy", "hw": "pcm_static", "time": "1d"},
                       {"metric": "latency"}],
        "hw_eval": {"options": {"pcm_static": OPTIONS}, "mapping": {"first_k_digital": 1},
                    "hwa": 1}})
    model = make_cnn()
    digital = digital_patterns(model, fixed_choice(cfg.hw_eval.mapping_cfg),
                               cfg.hw_eval.mapping_cfg)
    target = glue.hwa_target(cfg, "pcm_static", digital)
    assert target.digital == ("0",) and target.options == OPTIONS
    scored = analog.get_hw("pcm_static").rpu_config(**cfg.hw_eval.options["pcm_static"])
    assert _scored_fields(target.rpu_config()) == _scored_fields(scored)


@pytest.mark.parametrize("build", [tile_model, lightning_model])
def test_mapped_layers_stay_digital_in_training(make_cnn, build):
    hw = "pcm_static" if build is tile_model else "pcm"
    trained = build(make_cnn(), hwa_target(hw, digital=["0"]))
    assert type(trained[0]) is nn.Conv2d  # kept digital, as scoring keeps it
    assert type(trained[3]) is not nn.Conv2d and type(trained[8]) is not nn.Linear
    everything = build(make_cnn(), hwa_target(hw))
    assert type(everything[0]) is not nn.Conv2d


@pytest.mark.parametrize(("hw", "engine"), [("pcm", "lightning"), ("pcm_ideal", "lightning"),
                                            ("pcm_static", "torch"), ("pcm_hwa", "torch")])
def test_static_peripheries_train_on_the_torch_engine_the_rest_on_lightning(hw, engine):
    assert hwa_target(hw).engine == engine
    assert hwa_target(hw, hwa=HwaOptions(engine="aihwkit")).engine == "aihwkit"


def _frozen_ranges(net: nn.Module) -> nn.Module:
    """``net`` in train mode with its input ranges past aihwkit's init-from-data phase, so two
    training forward passes differ only by the noise drawn in them."""
    for name, param in net.named_parameters():
        if name.endswith("input_range_update_idx"):
            param.data.fill_(1e9)
    return net.train()


def test_read_noise_and_ir_drop_act_in_training_forward_passes(trained_cnn, digits):
    # no weight noise, output noise or clipping: only the scored read noise varies the output
    hwa = HwaOptions(weight_noise=0.0, clip_sigma=None)
    target = hwa_target("pcm_static", options={"out_noise": 0.0}, hwa=hwa)
    net = _frozen_ranges(tile_model(trained_cnn, target))
    for tile in net.analog_tiles():
        fwd = tile.rpu_config.forward
        assert fwd.w_noise == 0.0175 and fwd.w_noise_type.name == "PCM_READ"
        assert fwd.ir_drop == 1.0
    x = digits.x_train[:64]
    assert not torch.equal(net(x), net(x))  # a fresh read-noise draw in every MVM
    quiet = target.rpu_config()
    quiet.forward.w_noise, quiet.forward.ir_drop = 0.0, 0.0
    from aihwkit.nn.conversion import convert_to_analog

    plain = _frozen_ranges(convert_to_analog(copy.deepcopy(trained_cnn), quiet))
    assert torch.equal(plain(x), plain(x))  # without read noise the same settings repeat


@pytest.mark.parametrize("engine", ["aihwkit", "torch"])
def test_hwa_fit_writes_weights_and_ranges_back(trained_cnn, digits, engine):
    model = copy.deepcopy(trained_cnn)
    target = hwa_target("pcm_static", options={"tile_size": 128},
                        hwa=HwaOptions(engine=engine))
    result = analog.hwa_fit(model, digits, target, FitConfig(epochs=1, lr=0.01, seed=0))
    assert result.steps > 0 and 0.5 < result.val_acc <= 1.0
    assert set(model.state_dict()) == set(trained_cnn.state_dict())
    assert not torch.equal(model[3].weight, trained_cnn[3].weight)
    ranges = learned_input_ranges(model[3])
    assert ranges is not None and ranges.numel() == 2 and (ranges > 0).all()  # 144 rows / 128
    res = analog.evaluate(model, digits.x_test, digits.y_test, "pcm_static", times=("1d",),
                          repeats=2, options={"tile_size": 128})
    assert 0.5 < res.acc_mean[0] <= 1.0


def test_bad_targets_are_refused(make_cnn):
    with pytest.raises(ConfigError, match="adc_bits"):
        hwa_target("pcm", options={"adc_bits": 1})
    with pytest.raises(ConfigError, match="only analog hardware models take options"):
        hwa_target("fq8", options={"adc_bits": 8})
    with pytest.raises(ConfigError, match="must match at least one"):
        tile_model(make_cnn(), hwa_target("pcm_static", digital=["nope*"]))
    with pytest.raises(ConfigError, match="must not disagree"):
        analog.hwa_fit(make_cnn(), None, hwa_target("pcm"), options=HwaOptions(weight_noise=0.1))
