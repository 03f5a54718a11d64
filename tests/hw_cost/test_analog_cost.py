"""Analog tile cost model: hand-counted tiles and MVMs, analog shares, figures, bad input."""

from __future__ import annotations

import math
import random

import pytest
from torch import nn

from hw_cost.analog_cost import AnalogFigures, analog_cost, is_analog_mappable
from hwnas.common.errors import ConfigError


def _model() -> nn.Module:
    # dense 3x3 conv (27 x 300 matrix), depthwise conv (digital), linear 300 -> 10
    return nn.Sequential(nn.Conv2d(3, 300, 3, padding=1), nn.Conv2d(300, 300, 3, padding=1,
                         groups=300), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(300, 10))


def test_tiles_mvms_and_shares_by_hand():
    cost = analog_cost(_model(), (3, 8, 8), per_layer=True)
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
    assert small["tiles"] > analog_cost(_model(), (3, 8, 8))["tiles"]


def test_energy_and_latency_follow_the_published_figures():
    fig = AnalogFigures()
    assert fig.mvm_ns == pytest.approx(132.9, abs=0.1)  # 63.1 TOPS over 64 cores
    assert fig.mvm_nj == pytest.approx(13.43, abs=0.01)  # 9.76 TOPS/W
    cost = analog_cost(_model(), (3, 8, 8))
    assert cost["estimate"] is True
    assert cost["analog_energy_uj"] == pytest.approx(cost["tile_mvms"] * fig.mvm_nj / 1e3)
    assert cost["digital_energy_uj"] == pytest.approx(cost["digital_macs"] * 0.23e-6)
    assert cost["energy_uj"] > cost["analog_energy_uj"] > 0 and cost["latency_us"] > 0
    assert cost["fits_on_chip"] and cost["figures"]["tops_per_w"] == 9.76


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
