"""AdaBS: batch-norm statistics re-estimated through the analog model.

Against a reference (the batch statistics computed by hand), on both analog paths (the fast
path against aihwkit's tiles, as distributions), for its effect (drift loss and spread fall),
and for bad input.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
from analog.adabs import AdaBSWarning, batch_norms, recalibrate
from analog.precision import sampling_se
from hwnas.common.errors import ConfigError


def test_recalibration_gives_the_batch_statistics():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4)).eval()
    x = torch.randn(300, 1, 8, 8) * 3 + 1
    conv_out = model[0](x).detach()
    weight_before = model[0].weight.clone()
    assert recalibrate(model, x, batch_size=100) == 1
    bn = model[1]
    # momentum=None: the plain average of the three batches' statistics
    means = torch.stack([conv_out[i:i + 100].mean((0, 2, 3)) for i in (0, 100, 200)])
    torch.testing.assert_close(bn.running_mean, means.mean(0), rtol=1e-5, atol=1e-5)
    assert not bn.training and bn.momentum == 0.1  # restored
    assert torch.equal(model[0].weight, weight_before)


def _curve(model, digits, *, adabs: int, seed: int = 0, repeats: int = 6, fast: bool = True):
    x, y = digits.x_test, digits.y_test
    return analog.evaluate(model, x, y, "pcm", times=("1s", "1y"), repeats=repeats, seed=seed,
                           adabs=adabs, adabs_images=digits.x_train, fast=fast)


def test_adabs_leaves_the_callers_model_untouched(trained_cnn, digits):
    before = {k: v.clone() for k, v in trained_cnn.state_dict().items()}
    res = _curve(trained_cnn, digits, adabs=256, repeats=2)
    assert res.adabs == 256 and res.rows()[0]["adabs"] == 256
    after = trained_cnn.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_adabs_recovers_drift_loss(trained_cnn, digits):
    """A year of drift with stale statistics costs accuracy; AdaBS recovers some of it."""
    plain = _curve(trained_cnn, digits, adabs=0)
    ada = _curve(trained_cnn, digits, adabs=512)
    year_plain, year_ada = plain.points[1], ada.points[1]
    assert year_ada.acc_mean > year_plain.acc_mean, (year_plain.accs, year_ada.accs)


def test_fast_path_agrees_with_aihwkit_under_adabs(trained_cnn, digits, gaps):
    """Same protocol on both paths; means within Welch's bound (+1 pt) at every time."""
    fast = _curve(trained_cnn, digits, adabs=256, seed=0, fast=True)
    ref = _curve(trained_cnn, digits, adabs=256, seed=1, fast=False)
    assert fast.path == "fast" and ref.path == "aihwkit"
    for pf, pr in zip(fast.points, ref.points, strict=True):
        assert abs(pf.acc_mean - pr.acc_mean) <= gaps[0](pf.accs, pr.accs) + 0.01, \
            (pf.accs, pr.accs)


def test_precision_target_is_met_and_reported(trained_cnn, digits):
    res = analog.evaluate(trained_cnn, digits.x_test, digits.y_test, "pcm", times=("1d",),
                          repeats=2, seed=0, adabs=256, adabs_images=digits.x_train,
                          target_se=0.03, max_repeats=12)
    point = res.points[0]
    assert point.acc_se <= 0.03 or point.repeats == 12
    # images sized from the digital accuracy: sampling error at most target / sqrt(2)
    assert point.repeats >= 2 and point.images == res.images <= len(digits.y_test)
    assert sampling_se(point.acc_mean, point.images) < 0.03
    assert min(point.accs) <= point.acc_median <= max(point.accs)
    again = analog.evaluate(trained_cnn, digits.x_test, digits.y_test, "pcm", times=("1d",),
                            repeats=2, seed=0, adabs=256, adabs_images=digits.x_train,
                            target_se=0.03, max_repeats=12)
    assert again.points[0].accs == point.accs  # reproducible under the seed


def test_adabs_larger_than_the_training_images_is_refused(trained_cnn, digits):
    with pytest.raises(ConfigError, match="adabs.*training images available"):
        analog.evaluate(trained_cnn, digits.x_test[:50], digits.y_test[:50], "pcm",
                        adabs=100, adabs_images=digits.x_train[:10])


def test_adabs_without_batch_norm_warns():
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 10)).eval()
    x, y = torch.randn(40, 1, 8, 8), torch.randint(0, 10, (40,))
    assert not batch_norms(model)
    with pytest.warns(AdaBSWarning, match="no batch norm"):
        res = analog.evaluate(model, x, y, "pcm", adabs=16, adabs_images=x)
    assert res.adabs == 0 and any("no batch norm" in n for n in res.notes)


def test_input_range_calibration_keeps_batch_norm_statistics(trained_cnn, digits):
    converted = analog.apply(trained_cnn, "pcm_hwa", calib=digits.x_train[:128])
    ref = dict(trained_cnn.named_buffers())
    for name, buf in converted.named_buffers():
        key = name.replace("analog_module.", "")
        if name.endswith(("running_mean", "running_var")) and key in ref:
            assert torch.equal(buf, ref[key]), name
