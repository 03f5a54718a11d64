"""The torch HWA engine (``analog.hwa_torch``) against aihwkit's inference tile: the same
training forward with the noise off (DAC/ADC quantization and IR drop on), the same output
distribution with read and output noise on, the same input gradient; the learned ranges and
per-channel clipping; CUDA refused clearly where there is none."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from analog.hwa_torch import TorchHwaModel, fp32_precision, torch_unsupported
from analog.input_ranges import set_learned_input_ranges, store_input_ranges
from analog.static_io import static_config

RANGES = torch.tensor([2.0, 1.5])
"""Two tile rows per layer (288 and 300 inputs on 256-input tiles)."""


def _layers():
    torch.manual_seed(0)
    return [(nn.Conv2d(32, 20, 3, padding=1), torch.randn(4, 32, 6, 6)),
            (nn.Linear(300, 10), torch.randn(5, 300))]


def _pair(layer: nn.Module, rpu):
    """aihwkit's tiles and the torch engine for ``layer``, ranges given and frozen, training."""
    from aihwkit.nn.conversion import convert_to_analog

    store_input_ranges(layer, RANGES)
    net = nn.Sequential(layer)
    ref = convert_to_analog(copy.deepcopy(net), copy.deepcopy(rpu), inplace=False)
    set_learned_input_ranges(net, ref)
    for tile in ref.analog_tiles():
        tile.input_range_update_idx.data.fill_(1 << 20)
    return ref.train(), TorchHwaModel(copy.deepcopy(net), rpu).train()


def _quiet():
    rpu = static_config()
    rpu.forward.w_noise, rpu.forward.out_noise = 0.0, 0.0
    return rpu


@pytest.mark.parametrize(("which", "saturate"), [(0, False), (1, False), (1, True)],
                         ids=["conv", "linear", "linear-at-adc-bound"])
def test_noise_free_forward_and_input_gradient_equal_aihwkit(which, saturate):
    layer, x = _layers()[which]
    x = x * 0.4  # inside the ranges: aihwkit's C++ tile passes no clipping mask back
    if saturate:  # same-sign sums past the ADC bound: no gradient through those outputs
        with torch.no_grad():
            layer.weight.abs_()
        x = x.abs()
    ref, mine = _pair(layer, _quiet())
    xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
    ya, yb = ref(xa), mine(xb)
    assert torch.allclose(ya, yb, atol=1e-6, rtol=0)  # 8-bit DAC/ADC and IR drop on
    grad = torch.randn_like(ya) * 0.1
    ya.backward(grad)
    yb.backward(grad)
    assert torch.allclose(xa.grad, xb.grad, atol=1e-6, rtol=1e-5)


def test_noisy_forward_has_aihwkit_mean_and_spread():
    layer, x = _layers()[0]
    ref, mine = _pair(layer, static_config())  # PCM read noise, output noise, IR drop
    with torch.no_grad():
        a = torch.stack([ref(x) for _ in range(40)])
        b = torch.stack([mine(x) for _ in range(40)])
    quiet_ref, _ = _pair(layer, _quiet())
    with torch.no_grad():
        clean = quiet_ref(x)
    # per-output mean and std over draws: the noise is the same distribution
    sd_a, sd_b = a.std(0), b.std(0)
    assert float(sd_b.mean() / sd_a.mean()) == pytest.approx(1.0, abs=0.05)
    se = (sd_a.square() / 40 + sd_b.square() / 40).sqrt()
    z = (a.mean(0) - b.mean(0)) / se
    assert float(z.abs().mean()) < 1.0  # |N(0,1)| averages 0.8
    assert float((b.mean(0) - clean).abs().mean()) < 3 * float(sd_b.mean()) / 40 ** 0.5 + 1e-3


def test_ranges_learn_with_aihwkits_gradient():
    layer, x = _layers()[1]
    rpu = _quiet()
    _, mine = _pair(layer, rpu)
    x = x * 3.0  # many inputs clipped: the ranges are pulled out
    y = mine(x)
    grad = torch.randn_like(y)
    y.backward(grad)
    got = mine.layers()[0].input_range.grad
    assert got is not None and got.shape == (2,) and bool((got != 0).all())
    # the clipped inputs' gradient follows InputRangeForward's rule: masked in the input
    xb = x.clone().requires_grad_()
    mine.zero_grad()
    mine(xb).backward(grad)
    clipped = torch.cat([x[:, :150].abs() > 2.0, x[:, 150:].abs() > 1.5], 1)
    assert bool((xb.grad[clipped] == 0).all()) and bool((xb.grad[~clipped] != 0).all())


def test_weight_noise_is_drawn_in_training_only_and_clipping_is_per_channel():
    layer, x = _layers()[0]
    rpu = _quiet()
    store_input_ranges(layer, RANGES)
    mine = TorchHwaModel(nn.Sequential(copy.deepcopy(layer)), rpu, weight_noise=0.05)
    for hwa_layer in mine.layers():
        hwa_layer.range_updates.fill_(1 << 20)
    with torch.no_grad():
        assert not torch.equal(mine.train()(x), mine(x))
        assert torch.equal(mine.eval()(x), mine(x))
    hwa_layer = mine.layers()[0]
    hwa_layer.clip_weights(1.0)
    w = hwa_layer.layer.weight.flatten(1)
    assert bool((w.abs().amax(1) <= layer.weight.flatten(1).std(1) * 1.0 + 1e-6).all())


def test_unsupported_models_are_named():
    rpu = static_config()
    rpu.mapping.max_input_size = 100  # splits 288 inputs inside a 9-value channel
    reasons = torch_unsupported(nn.Sequential(nn.Conv2d(32, 4, 3)), rpu)
    assert any("inside a channel" in r for r in reasons)
    with pytest.raises(ValueError, match="inside a channel"):
        TorchHwaModel(nn.Sequential(nn.Conv2d(32, 4, 3)), rpu)


