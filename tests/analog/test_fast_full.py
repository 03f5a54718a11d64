"""The fast path on the full HWA preset and on every device model, against aihwkit's C++ tiles.

As in test_fast.py: device weights bit for bit under one torch seed; the periphery's
deterministic parts (IR drop, input ranges) output for output; the noisy parts (per-MVM read
noise) and whole accuracy distributions over repeats in agreement at every drift time.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
from analog.fast import FastAnalogModel, fast_unsupported
from analog.input_ranges import calibrate_input_ranges, learned_input_ranges, store_input_ranges

DEVICES = ["pcm_hwa", "reram_cmo", "reram_wan2022", "pcm_hermes", "pcm_custom_drift",
           "pcm_aihwkit_default", "pcm_preset_io"]


def _times(name: str) -> tuple[float, ...]:
    hw = analog.get_hw(name)
    return hw.times if hw.times is not None else (0.0, 86400.0, 31536000.0)


def _converted(model, rpu, calib):
    import copy

    from aihwkit.nn.conversion import convert_to_analog

    ref = convert_to_analog(copy.deepcopy(model).eval(), rpu, inplace=True)
    if rpu.pre_post.input_range.enable:
        calibrate_input_ranges(ref, calib)
    return ref.eval()


@pytest.mark.parametrize("name", analog.list_hw())
def test_every_analog_model_runs_on_the_fast_path(name, trained_cnn):
    hw = analog.get_hw(name)
    if hw.kind == "analog":
        assert fast_unsupported(trained_cnn, hw.rpu_config()) == []


@pytest.mark.parametrize("name", DEVICES)
def test_device_weights_match_aihwkit_bit_for_bit(name, trained_cnn, digits):
    rpu = analog.get_hw(name).rpu_config(tile_size=40)  # several tiles per layer
    calib = digits.x_train[:128]
    ref = _converted(trained_cnn, rpu, calib)
    fast = FastAnalogModel(trained_cnn, rpu, calib=calib)
    ref_tiles, fast_tiles = list(ref.analog_tiles()), fast.tiles()
    assert len(ref_tiles) == len(fast_tiles) >= 6
    for t in _times(name)[-2:]:
        torch.manual_seed(3)
        ref.program_analog_weights()
        ref.drift_analog_weights(t)
        torch.manual_seed(3)
        fast.program_analog_weights()
        fast.drift_analog_weights(t)
        for rt, ft in zip(ref_tiles, fast_tiles, strict=True):
            assert torch.equal(torch.as_tensor(rt.tile.get_weights()), ft.weight), (name, t)


def test_ir_drop_and_input_ranges_match_aihwkit(trained_cnn, digits):
    """pcm_hwa without its random parts (output and read noise): calibration and the forward
    pass are deterministic, so ranges and outputs must agree value for value."""
    rpu = analog.get_hw("pcm_hwa").rpu_config(out_noise=0.0, tile_size=40)
    rpu.forward.w_noise = 0.0
    calib, x = digits.x_train[:256], digits.x_test[:200]
    ref = _converted(trained_cnn, rpu, calib)
    fast = FastAnalogModel(trained_cnn, rpu, calib=calib)
    ref_ranges = [float(t.input_range.detach()) for t in ref.analog_tiles()]
    fast_ranges = [r for layer in fast.layers() for r in layer.ranges
                   for _ in layer.out_sizes]
    assert ref_ranges == pytest.approx(fast_ranges, rel=1e-4)
    with torch.no_grad():
        a, b = ref(x), fast(x)
        rpu.forward.ir_drop = 0.0
        no_drop = FastAnalogModel(trained_cnn, rpu, calib=calib)(x)
    # IR drop changes the outputs (the test sees it) and both paths apply it alike
    assert (no_drop - b).abs().max() > 1e-2
    assert (a - b).abs().gt(1e-3).any(1).float().mean() <= 0.05
    assert (a.argmax(1) == b.argmax(1)).float().mean() >= 0.98


@pytest.mark.parametrize("noise_type", ["PCM_READ", "ADDITIVE_CONSTANT"])
def test_read_noise_spread_matches_aihwkit(noise_type):
    """Per-MVM weight noise: the std of the output over 400 reads of one input agrees."""
    from aihwkit.simulator.parameters.enums import WeightNoiseType

    torch.manual_seed(0)
    layer = nn.Sequential(nn.Linear(64, 8))
    rpu = analog.get_hw("pcm").rpu_config(out_noise=0.0, adc_bits=16, dac_bits=16)
    rpu.forward.w_noise, rpu.forward.w_noise_type = 0.05, WeightNoiseType[noise_type]
    ref = _converted(layer, rpu, None)
    fast = FastAnalogModel(layer, rpu)
    x = torch.randn(1, 64).expand(400, 64).contiguous()
    with torch.no_grad():
        sd_ref, sd_fast = ref(x).std(0), fast(x).std(0)
        clean = layer(x[:1])
    assert (sd_ref > 0.01).all()
    torch.testing.assert_close(sd_fast, sd_ref, rtol=0.2, atol=0.0)  # 400 draws: ~7 % per std
    torch.testing.assert_close(fast(x).mean(0, keepdim=True), clean, atol=0.05, rtol=0.0)


@pytest.mark.parametrize("name", ["pcm_hwa", "reram_cmo", "reram_wan2022", "pcm_hermes",
                                  "pcm_custom_drift"])
def test_accuracy_distribution_matches_aihwkit(name, trained_cnn, digits, repeat_accs, stats,
                                               gaps):
    """Full noise model, 5 repeats per path at every drift time the model defines; means
    within Welch's bound (+1.5 pt), different seeds on the two paths."""
    x, y, repeats, times = digits.x_test, digits.y_test, 5, _times(name)
    rpu = analog.get_hw(name).rpu_config()
    calib = digits.x_train[:256]
    ref_accs = repeat_accs(_converted(trained_cnn, rpu, calib), x, y, 0, repeats, times)
    fast_accs = repeat_accs(FastAnalogModel(trained_cnn, rpu, calib=calib), x, y, 1, repeats, times)
    for i, t in enumerate(times):
        m_r, m_f = stats(ref_accs[i])[0], stats(fast_accs[i])[0]
        assert abs(m_r - m_f) <= gaps[0](ref_accs[i], fast_accs[i]) + 0.015, \
            (name, t, ref_accs[i], fast_accs[i])


