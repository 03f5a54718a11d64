"""``pcm_static``: HERMES-like periphery (static input ranges, constant noise management, no
bound management) with ranges from aihwkit's post-training quantile calibration; the fast path
against aihwkit's tile in distribution at every drift time."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import analog
from analog.fast import FastAnalogModel, fast_unsupported
from analog.input_ranges import learned_input_ranges, store_input_ranges
from analog.static_io import QUANTILE
from hwnas.common.errors import ConfigError

TIMES = (1.0, 3600.0, 86400.0, 30 * 86400.0, 31536000.0)


def test_periphery_is_static_and_fast_path_covers_it(trained_cnn):
    rpu = analog.get_hw("pcm_static").rpu_config()
    fwd = rpu.forward
    assert (fwd.noise_management.name, fwd.bound_management.name) == ("CONSTANT", "NONE")
    assert rpu.pre_post.input_range.enable and rpu.mapping.max_input_size == 256
    assert fast_unsupported(trained_cnn, rpu) == []


def test_ranges_are_the_calibration_quantile(trained_cnn, digits):
    # 15 images: 960 first-layer patches, all inside aihwkit's 1000-vector cache, so the range
    # is exactly the quantile of every (non-zero) input vector's values
    hw, calib = analog.get_hw("pcm_static"), digits.x_train[:15]
    ready = hw.calibrated(trained_cnn, hw.rpu_config(), calib)
    patches = F.unfold(calib, 3, padding=1).transpose(1, 2).reshape(-1, 9)
    patches = patches[~(patches == 0).all(1)]
    want = float(patches.flatten().quantile(QUANTILE))
    assert float(learned_input_ranges(ready[0])[0]) == pytest.approx(want, rel=1e-5)
    assert learned_input_ranges(trained_cnn[0]) is None  # the caller's model is untouched
    assert all(learned_input_ranges(ready[i]) is not None for i in (0, 3, 8))


def test_learned_ranges_are_kept_and_missing_images_are_an_error(make_cnn):
    hw, model = analog.get_hw("pcm_static"), make_cnn()
    with pytest.raises(ConfigError, match="static input ranges need calibration images"):
        hw.calibrated(model, hw.rpu_config(), None)
    store_input_ranges(model[0], torch.tensor([0.7]))
    assert hw.calibrated(model, hw.rpu_config(), None) is model


def test_accuracy_distribution_matches_aihwkit_at_every_time(trained_cnn, digits, repeat_accs,
                                                             stats, gaps):
    """5 programmings per path at five drift times; both paths clip at the same calibrated
    ranges; means within Welch's bound (+1.5 pt), different seeds on the two paths."""
    hw, calib = analog.get_hw("pcm_static"), digits.x_train[:256]
    rpu = hw.rpu_config()
    ready = hw.calibrated(trained_cnn, rpu, calib)
    x, y, repeats = digits.x_test, digits.y_test, 5
    ref_accs = repeat_accs(hw.apply(ready, calib=calib), x, y, 0, repeats, TIMES)
    fast_accs = repeat_accs(FastAnalogModel(ready, rpu), x, y, 1, repeats, TIMES)
    for i, t in enumerate(TIMES):
        m_r, m_f = stats(ref_accs[i])[0], stats(fast_accs[i])[0]
        assert abs(m_r - m_f) <= gaps[0](ref_accs[i], fast_accs[i]) + 0.015, \
            (t, ref_accs[i], fast_accs[i])
    assert stats(fast_accs[0])[0] > 0.5  # a scored model, not noise


@pytest.mark.parametrize("tile_size", [256, 12])
def test_torch_calibration_keeps_aihwkit_vectors_and_ranges(tile_size, trained_cnn, digits):
    """The torch calibration against aihwkit's own: 300 images overflow every 1000-vector
    cache, so the ranges depend on which vectors ``randperm`` keeps. Tile size 12 cuts the
    conv inputs through channels (144 = 12 x 12) and splits outputs (16 -> 8 + 8), so every
    tile of a row must draw its own permutation for the stream to stay aligned."""
    from analog.static_io import aihwkit_quantile_ranges, quantile_ranges

    rpu = analog.get_hw("pcm_static").rpu_config(tile_size=tile_size)
    calib = digits.x_train[:300]
    ours = quantile_ranges(trained_cnn, rpu, calib)
    ref = aihwkit_quantile_ranges(trained_cnn, rpu, calib)
    rows = 0
    for name in ("0", "3", "8"):  # both convs and the classifier
        got = learned_input_ranges(dict(ours.named_modules())[name])
        want = learned_input_ranges(dict(ref.named_modules())[name])
        assert len(got) == len(want)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=0.0, msg=name)
        rows += len(got)
    assert rows == (3 if tile_size == 256 else 1 + 12 + 3)


@pytest.mark.gpu
def test_ranges_of_a_model_on_cuda_from_host_images(trained_cnn, digits):
    # the truth scores a model moved to the GPU and calibrates it with images left on the host
    hw, calib = analog.get_hw("pcm_static"), digits.x_train[:15]
    on_cpu = hw.calibrated(trained_cnn, hw.rpu_config(), calib)
    on_gpu = hw.calibrated(copy.deepcopy(trained_cnn).cuda(), hw.rpu_config(), calib)
    for i in (0, 3, 8):
        want, got = learned_input_ranges(on_cpu[i]), learned_input_ranges(on_gpu[i])
        assert torch.allclose(got.cpu(), want, rtol=1e-4)
