"""Analog tile cost model: hand-counted tiles and MVMs, analog shares, figures, bad input."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from torch import nn

from hw_cost.analog_cost import AnalogFigures, analog_cost, is_analog_mappable
from hwnas.common.errors import ConfigError


def _model() -> nn.Module:
    # dense 3x3 conv (27 x 300 matrix), depthwise conv (digital), linear 300 -> 10
    return nn.Sequential(nn.Conv2d(3, 300, 3, padding=1), nn.Conv2d(300, 300, 3, padding=1,
                         groups=300), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(300, 10))


def test_tiles_mvms_and_shares_by_hand():
    cost = analog_cost(_model(), (3, 8, 8), tile_size=256, per_layer=True)
    conv, linear = cost["layers"]
    assert (conv["rows"], conv["cols"], conv["tiles"], conv["mvms"]) == (27, 300, 2, 64)
    assert (linear["rows"], linear["cols"], linear["tiles"], linear["mvms"]) == (300, 10, 2, 1)
    assert cost["tiles"] == 4 and cost["tile_mvms"] == 64 * 2 + 1 * 2
    analog_macs = 64 * 27 * 300 + 300 * 10
    digital_macs = 64 * 300 * 9  # depthwise stays digital
    assert cost["analog_macs"] == analog_macs and cost["digital_macs"] == digital_macs
    assert cost["analog_mac_fraction"] == pytest.approx(analog_macs / (analog_macs + digital_macs))
    weights = 300 * 27 + 3000
    total = weights + 300 + 300 * 9 + 300 + 10
    assert cost["analog_weight_fraction"] == pytest.approx(weights / total)
    assert cost["digital_weight_layers"] == 1


def test_tile_size_changes_the_tiling():
    small = analog_cost(_model(), (3, 8, 8), tile_size=64, per_layer=True)
    # conv 27 x 300 -> 1 x ceil(300/64) tiles; linear 300 x 10 -> ceil(300/64) x 1 tiles
    assert [layer["tiles"] for layer in small["layers"]] == [math.ceil(300 / 64)] * 2
    assert small["tiles"] > analog_cost(_model(), (3, 8, 8))["tiles"] == 2


def test_energy_and_latency_follow_the_published_figures():
    assert AnalogFigures().read_mode == "four_phase"  # the precision the accuracy scores
    fig = AnalogFigures(read_mode="one_phase")  # the chip's published peak
    assert fig.mvm_ns == pytest.approx(132.9, abs=0.1)  # 63.1 TOPS over 64 cores
    assert fig.mvm_nj == pytest.approx(13.43, abs=0.01)  # 9.76 TOPS/W
    # a full 256x256 tile at 8 bits costs the published MVM; partial tiles cost less
    assert fig.tile_mvm_nj(256, 256) == pytest.approx(fig.mvm_nj)
    assert fig.tile_mvm_nj(27, 150) < fig.tile_mvm_nj(256, 150) < fig.tile_mvm_nj(256, 256)
    cost = analog_cost(_model(), (3, 8, 8), tile_size=256, per_layer=True, figures=fig)
    assert cost["estimate"] is True
    conv, linear = cost["layers"]
    assert conv["energy_nj"] == pytest.approx(64 * 2 * fig.tile_mvm_nj(27, 150))
    assert cost["analog_energy_uj"] == pytest.approx(
        (conv["energy_nj"] + linear["energy_nj"]) / 1e3)
    assert cost["energy_uj"] > cost["analog_energy_uj"] > 0 and cost["latency_us"] > 0
    assert cost["digital_reference_energy_uj"] > cost["digital_energy_uj"] > 0
    assert cost["fits_on_chip"] and cost["figures"]["tops_per_w"] == 9.76


def test_adc_bits_and_read_mode_scale_the_energy():
    base = AnalogFigures()
    assert replace(base, adc_bits=9).tile_mvm_nj(256, 256) > base.tile_mvm_nj(256, 256)
    assert replace(base, adc_bits=6).tile_mvm_nj(256, 256) < base.tile_mvm_nj(256, 256)
    four = replace(base, read_mode="four_phase")
    assert four.mvm_nj == pytest.approx(2 * 256 * 256 / 2.48e12 * 1e9)


def test_hardware_model_sets_tile_size_bits_and_read_mode():
    from hw_cost.analog_cost import figures_for

    pcm, hermes = figures_for("pcm"), figures_for("pcm_hermes")
    assert (pcm.tile_rows, pcm.adc_bits, pcm.read_mode) == (512, 9, "four_phase")
    # one- vs four-phase is how signed inputs meet signed weights, not devices per weight:
    # HERMES' two devices per weight leave the read mode as it was asked
    assert hermes.read_mode == "four_phase"
    assert figures_for("pcm_hermes", AnalogFigures(read_mode="one_phase")).read_mode == \
        "one_phase"
    assert figures_for("pcm_hermes", AnalogFigures(read_mode="four_phase")).read_mode == \
        "four_phase"
    assert figures_for("pcm", AnalogFigures()).tile_rows == 512
    assert analog_cost(_model(), (3, 8, 8), hw="pcm")["tile_size"] == 512


def test_hardware_model_options_reach_the_estimate():
    # a study's fixed parameters (hw_eval.options) change what the accuracy model simulates,
    # so the estimate follows them; an explicit tile_size still overrides
    base = analog_cost(_model(), (3, 8, 8), hw="pcm")
    opts = analog_cost(_model(), (3, 8, 8), hw="pcm", hw_options={"tile_size": 64, "adc_bits": 11})
    assert (opts["tile_size"], opts["adc_bits"], base["adc_bits"]) == (64, 11, 9)
    assert opts["tiles"] > base["tiles"] and opts["analog_energy_uj"] > base["analog_energy_uj"]
    assert analog_cost(_model(), (3, 8, 8), hw="pcm", hw_options={"tile_size": 64},
                       tile_size=128)["tile_size"] == 128
    with pytest.raises(ConfigError, match="adc_bits must be an integer in 2..16"):
        analog_cost(_model(), (3, 8, 8), hw="pcm", hw_options={"adc_bits": 40})


def test_layers_kept_digital_move_their_cost():
    mixed = analog_cost(_model(), (3, 8, 8), digital=["4"])
    full = analog_cost(_model(), (3, 8, 8))
    assert mixed["analog_macs"] == full["analog_macs"] - 300 * 10
    assert mixed["digital_energy_uj"] > full["digital_energy_uj"]
    with pytest.raises(ConfigError, match="match at least one"):
        analog_cost(_model(), (3, 8, 8), digital=["nope.*"])


def test_conv2d_same_stays_digital_as_in_aihwkit_conversion():
    from timm.layers import Conv2dSame

    model = nn.Sequential(Conv2dSame(3, 8, 3), nn.Flatten(), nn.Linear(8 * 64, 10))
    assert analog_cost(model, (3, 8, 8))["analog_macs"] == 8 * 64 * 10


def test_dense_resnet_maps_more_than_depthwise_mbconv():
    from search_spaces import get_space

    rng = random.Random(0)
    share = {}
    for name in ("resnet", "mbconv"):
        space = get_space(name)
        model = space.build(space.random_arch(rng), in_chans=1, num_classes=10, img_size=16)
        share[name] = analog_cost(model, (1, 16, 16))["analog_mac_fraction"]
    assert share["resnet"] == pytest.approx(1.0, abs=1e-9) and share["mbconv"] < 1.0


def test_attention_matmuls_stay_digital():
    import timm

    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, depth=2,
                            num_classes=10)
    cost = analog_cost(vit, (3, 32, 32))
    assert 0.5 < cost["analog_mac_fraction"] < 1.0 and cost["digital_macs"] > 0


@pytest.mark.parametrize("module, mappable", [
    (nn.Linear(4, 4), True), (nn.Conv2d(4, 4, 3), True), (nn.Conv2d(4, 4, 3, groups=2), False),
    (nn.Conv2d(4, 4, 3, groups=4), False), (nn.LayerNorm(4), False),
])
def test_what_maps_to_tiles(module, mappable):
    assert is_analog_mappable(module) is mappable


@pytest.mark.parametrize("tile_size", [0, -256, 2.5])
def test_bad_tile_size(tile_size):
    with pytest.raises(ConfigError, match="tile_size: must be a positive integer"):
        analog_cost(_model(), (3, 8, 8), tile_size=tile_size)


def test_hermes_two_devices_per_sign_fill_one_cell():
    # pcm and pcm_hermes share tile size and ADC bits; HERMES' 4 devices per weight (2 per
    # conductance, equal weight) share one unit cell, so the energy is pcm's
    pcm = analog_cost(_model(), (3, 8, 8), hw="pcm")
    hermes = analog_cost(_model(), (3, 8, 8), hw="pcm_hermes")
    assert hermes["energy_uj"] == pytest.approx(pcm["energy_uj"])
    assert (hermes["devices_per_weight"], pcm["devices_per_weight"]) == (4, 2)
    assert hermes["cells_per_weight"] == pcm["cells_per_weight"] == 1
    assert hermes["assumptions"]["read_mode"] == "four_phase"


def test_a_tile_taller_than_a_core_converts_once_per_core_slice():
    fig = AnalogFigures(tile_rows=512, tile_cols=512)
    assert fig.core_slices(512, 100) == [(256, 100), (256, 100)]
    assert fig.core_slices(300, 600) == [(256, 256), (256, 256), (256, 88), (44, 256),
                                         (44, 256), (44, 88)]
    adc = 0.5 * fig.mvm_nj * 100 / 256  # one core's conversions of 100 columns at 8 bits
    array = 0.5 * fig.mvm_nj * 512 * 100 / (256 * 256)
    assert fig.tile_mvm_nj(512, 100) == pytest.approx(2 * adc + array)
    assert fig.tile_mvm_nj(512, 100) == pytest.approx(2 * fig.tile_mvm_nj(256, 100))
    ungated = replace(fig, gate_unused_adcs=False)
    assert ungated.tile_mvm_nj(300, 100) == pytest.approx(
        2 * 0.5 * fig.mvm_nj + 0.5 * fig.mvm_nj * 300 * 100 / 256**2)


def test_a_model_larger_than_the_chip_is_flagged_with_its_rule():
    big = nn.Sequential(nn.Linear(4096, 4096))
    cost = analog_cost(big, (4096,), tile_size=256)
    assert (cost["cores_used"], cost["fits_on_chip"], cost["chips_needed"]) == (256, False, 4)
    assert "no reprogramming" in cost["assumptions"]["overflow"]
    assert analog_cost(_model(), (3, 8, 8))["chips_needed"] == 1


def test_every_estimate_carries_its_assumptions_and_range():
    cost = analog_cost(_model(), (3, 8, 8), hw="pcm", hw_options={"adc_bits": 10})
    assumed = cost["assumptions"]
    assert (assumed["adc_share"], assumed["adc_bits"], assumed["tile"], assumed["read_mode"]) \
        == (0.5, 10, "512x512", "four_phase")
    assert "lower bound" in assumed["digital_reference"] and "lower bound" in \
        cost["digital_reference_is"]
    span = cost["energy_uj_range"]
    assert span["low"] < cost["energy_uj"] < span["high"]
    fig = figures_for_cost(cost)
    # the ends are the estimate at the extreme assumptions, nothing else changed
    ends = [analog_cost(_model(), (3, 8, 8), figures=replace(fig, adc_share=a, adc_scaling=k))
            ["energy_uj"] for a in (0.3, 0.7) for k in ("walden", "linear")]
    assert (span["low"], span["high"]) == (pytest.approx(min(ends)), pytest.approx(max(ends)))


def figures_for_cost(cost: dict) -> AnalogFigures:
    from dataclasses import fields

    return AnalogFigures(**{f.name: cost["figures"][f.name] for f in fields(AnalogFigures)})


@pytest.mark.parametrize(("field", "value"), [("read_mode", "two_phase"),
                                              ("adc_scaling", "cubic"), ("adc_share", 1.5)])
def test_bad_figures_are_clear_errors(field, value):
    with pytest.raises(ConfigError, match=field):
        AnalogFigures(**{field: value})
