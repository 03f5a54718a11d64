"""Quantized hardware models (torchao PT2E): accuracy next to digital, and the QAT path."""

from __future__ import annotations

import copy

import pytest
import torch

import analog
from analog import quant
from hwnas.train.loop import FitConfig


@pytest.fixture(scope="module")
def accs(trained_cnn, digits):
    out = {}
    for hw in ("digital", "fq8", "int8", "fq4"):
        res = analog.evaluate(trained_cnn, digits.x_test, digits.y_test, hw,
                              calib=digits.x_train[:256])
        out[hw] = res.acc_mean[0]
    return out


def test_eight_bit_keeps_digital_accuracy(accs):
    assert abs(accs["fq8"] - accs["digital"]) <= 0.01
    assert abs(accs["int8"] - accs["digital"]) <= 0.015


def test_four_bit_costs_more_than_eight(accs):
    assert accs["fq4"] <= accs["fq8"] + 0.01


def _dequantized(qmodel: torch.nn.Module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Output of every dequantize op of a converted PT2E graph on ``x``: what the layers see."""
    seen: dict[str, torch.Tensor] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):  # noqa: ANN001, ANN202
            out = super().run_node(n)
            if n.op == "call_function" and "dequantize" in str(n.target):
                seen[f"{n.name}:{n.target}"] = out.detach()
            return out

    Recorder(qmodel).run(x)
    return seen


# fq4 only: int8's channels here hold fewer weights than levels, so the grid check cannot bite.
@pytest.mark.parametrize(("hw", "w_levels", "a_levels"), [("fq4", 16, 16)])
def test_weights_and_activations_take_only_the_hardware_levels(trained_cnn, digits, hw,
                                                               w_levels, a_levels):
    # A no-op quantizer leaves float weights (thousands of values per channel) and no
    # dequantize ops: both checks below fail on it.
    q = analog.get_hw(hw).apply(trained_cnn, calib=digits.x_train[:256])
    seen = _dequantized(q, digits.x_test[:64])
    weights = {k: v for k, v in seen.items() if "per_channel" in k}
    acts = {k: v for k, v in seen.items() if "per_tensor" in k}
    assert weights and acts
    for w in weights.values():
        per_channel = [torch.unique(row) for row in w.reshape(w.shape[0], -1)]
        assert max(len(u) for u in per_channel) <= w_levels
        for u in per_channel:  # a uniform grid: every gap is a whole number of steps
            gaps = u[1:] - u[:-1]
            if len(gaps):
                steps = gaps / gaps.min()
                assert torch.allclose(steps, steps.round(), atol=1e-3)
    for a in acts.values():
        assert len(torch.unique(a)) <= a_levels


def test_qat_prepare_convert_round_trip(digits):
    # a small graph: PT2E's QAT pattern matching takes seconds per conv-bn pair
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 36, 10))
    hw = analog.get_hw("fq4")
    prepared = quant.prepare_qat(model, hw.config(qat=True), digits.x_train[:4])
    prepared.train()  # generic loops call .train()/.eval() on it
    assert prepared(digits.x_train[:9]).shape == (9, 10)
    converted = quant.convert(prepared)
    assert converted(digits.x_test[:3]).shape == (3, 10)


def test_hwa_fit_for_quantized_hw_is_qat(trained_cnn, digits):
    model = copy.deepcopy(trained_cnn)
    result = analog.hwa_fit(model, digits, "fq4", FitConfig(epochs=1, lr=0.01, seed=0))
    assert result.steps > 0 and result.val_acc > 0.5
    changed = [k for k, v in model.state_dict().items()
               if v.is_floating_point() and not torch.equal(v, trained_cnn.state_dict()[k])]
    assert "0.weight" in changed and set(model.state_dict()) == set(trained_cnn.state_dict())
