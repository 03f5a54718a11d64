"""Deployed forms: the model as it would run once deployed, which is what latency must time.

A study that scores int8 accuracy should optimize int8 latency, not fp32 eager latency, so a
measurement names the form of the model it times:

    eager    the float model as built (fp32 unless ``dtype`` says otherwise)
    compile  the float model through ``torch.compile`` (inductor)
    int8     torchao's x86 int8 PTQ model (``analog.apply(model, "int8")``: PT2E export,
             ``X86InductorQuantizer``, conv-bn folding) lowered by inductor's x86 passes to
             oneDNN int8 kernels; CPU
    fp16     the model and its input in float16 (a GPU form; a CPU needs native fp16 arithmetic)
    bf16     the same in bfloat16 (a CPU needs native bf16 arithmetic)

Forms are a registry (``FORMS``) of functions ``(model, example) -> module``; ``form_problems``
says why a form cannot run on a device, before anything is built (which forms a device runs, and
which it would only emulate, is the latency backend's to say: ``hw_cost.backends``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

import analog
from hwnas.common.errors import Problem
from hwnas.common.registry import Registry

FormFn = Callable[[nn.Module, Tensor], nn.Module]
FORMS: Registry[FormFn] = Registry("latency form")
# The dtype a form computes in; other forms compute in the measurement's dtype.
FORM_DTYPES = {"fp16": "fp16", "bf16": "bf16"}
CALIB_IMAGES = 8


@FORMS.register("eager")
def _eager(model: nn.Module, example: Tensor) -> nn.Module:
    return model


@FORMS.register("compile")
def _compile(model: nn.Module, example: Tensor) -> nn.Module:
    return torch.compile(model)


@FORMS.register("int8")
def _int8(model: nn.Module, example: Tensor) -> nn.Module:
    """torchao's int8 PTQ model (``analog.apply(model, "int8")``) lowered by inductor's x86
    int8 fusion passes (``lower_pt2e_quantized_to_x86``: each dequantize -> conv/linear ->
    quantize becomes one ``onednn::qconv_pointwise`` / ``qlinear_pointwise`` kernel on packed
    int8 weights).

    Not through inductor's code generation as well: with torch 2.13 and torchao 0.18,
    ``torch.compile`` of the lowered graph fails (qlinear lowering asserts on its packed
    weight), with freezing it fails on ``onednn.qconv_prepack`` (no fake kernel), and without
    freezing it runs fp32 convolutions between (de)quantize steps, which is not an int8 model.
    """
    # Deferred: torchao's PT2E stack takes seconds to import; only the int8 form needs it.
    from torchao.quantization.pt2e.lowering import lower_pt2e_quantized_to_x86

    # Calibration only sets the quantization ranges, which do not change the kernels that run
    # or their speed, so random images serve a latency figure.
    gen = torch.Generator().manual_seed(0)
    calib = torch.randn(CALIB_IMAGES, *example.shape[1:], generator=gen)
    quantized = analog.apply(model.cpu().float(), "int8", calib=calib)
    with torch.no_grad():
        return lower_pt2e_quantized_to_x86(quantized, (example,))


@FORMS.register("fp16")
@FORMS.register("bf16")
def _half(model: nn.Module, example: Tensor) -> nn.Module:
    return model  # the cast to the form's dtype happens with the input's (latency.prepare)


def form_problems(form: str, backend: str, dtype: str) -> list[Problem]:
    """Why ``form`` cannot be timed on ``backend`` in ``dtype`` (empty when it can)."""
    from hw_cost.backends import BACKENDS

    if form not in FORMS:
        return [Problem("form", f"must be one of {FORMS.list()}", form,
                        "pass --form eager, compile, int8, fp16 or bf16")]
    device = BACKENDS.get(backend)() if backend in BACKENDS else None
    unsupported = device.unsupported_form(form) if device else None
    if unsupported:
        return [unsupported]
    if form == "int8" and dtype != "fp32":
        return [Problem("dtype", "the int8 form quantizes the fp32 model", dtype,
                        "leave --dtype fp32 with --form int8")]
    if form in FORM_DTYPES and dtype not in ("fp32", FORM_DTYPES[form]):
        return [Problem("dtype", f"the {form} form computes in {form}", dtype,
                        f"leave --dtype out (or pass {form}) with --form {form}")]
    emulated = device.emulated_form(form) if device else None
    return [emulated] if emulated else []


def form_dtype(form: str, dtype: str) -> str:
    """The dtype a measurement in ``form`` computes in."""
    return FORM_DTYPES.get(form, dtype)


def apply_form(model: nn.Module, example: Tensor, form: str) -> nn.Module:
    """``model`` (already placed and cast) in the deployed ``form``."""
    return FORMS.get(form)(model, example)