def test_hwa_learned_input_ranges_survive_copy_back(trained_cnn, digits):
    """pcm_hwa copy-back keeps the learned ranges; apply() and the fast path use them."""
    import copy

    from hwnas.train.loop import FitConfig

    model = copy.deepcopy(trained_cnn)
    analog.hwa_fit(model, digits, "pcm_hwa", FitConfig(epochs=1, lr=0.01, seed=0, steps=3))
    ranges = {n: learned_input_ranges(m) for n, m in model.named_modules()
              if learned_input_ranges(m) is not None}
    assert len(ranges) == 3 and all(float(r.min()) > 0 for r in ranges.values())
    assert "analog_input_range" not in str(list(model.state_dict()))  # checkpoints unchanged
    converted = analog.apply(model, "pcm_hwa")  # no calib needed: the ranges are learned
    tiles = sorted(float(t.input_range.detach()) for t in converted.analog_tiles())
    assert tiles == pytest.approx(sorted(float(v) for r in ranges.values() for v in r))
    fast = FastAnalogModel(model, analog.get_hw("pcm_hwa").rpu_config())
    assert sorted(r for layer in fast.layers() for r in layer.ranges) == pytest.approx(tiles)


def test_store_input_ranges_is_outside_the_state_dict(make_cnn):
    model = make_cnn()
    keys = set(model.state_dict())
    store_input_ranges(model[0], torch.tensor([2.5]))
    store_input_ranges(model[0], torch.tensor([-1.5]))
    assert set(model.state_dict()) == keys
    assert float(learned_input_ranges(copy_of(model)[0])) == 1.5


def copy_of(model):
    import copy

    return copy.deepcopy(model)


def test_calibration_keeps_batch_norm_statistics(trained_cnn, digits):
    hw = analog.get_hw("pcm_hwa")
    before = {k: v.clone() for k, v in trained_cnn.state_dict().items() if "running" in k}
    converted = hw.apply(trained_cnn, calib=digits.x_train[:256])
    after = {k: v for k, v in converted.state_dict().items() if "running" in k}
    assert len(after) == len(before) and all(
        torch.equal(v, after[k]) for k, v in before.items() if k in after)
