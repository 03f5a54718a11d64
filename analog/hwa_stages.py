"""The torch HWA engine's elementwise stages as two autograd functions with written-out
backward passes.

Built from separate torch operations, the stage before a tile row's product (clip to the static
range, divide by it, DAC rounding straight through, DAC clipping) and the stage after it (IR
drop, noise, ADC, saturation mask, scaling) cost more than the product itself: autograd keeps
each intermediate and walks a node per operation. Here each stage works in place on one
buffer and keeps only what its backward pass reads (the layer input, the output, a mask). The
gradients are the same: aihwkit's ``InputRangeForward`` rule for the range, straight-through
quantizers, zero gradient for outputs at the ADC bound (``tests/analog/test_hwa_torch.py``
holds both against aihwkit's tile and its autograd). Masks multiply: on CPU ``torch.where``
and ``masked_fill`` with a boolean mask take four times as long as the product.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor
from torch.autograd import Function

from analog.periphery import IOModel


def range_gradient(p: Tensor, clipped: Tensor, r: Tensor, params: Any) -> Tensor:
    """The gradient of the range ``r`` (shape (1,), positive) of ``clip(x, -r, r) / r``, from
    ``p = d_c * clip(x, -r, r)`` (``d_c``: the gradient of the clipped inputs; ``p`` is
    overwritten) and ``clipped = |x| >= r``: the division's, plus aihwkit's
    ``InputRangeForward`` rule (clipped inputs pull the range out, the decay pulls it in while
    fewer than ``input_min_percentage`` of the inputs clip).

    The division gives ``-sum(p) / r``. Where ``|x| >= r`` the clip is ``sign(x) r``, so
    aihwkit's ``sum(min(d_c, 0) | x >= r) - sum(max(d_c, 0) | x <= -r)`` is
    ``sum(min(p, 0) | clipped) / r``: one product serves both terms."""
    grad = (-p.sum()).view(1) / r
    pulled = p.clamp_(max=0.0).mul_(clipped).sum().view(1) / r
    if params.gradient_relative:
        pulled = pulled * r * params.gradient_scale
    grad = grad + pulled
    if params.decay > 0:
        inside = 1.0 - torch.count_nonzero(clipped) / clipped.numel()
        grad = grad + params.decay * r * (inside > params.input_min_percentage)
    return grad


class InputStage(Function):
    """A tile row's input ``x`` -> DAC units: ``clip(x, -r, r) / r`` scaled by ``k``,
    rounded when ``rounding`` and clipped at ``bound`` (straight through both). ``r`` None:
    no static range (the scale ``k`` alone)."""

    @staticmethod
    def forward(ctx, x: Tensor, r: Tensor | None, k: float, rounding: bool, bound: float,
                params: Any) -> Tensor:
        ctx.k, ctx.params = k, params
        if r is None:
            q = x * k
            ctx.save_for_backward(x, None)
        else:
            b = float(r.detach())
            if not b > 0:  # the range rule below and the clip assume a positive range
                raise ValueError(f"a static input range is {b}: ranges must stay positive; "
                                 "lower the learning rate or the range's gradient_scale")
            q = x.clamp(-b, b).div_(r).mul_(k)  # same order as clip / r * k, bit for bit
            ctx.b = b
            ctx.save_for_backward(x, r)
        if rounding:
            q.round_()
        # |clip(x) / r| <= 1: the DAC clip bites only when round(k) can pass the bound
        ctx.clip = math.isfinite(bound) and round(k * (1 + 1e-6)) > bound
        if ctx.clip:
            ctx.inside = q.abs() <= bound
            q.clamp_(-bound, bound)
        return q

    @staticmethod
    def backward(ctx, g: Tensor) -> tuple[Tensor | None, ...]:
        x, r = ctx.saved_tensors
        if ctx.clip:
            g = g * ctx.inside
        if r is None:
            return g * ctx.k, None, None, None, None, None
        b, ax = ctx.b, x.abs()
        d_c = g * (ctx.k / b)
        d_r = range_gradient(d_c * x.clamp(-b, b), ax >= b, r, ctx.params)
        d_x = d_c.mul_(ax <= b)  # clamp's backward
        return d_x, d_r, None, None, None, None


class OutputStage(Function):
    """A tile row's product ``y`` (ADC units, overwritten) -> its output: IR drop and noise
    from the side products ``side`` (``IOModel.analog_out``), ADC saturation, then times
    ``coef`` (per output, no gradient) and ``r``. Backward: the ideal product's gradient
    (straight through the ADC and the noise), zero for outputs at the ADC bound; the range
    gets the gradient of the final factor."""

    @staticmethod
    def forward(ctx, y: Tensor, r: Tensor | None, coef: Tensor, io: IOModel,
                gen: torch.Generator, side: dict[str, Tensor | None]) -> Tensor:
        ctx.mark_dirty(y)
        with torch.no_grad():
            hard = io.clip_out(io.analog_out(y, gen, **side))
            free = hard.abs().mul_(io.o_unit * io.nm_const) < 0.999 * io.out_bound
            out = hard.mul_(coef) if r is None else hard.mul_(coef).mul_(r)
            scale = coef if r is None else coef * r
        ctx.save_for_backward(free, scale, out, r)
        return out

    @staticmethod
    def backward(ctx, g: Tensor) -> tuple[Tensor | None, ...]:
        free, scale, out, r = ctx.saved_tensors
        d_y = (g * scale).mul_(free)
        d_r = None if r is None else (g * out).sum().view(1) / r
        return d_y, d_r, None, None, None, None
