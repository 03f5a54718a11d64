"""Quantized hardware models through torchao PT2E: N-bit fake-quant (``fqN``, ``wXaY``) and int8.

The model is exported with ``torch.export`` (dynamic batch dim), annotated by torchao's
``X86InductorQuantizer`` (conv/linear/pool/add patterns, conv-bn folding), calibrated on a few
input batches and converted. ``fqN`` uses custom ``QuantizationSpec``s (per-channel symmetric
weights, per-tensor affine activations with ``quant_min/quant_max`` for N bits) and
``convert_pt2e(fold_quantize=False)``: quantize/dequantize pairs in fp32 that run on any device.
``int8`` is torchao's default x86 config; ``torch.compile`` lowers it to real int8 kernels.
QAT: ``prepare_qat`` returns a trainable fake-quant graph, ``convert`` finishes it.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from analog.hw import HW, HardwareModel, register_resolver
from hwnas.common.errors import ConfigError

_EPS = 2**-12  # torchao's x86 default: keeps scales away from 0 on constant activations


def _pt2e():
    # Deferred: importing torchao's PT2E stack took 9 s on the 2-core CI VM (torch + timm: 22 s),
    # and every study imports analog for its registry; only quantizing needs it.
    from torchao.quantization import pt2e
    from torchao.quantization.pt2e import quantize_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as x86

    return pt2e, quantize_pt2e, x86


def _int_dtype(bits: int, signed: bool) -> torch.dtype:
    if bits <= 8:
        return torch.int8 if signed else torch.uint8
    return torch.int32  # wider codes: quant_min/quant_max carry the real range


def nbit_config(w_bits: int, a_bits: int, *, qat: bool = False):
    """A torchao ``QuantizationConfig``: per-channel symmetric N-bit weights, per-tensor
    affine activations with ``a_bits`` levels (observers for PTQ, fake-quant for QAT)."""
    pt2e, _, _ = _pt2e()
    from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec

    if qat:
        act_ctr = pt2e.FakeQuantize.with_args(observer=pt2e.MovingAverageMinMaxObserver, eps=_EPS)
        w_ctr = pt2e.FakeQuantize.with_args(
            observer=pt2e.MovingAveragePerChannelMinMaxObserver, eps=_EPS)
    else:
        act_ctr = pt2e.HistogramObserver.with_args(eps=_EPS)
        w_ctr = pt2e.PerChannelMinMaxObserver.with_args(eps=_EPS)
    act = QuantizationSpec(dtype=_int_dtype(a_bits, False), quant_min=0, quant_max=2**a_bits - 1,
                           qscheme=torch.per_tensor_affine, is_dynamic=False,
                           observer_or_fake_quant_ctr=act_ctr)
    weight = QuantizationSpec(dtype=_int_dtype(w_bits, True), quant_min=-(2 ** (w_bits - 1)),
                              quant_max=2 ** (w_bits - 1) - 1, qscheme=torch.per_channel_symmetric,
                              ch_axis=0, is_dynamic=False, observer_or_fake_quant_ctr=w_ctr)
    return QuantizationConfig(act, act, weight, None, qat)


def export(model: nn.Module, example: Tensor) -> nn.Module:
    """``torch.export`` with a dynamic batch dim, so any batch size runs afterwards."""
    dims = ({0: torch.export.Dim.AUTO},)
    return torch.export.export(model, (example,), dynamic_shapes=dims).module()


def _quantizer(config):
    _, _, x86 = _pt2e()
    return x86.X86InductorQuantizer().set_global(config)


@torch.no_grad()
def _calibrate(prepared: nn.Module, calib: Tensor, batch_size: int) -> None:
    for start in range(0, len(calib), batch_size):
        prepared(calib[start:start + batch_size])


def ptq(model: nn.Module, config, calib: Tensor, *, fold: bool,
        batch_size: int = 256) -> nn.Module:
    """Post-training quantization: export, annotate, calibrate on ``calib``, convert."""
    pt2e, qpt2e, _ = _pt2e()
    digital = copy.deepcopy(model).eval()
    prepared = qpt2e.prepare_pt2e(export(digital, calib[:2]), _quantizer(config))
    _calibrate(prepared, calib, batch_size)
    converted = qpt2e.convert_pt2e(prepared, fold_quantize=fold)
    pt2e.move_exported_model_to_eval(converted)
    # Lets generic code (train/eval loops) call .train()/.eval() on the graph module.
    pt2e.allow_exported_model_train_eval(converted)
    return converted


def prepare_qat(model: nn.Module, config, example: Tensor) -> nn.Module:
    """A trainable fake-quant copy of ``model`` (QAT); train it, then call ``convert``."""
    pt2e, qpt2e, _ = _pt2e()
    prepared = qpt2e.prepare_qat_pt2e(export(copy.deepcopy(model).train(), example[:2]),
                                      _quantizer(config))
    pt2e.allow_exported_model_train_eval(prepared)
    return prepared


def convert(prepared: nn.Module, *, fold: bool = False) -> nn.Module:
    pt2e, qpt2e, _ = _pt2e()
    pt2e.move_exported_model_to_eval(prepared)
    converted = qpt2e.convert_pt2e(prepared, fold_quantize=fold)
    pt2e.allow_exported_model_train_eval(converted)
    return converted


def _need_calib(hw: HardwareModel, calib: Tensor | None) -> Tensor:
    if calib is None or len(calib) < 2:
        raise ConfigError.one(
            f"{hw.name} calibration", "needs a batch of >= 2 input images (N, C, H, W)",
            None if calib is None else tuple(calib.shape),
            "pass calib=<training images, e.g. data.x_train[:512]>")
    return calib


@dataclass(frozen=True)
class FakeQuantHW(HardwareModel):
    """``w_bits`` weights and ``a_bits`` activations, fake-quantized (runs on any device)."""

    w_bits: int = 8
    a_bits: int = 8
    kind: ClassVar[str] = "quant"
    needs_calibration: ClassVar[bool] = True

    def config(self, *, qat: bool = False):
        return nbit_config(self.w_bits, self.a_bits, qat=qat)

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              **overrides: Any) -> nn.Module:
        self.check_overrides(overrides, ("batch_size",))
        return ptq(model, self.config(), _need_calib(self, calib), fold=False, **overrides)


@dataclass(frozen=True)
class Int8HW(HardwareModel):
    """torchao x86 int8 (uint8 activations, int8 per-channel weights); ``compile=True``
    lowers to real int8 kernels via inductor (CPU deployment figures)."""

    kind: ClassVar[str] = "quant"
    needs_calibration: ClassVar[bool] = True

    def config(self, *, qat: bool = False):
        _, _, x86 = _pt2e()
        return x86.get_default_x86_inductor_quantization_config(is_qat=qat)

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              **overrides: Any) -> nn.Module:
        self.check_overrides(overrides, ("batch_size", "compile"))
        do_compile = bool(overrides.pop("compile", False))
        converted = ptq(model, self.config(), _need_calib(self, calib), fold=True, **overrides)
        return torch.compile(converted) if do_compile else converted


for _bits in (8, 4):
    HW.register(f"fq{_bits}")(FakeQuantHW(
        f"fq{_bits}", f"{_bits}-bit weights and activations (torchao PT2E fake-quant)",
        w_bits=_bits, a_bits=_bits))
HW.register("w4a8")(FakeQuantHW("w4a8", "4-bit weights, 8-bit activations (PT2E fake-quant)",
                                w_bits=4, a_bits=8))
HW.register("int8")(Int8HW("int8", "torchao X86InductorQuantizer int8 PTQ (QAT via hwa_fit)"))

_GENERIC = re.compile(r"^(?:fq(?P<n>\d+)|w(?P<w>\d+)a(?P<a>\d+))$")
BITS_RANGE = (2, 16)


@register_resolver(f"fqN / wXaY (bits {BITS_RANGE[0]}..{BITS_RANGE[1]})")
def generic_fake_quant(name: str) -> FakeQuantHW | None:
    """``fqN`` (N-bit weights and activations) or ``wXaY`` (X-bit weights, Y-bit activations)."""
    match = _GENERIC.match(name)
    if match is None:
        return None
    w_bits, a_bits = int(match["n"] or match["w"]), int(match["n"] or match["a"])
    lo, hi = BITS_RANGE
    if not all(lo <= b <= hi for b in (w_bits, a_bits)):
        raise ConfigError.one("hardware model", f"bit widths must be in {lo}..{hi}", name,
                              "use e.g. fq8, fq4 or w4a8")
    return FakeQuantHW(name=name, description=f"{w_bits}-bit weights, {a_bits}-bit activations "
                       "(torchao PT2E fake-quant)", w_bits=w_bits, a_bits=a_bits)
