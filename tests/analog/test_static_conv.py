"""The static conv path (``analog.static_conv``: one input scale for every vector, products as
convolutions of the quantized input map) against the patch path it replaces, which the
agreement tests hold against aihwkit's tiles; and the range update once per batch."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
import analog.fast as fast_module
from analog.fast import FastAnalogModel, patch_std
from analog.static_io import quantile_ranges


def _outputs(fast: FastAnalogModel, x: torch.Tensor, static: bool) -> torch.Tensor:
    for layer in fast.layers():
        layer.static = static and isinstance(layer.layer, nn.Conv2d) and layer.aligned \
            and layer.io.static_scale
    torch.manual_seed(4)
    fast.manual_seed(5)
    fast.program_analog_weights()
    fast.drift_analog_weights(86400.0)
    with torch.no_grad():
        return fast(x)


@pytest.mark.parametrize(("name", "options"), [("pcm_static", {"tile_size": 18}),
                                               ("pcm_hwa", {}),
                                               ("pcm_static", {"ir_drop": 0.0})])
def test_static_path_matches_the_patch_path(name, options, trained_cnn, digits, monkeypatch):
    """Same seed, one chunk per layer on both paths (so the same random draws reach the same
    outputs), full noise model: the outputs agree up to float summation order. Tile size 18
    splits the convs into channel-aligned rows (144 = 8 x 18) and the 32-output conv into two
    tiles per row."""
    monkeypatch.setattr(fast_module, "CHUNK_ELEMENTS", 1 << 40)
    monkeypatch.setattr(fast_module, "STATIC_CHUNK_ELEMENTS", 1 << 40)
    rpu = analog.get_hw(name).rpu_config(**options)
    calib, x = digits.x_train[:256], digits.x_test[:300]
    model = quantile_ranges(trained_cnn, rpu, calib) if name == "pcm_static" else trained_cnn
    fast = FastAnalogModel(model, rpu, calib=calib)
    patch, static = _outputs(fast, x, False), _outputs(fast, x, True)
    assert sum(layer.static for layer in fast.layers()) == 2  # both convs took the new path
    if options.get("tile_size"):
        assert [len(fast.layers()[1].tiles), len(fast.layers()[1].tiles[0])] == [8, 2]
    # an ADC step flips where a sum sits on a rounding edge: a rare image sees one (dropping
    # IR drop from the static path moves 25 % of pcm_hwa's images)
    off = (static - patch).abs().gt(1e-4)
    assert off.float().mean() <= 0.002 and off.any(1).float().mean() <= 0.02
    assert (static.argmax(1) == patch.argmax(1)).float().mean() >= 0.99
    assert (static - _outputs(fast, x, True)).abs().max() == 0.0  # deterministic under a seed


def test_ranges_update_once_per_batch_whatever_the_chunks(trained_cnn, digits, monkeypatch):
    """aihwkit updates a tile's input range once per forward call (``init_from_data``), from
    the whole batch: chunking a batch must not add updates."""
    rpu, calib = analog.get_hw("pcm_hwa").rpu_config(), digits.x_train[:256]
    ranges = []
    for chunk in (1 << 40, 1 << 12):  # one chunk per batch; a few images per chunk
        monkeypatch.setattr(fast_module, "CHUNK_ELEMENTS", chunk)
        monkeypatch.setattr(fast_module, "STATIC_CHUNK_ELEMENTS", chunk)
        fast = FastAnalogModel(trained_cnn, rpu, calib=calib)
        ranges.append([r for layer in fast.layers() for r in layer.ranges])
        assert [u for layer in fast.layers() for u in layer.range_updates] == [2, 2, 2]
    assert ranges[0] == pytest.approx(ranges[1], rel=1e-4)


@pytest.mark.parametrize(("kernel", "stride", "dilation", "padding"),
                         [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 3), ((1, 3), (2, 1), 1, 0),
                          ((3, 2), 2, 1, (2, 0))])
def test_patch_std_is_the_std_of_every_patch_value(kernel, stride, dilation, padding):
    conv = nn.Conv2d(4, 8, kernel, stride=stride, dilation=dilation, padding=padding)
    x = torch.randn(3, 4, 13, 11).relu() + 0.2
    cols = nn.functional.unfold(x[:, 1:3], kernel, dilation=dilation, padding=padding,
                                stride=stride)
    assert patch_std(conv, x, 1, 3) == pytest.approx(float(cols.double().std()), rel=1e-6)


def test_static_models_are_deterministic_under_a_seed(trained_cnn, digits):
    x, y, calib = digits.x_test[:150], digits.y_test[:150], digits.x_train[:128]
    run = [analog.evaluate(trained_cnn, x, y, "pcm_static", times=("1d",), repeats=3, seed=s,
                           calib=calib) for s in (5, 5, 6)]
    assert run[0].path == "fast" and run[0].accs == run[1].accs
    assert run[0].accs != run[2].accs