def test_fp32_precision_turns_tf32_off_and_restores_it():
    before = torch.backends.cudnn.allow_tf32
    with fp32_precision("cuda") as used:
        assert used["tf32"] is False and not torch.backends.cudnn.allow_tf32
    assert torch.backends.cudnn.allow_tf32 == before
    with fp32_precision("cpu") as used:
        assert used == {"dtype": "float32", "tf32": None, "device": "cpu"}


def test_rasch2023_ramps_the_noise_distills_and_trains_longer(trained_cnn, digits):
    import analog
    from analog.hwa import HwaOptions, hwa_target
    from analog.hwa_recipe import RECIPES, ramp_hook
    from hwnas.train.loop import FitConfig

    seen = []
    hook = ramp_hook(seen.append, 0.1, RECIPES["rasch2023"], steps=8)
    for _ in range(6):
        hook(None)
    assert seen == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1, 0.1])
    model = copy.deepcopy(trained_cnn)
    target = hwa_target("pcm_static", hwa=HwaOptions(recipe="rasch2023"))
    result = analog.hwa_fit(model, digits, target, FitConfig(steps=2, lr=0.01, seed=0))
    assert result.steps == 6  # three times the steps asked for
    with pytest.raises(ValueError, match="noise ramp"):
        analog.hwa_fit(copy.deepcopy(trained_cnn), digits,
                       hwa_target("pcm_static", hwa=HwaOptions(recipe="rasch2023",
                                                               engine="aihwkit")),
                       FitConfig(steps=1))
    with pytest.raises(ValueError, match="recipe"):
        HwaOptions(recipe="nope")


def test_weight_gradient_is_aihwkits_update_up_to_its_mapping_and_dac():
    # aihwkit's tile learns d x'^T with x' = clip(x) / r (unquantized) and d = g / scales, in
    # tile units; the engine's gradient on the digital weight is that times scales * r, except
    # that it sees the DAC's quantized inputs (8 bits: about 1% apart here)
    layer, x = _layers()[1]
    ref, mine = _pair(layer, _quiet())
    x = x * 0.4
    y = mine(x)
    grad = torch.randn_like(y)
    y.backward(grad)
    got = mine.layers()[0].layer.weight.grad
    for tile, (a, b) in zip(ref.analog_tiles(), [(0, 150), (150, 300)], strict=True):
        xp, dp = tile.pre_update(x[:, a:b], 1, grad, 1)
        want = (dp.T @ xp) * tile.get_mapping_scales().view(-1, 1) * tile.input_range
        err = float((want - got[:, a:b]).norm() / want.norm())
        assert err < 0.02, err


@pytest.mark.parametrize("scale", [0.3, 3.0], ids=["decay-pulls-in", "clipped-pull-out"])
def test_input_stage_gradients_are_aihwkits_input_range_rule(scale):
    # the fused stage against autograd through aihwkit's InputRangeForward, the division by
    # the range and straight-through rounding, on inputs inside the range and far outside it
    from aihwkit.simulator.tiles.inference_torch import InputRangeForward

    from analog.hwa_stages import InputStage

    params = static_config().pre_post.input_range
    torch.manual_seed(1)
    x = torch.randn(6, 5, 4, 4) * scale
    grad = torch.randn_like(x)
    got_x, want_x = x.clone().requires_grad_(), x.clone().requires_grad_()
    got_r, want_r = (torch.tensor([1.2], requires_grad=True) for _ in range(2))
    got = InputStage.apply(got_x, got_r, 127.0, True, 127.0, params)
    ref = InputRangeForward.apply(want_x.clamp(-1.2, 1.2), want_r, params) / want_r * 127.0
    ref = ref + (ref.round() - ref).detach()
    assert torch.equal(got, ref)
    got.backward(grad)
    ref.backward(grad)
    assert torch.allclose(got_x.grad, want_x.grad, rtol=1e-5, atol=1e-6)
    assert float(got_r.grad) == pytest.approx(float(want_r.grad), rel=1e-4)


def test_output_stage_passes_the_gradient_straight_except_at_the_adc_bound():
    from analog.hwa_stages import OutputStage
    from analog.periphery import IOModel

    io = IOModel.of(_quiet().forward)
    torch.manual_seed(2)
    y = torch.randn(4, 3, 5, 5) * 80.0  # ADC units: some past the 8-bit bound
    coef = torch.rand(1, 3, 1, 1) + 0.5
    grad = torch.randn_like(y)
    got_y, want_y = y.clone().requires_grad_(), y.clone().requires_grad_()
    got_r, want_r = (torch.tensor([0.7], requires_grad=True) for _ in range(2))
    gen = torch.Generator().manual_seed(0)
    got = OutputStage.apply(got_y * 1.0, got_r, coef, io, gen, {})
    hard = io.clip_out(io.analog_out(want_y.detach().clone(), gen))
    at_bound = hard.abs() * io.o_unit >= 0.999 * io.out_bound
    ref = torch.where(at_bound, hard, want_y + (hard - want_y).detach()) * coef * want_r
    assert bool(at_bound.any()) and bool((~at_bound).any())
    assert torch.allclose(got, ref, rtol=1e-6, atol=1e-6)
    got.backward(grad)
    ref.backward(grad)
    assert torch.allclose(got_y.grad, want_y.grad, rtol=1e-6, atol=1e-7)
    assert float(got_r.grad) == pytest.approx(float(want_r.grad), rel=1e-5)
