"""Analog coverage: which layers aihwkit maps, the share of weights and MACs they carry, and the
warning when a model keeps layers digital."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import analog
from analog.coverage import coverage, is_mappable, split_layers


def test_dense_model_is_fully_analog(make_cnn):
    small_cnn = make_cnn
    cov = coverage(small_cnn(), torch.zeros(1, 1, 8, 8))
    assert cov.digital_layers == [] and cov.mac_fraction == pytest.approx(1.0)
    # BatchNorm weights/biases and conv/linear biases are parameters that stay digital
    params = sum(p.numel() for p in small_cnn().parameters())
    analog_w = 16 * 9 + 32 * 16 * 9 + 10 * 32
    assert cov.weight_fraction == pytest.approx(analog_w / params)


def test_depthwise_conv_counts_as_digital(make_cnn):
    small_cnn = make_cnn
    model = small_cnn(depthwise=True)
    cov = coverage(model, torch.zeros(1, 1, 8, 8))
    assert cov.digital_layers == ["3"]
    # MACs per image: conv0 16*64*9, depthwise 16*64*9, conv5 32*16*16*9, fc 32*10
    macs = {"0": 16 * 64 * 9, "3": 16 * 64 * 9, "5": 32 * 16 * 16 * 9, "10": 320}
    expected = (macs["0"] + macs["5"] + macs["10"]) / sum(macs.values())
    assert cov.mac_fraction == pytest.approx(expected, rel=1e-6)
    assert cov.weight_fraction < coverage(small_cnn(), None).weight_fraction


def test_macs_are_counted_on_the_model_device(make_cnn):
    """A model on another device (the meta device stands in for CUDA here) is counted there,
    with the example image still on the CPU, as a study holds it."""
    model = make_cnn(depthwise=True)
    on_cpu = coverage(model, torch.zeros(1, 1, 8, 8))
    elsewhere = coverage(model.to("meta"), torch.zeros(1, 1, 8, 8))
    assert on_cpu.mac_fraction < 1  # the depthwise conv stays digital
    assert elsewhere.mac_fraction == pytest.approx(on_cpu.mac_fraction, rel=1e-6)


@pytest.mark.parametrize(("module", "ok"), [
    (nn.Conv2d(4, 4, 3), True), (nn.Conv2d(4, 4, 3, groups=2), False), (nn.Linear(3, 2), True),
    (nn.Conv1d(2, 2, 1), True), (nn.MultiheadAttention(8, 2).out_proj, False)])
def test_mappable(module, ok):
    assert is_mappable(module) is ok


def test_apply_warns_with_coverage_and_keeps_depthwise_digital(dw_cnn, digits):
    with pytest.warns(analog.CoverageWarning) as record:
        model = analog.apply(dw_cnn, "pcm", calib=digits.x_train[:8])
    msg = str(record[0].message)
    assert "3 (Conv2d, groups=16)" in msg and "% of weights" in msg and "% of MACs" in msg
    assert type(model.get_submodule("3")) is nn.Conv2d  # still the digital layer
    assert "Analog" in type(model.get_submodule("0")).__name__
    with torch.no_grad():
        assert model(digits.x_test[:4]).shape == (4, 10)


def test_evaluate_reports_coverage_and_warns(dw_cnn, digits):
    with pytest.warns(analog.CoverageWarning):
        res = analog.evaluate(dw_cnn, digits.x_test[:100], digits.y_test[:100], "pcm")
    assert 0 < res.coverage["mac_fraction"] < 1 and res.coverage["digital_layers"] == ["3"]
    assert res.rows()[0]["mac_fraction"] == res.coverage["mac_fraction"]


def test_split_layers_orders_names(make_cnn):
    small_cnn = make_cnn
    analog_names, digital = split_layers(small_cnn(depthwise=True))
    assert analog_names == ["0", "5", "10"] and digital == ["3"]
