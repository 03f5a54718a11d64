"""The fast analog path against aihwkit's own C++ tiles (the reference).

Three levels: (1) the device weights (programming noise, drift, read noise) are aihwkit's, bit
for bit, under the same torch seed, on one tile or split over many; (2) without output noise
the emulated periphery (noise/bound management, DAC/ADC) gives aihwkit's outputs; (3) with the
full noise model the accuracy distributions over repeats agree at every drift time.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
from analog.fast import FastAnalogModel, IOModel, fast_unsupported, split_sizes

TIMES = (0.0, 86400.0, 31536000.0)


def _pair(model, **opts):
    hw = analog.get_hw("pcm")
    return analog.apply(model, "pcm", **opts), FastAnalogModel(model, hw.rpu_config(**opts))


def _program(ref, fast, seed: int, t: float) -> None:
    torch.manual_seed(seed)
    ref.program_analog_weights()
    ref.drift_analog_weights(t)
    torch.manual_seed(seed)
    fast.manual_seed(seed)
    fast.program_analog_weights()
    fast.drift_analog_weights(t)


@pytest.mark.parametrize("tile_size", [512, 40, 12])
def test_device_weights_and_outputs_match_aihwkit(tile_size, trained_cnn, digits):
    # tile_size 40 splits the 144-input conv over 4 tiles, 12 also splits outputs
    ref, fast = _pair(trained_cnn, out_noise=0.0, tile_size=tile_size)
    ref_tiles, fast_tiles = list(ref.analog_tiles()), fast.tiles()
    assert len(ref_tiles) == len(fast_tiles) >= (3 if tile_size == 512 else 6)
    x = digits.x_test[:100]
    for t in TIMES if tile_size == 512 else TIMES[1:2]:
        _program(ref, fast, seed=7, t=t)
        for rt, ft in zip(ref_tiles, fast_tiles, strict=True):
            assert torch.equal(torch.as_tensor(rt.tile.get_weights()), ft.weight)
            assert float(rt.alpha) == pytest.approx(float(ft.alpha), rel=1e-5)
        with torch.no_grad():
            a, b = ref(x), fast(x)
        # identical up to float summation order: where a sum sits on an ADC rounding edge the
        # step can flip, which moves every logit of that image a little; few images see one
        assert (a - b).abs().gt(1e-3).any(1).float().mean() <= 0.05
        assert (a.argmax(1) == b.argmax(1)).float().mean() >= 0.98


def test_bound_management_matches_aihwkit():
    """Large inputs on a 64-input layer saturate the ADC (bound 3): RPUCuda re-runs each
    saturated vector at half the input scale; the emulation must do the same per vector."""
    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(64, 16))
    ref, fast = _pair(layer, out_noise=0.0, out_bound=3.0)
    x = torch.randn(300, 64) * torch.rand(300, 1) * 4
    x[:5] = 0.0  # all-zero vectors: RPUCuda returns exact zeros
    with torch.no_grad():
        a, b = ref(x), fast(x)
    io = IOModel.of(ref[0].analog_module.rpu_config.forward)
    assert io.bm and io.out_bound == 3.0
    saturating = (layer(x).abs().amax(1) > 1.0).float().mean()
    assert saturating > 0.3  # the test exercises bound management
    bias = layer[0].bias.detach().expand(5, -1)
    assert torch.equal(a[:5], bias) and torch.equal(b[:5], a[:5])
    close = torch.isclose(a, b, atol=1e-4, rtol=1e-4).float().mean()
    assert close > 0.99


def test_accuracy_distribution_matches_aihwkit(trained_cnn, digits, repeat_accs, stats, gaps):
    """Full PCM model (output noise 0.06): 6 repeats per path. Unpaired (different seeds):
    means within Welch's bound (+1 pt); paired (same seeds, so the same device weights):
    the mean per-repeat difference within the paired t bound (+0.5 pt)."""
    welch_gap, paired_gap = gaps
    x, y, repeats = digits.x_test, digits.y_test, 6
    ref, fast = _pair(trained_cnn)
    ref_accs = repeat_accs(ref, x, y, 0, repeats, TIMES)
    fast_other = repeat_accs(fast, x, y, 1, repeats, TIMES)
    fast_same = repeat_accs(fast, x, y, 0, repeats, TIMES)
    for i, t in enumerate(TIMES):
        m_r, m_f = stats(ref_accs[i])[0], stats(fast_other[i])[0]
        assert abs(m_r - m_f) <= welch_gap(ref_accs[i], fast_other[i]) + 0.01, \
            (t, ref_accs[i], fast_other[i])
        diffs = [a - b for a, b in zip(ref_accs[i], fast_same[i], strict=True)]
        assert abs(stats(diffs)[0]) <= paired_gap(diffs) + 0.005, (t, diffs)
    # drift lowers accuracy on both paths: the comparison is not between two flat lines
    assert stats(ref_accs[-1])[0] < stats(ref_accs[0])[0]


def test_fast_path_is_deterministic_under_a_seed(trained_cnn, digits):
    x, y = digits.x_test[:150], digits.y_test[:150]
    run = [analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), repeats=3, seed=s)
           for s in (5, 5, 6)]
    assert run[0].path == "fast" and run[0].accs == run[1].accs
    assert run[0].accs != run[2].accs


def _asymmetric_config():
    from analog.aimc import _pcm_config

    rpu = _pcm_config()
    rpu.forward.inp_asymmetry = 0.05
    return rpu


def test_unsupported_config_falls_back_to_aihwkit(trained_cnn, digits):
    from analog.aimc import AnalogHW

    hw = AnalogHW("pcm_asym", "pcm with DAC asymmetry (not emulated)", base=_asymmetric_config)
    reasons = fast_unsupported(trained_cnn, hw.rpu_config())
    assert reasons == ["forward in/out asymmetry"]
    with pytest.warns(analog.FastPathWarning, match="asymmetry"):
        res = analog.evaluate(trained_cnn, digits.x_test[:40], digits.y_test[:40], hw)
    assert res.path == "aihwkit" and res.notes


@pytest.mark.parametrize("size", [1, 7, 144, 512, 513, 1500])
@pytest.mark.parametrize("max_size", [0, 16, 512])
def test_tile_split_matches_aihwkit(size, max_size):
    from aihwkit.simulator.tiles.array import TileModuleArray

    assert split_sizes(size, max_size) == TileModuleArray.get_split_sizes(None, size, max_size)


@pytest.mark.parametrize(("kernel", "stride", "dilation", "padding"),
                         [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 3), ((1, 3), (2, 1), 1, 0)])
def test_patch_scale_is_the_window_max(kernel, stride, dilation, padding):
    from analog.fast import Patches

    conv = nn.Conv2d(4, 8, kernel, stride=stride, dilation=dilation, padding=padding)
    x = torch.randn(3, 4, 13, 11)
    patches = Patches(conv, x)
    io = IOModel.of(analog.get_hw("pcm").rpu_config().forward)
    reduced = patches.xp.abs().amax(dim=1, keepdim=True)
    want = nn.functional.max_pool2d(reduced, kernel, stride=stride, dilation=dilation)
    torch.testing.assert_close(patches.scale(io, 0, 4), want.view(3, 1, -1), rtol=0, atol=0)
    # the scale is the abs-max of each im2col column
    cols = nn.functional.unfold(x, kernel, dilation=dilation, padding=padding, stride=stride)
    torch.testing.assert_close(patches.scale(io, 0, 4), cols.abs().amax(1, keepdim=True))
