"""The analog tile periphery of aihwkit's ``InferenceRPUConfig`` forward pass, batched in torch.

``IOModel.run`` emulates RPUCuda's ``ForwardBackwardPassIOManaged::forwardVector`` for many
input vectors at once: per-vector noise management (input scale), DAC rounding and clipping,
the analog product, IR drop and per-MVM weight (read) noise (RPUCuda's
``applyNonIdealities``), additive output noise, ADC rounding and saturation, and iterative bound
management (a saturated vector runs again at half its input scale until it fits or the
reduction passes ``max_bm_factor`` / ``max_bm_res``). Vectors run along dim 1 of (B, in, L)
tensors, so conv patches (L positions per image) need no transpose. Values are kept in DAC/ADC
units (multiples of the step), which folds several scalings into fewer passes over memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

Vectors = Callable[[Tensor, Tensor], Tensor]
"""(image index, position index) of S vectors -> the original input vectors, (S, in)."""


def unsupported(rpu) -> list[str]:
    """Features of ``rpu`` (an aihwkit rpu config) that the fast path does not emulate."""
    from aihwkit.inference.compensation.drift import (
        GlobalDriftCompensation,
        GlobalDriftCompensationWithExactReference,
        PerColumnDriftCompensation,
    )
    from aihwkit.simulator.parameters.enums import (
        AnalogMVType,
        BoundManagementType,
        NoiseManagementType,
        WeightNoiseType,
    )

    io = rpu.forward
    checks = {
        "forward.mv_type other than ONE_PASS": io.mv_type != AnalogMVType.ONE_PASS,
        "forward.w_noise_type other than NONE/ADDITIVE_CONSTANT/PCM_READ": io.w_noise_type
        not in (WeightNoiseType.NONE, WeightNoiseType.ADDITIVE_CONSTANT, WeightNoiseType.PCM_READ),
        "forward.out_nonlinearity": io.out_nonlinearity > 0,
        "forward.slope_calibration": io.slope_calibration > 0,
        "forward voltage offsets / r_series": io.v_offset_std > 0 or io.v_offset_w_min > 0
        or io.r_series > 0,
        "forward.w_read_asymmetry_dtod": io.w_read_asymmetry_dtod > 0,
        "forward in/out asymmetry": io.inp_asymmetry != 0 or io.out_asymmetry != 0,
        "forward.out_noise_std (per-output noise)": io.out_noise_std > 0,
        "noise management other than NONE/ABS_MAX/MAX/CONSTANT": io.noise_management not in (
            NoiseManagementType.NONE, NoiseManagementType.ABS_MAX, NoiseManagementType.MAX,
            NoiseManagementType.CONSTANT),
        "bound management other than NONE/ITERATIVE": io.bound_management not in (
            BoundManagementType.NONE, BoundManagementType.ITERATIVE),
        "input ranges with bound management": rpu.pre_post.input_range.enable
        and io.bound_management != BoundManagementType.NONE,
        "analog bias (mapping.digital_bias=False)": not rpu.mapping.digital_bias,
        "drift compensation other than Global/PerColumn/exact reference":
        rpu.drift_compensation is not None and type(rpu.drift_compensation) not in (
            GlobalDriftCompensation, PerColumnDriftCompensation,
            GlobalDriftCompensationWithExactReference),
        "time-dependent IR drop (ir_drop_t: aihwkit's IR-drop tile)":
        type(io).__name__ == "IOParametersIRDropT",
        "modifier.enable_during_test": bool(getattr(rpu.modifier, "enable_during_test", False)),
    }
    return [name for name, bad in checks.items() if bad]


def _round(v: Tensor, stochastic: bool, gen: torch.Generator) -> Tensor:
    if stochastic:  # RPUCuda: round(v + U(-0.5, 0.5))
        v += torch.rand(v.shape, generator=gen, device=v.device, dtype=v.dtype) - 0.5
    return v.round_()


def _step(res: float, bound: float) -> float:
    """RPUCuda's quantization step: ``res`` > 1 is a number of states, the step spans
    [-bound, bound]; in float32 as there (ties in the DAC rounding depend on the last bit)."""
    if res <= 0 or math.isinf(bound):
        return 0.0
    res32 = np.float32(1.0 / res if res > 1.0 else res)
    return float(np.float32(res32 * np.float32(2.0 * bound)))


def randn_as(y: Tensor, gen: torch.Generator) -> Tensor:
    """Standard normals shaped and laid out as ``y``, drawn in its memory order: ``normal_``
    on a channels_last tensor walks it element by element, eight times slower on CPU."""
    if y.dim() == 4 and not y.is_contiguous() and y.is_contiguous(
            memory_format=torch.channels_last):
        n, c, h, w = y.shape
        return torch.randn((n, h, w, c), generator=gen, device=y.device,
                           dtype=y.dtype).permute(0, 3, 1, 2)
    return torch.randn(y.shape, generator=gen, device=y.device, dtype=y.dtype)


@dataclass(frozen=True)
class IOModel:
    """The forward ``IOParameters`` the emulation uses, resolved like RPUCuda does."""

    perfect: bool
    inp_step: float
    inp_bound: float
    inp_noise: float
    inp_sto: bool
    out_step: float
    out_bound: float
    out_noise: float
    out_sto: bool
    nm: str
    nm_thres: float
    bm: bool
    bm_limit: float
    neg_test: bool
    w_noise: float = 0.0
    w_noise_type: str = "NONE"
    ir_drop: float = 0.0
    ir_g_ratio: float = 1.0
    out_scale: float = 1.0
    """``forward.out_scale``: a fixed digital factor on every output (RPUCuda applies it
    after the ADC, and also with a perfect periphery)."""

    @classmethod
    def of(cls, io) -> IOModel:
        from aihwkit.simulator.parameters.enums import AnalogMVType, BoundManagementType

        inp_bound = io.inp_bound if io.inp_bound > 0 else math.inf
        out_bound = io.out_bound if io.out_bound > 0 else math.inf
        inp_step = _step(io.inp_res, inp_bound)
        max_bm = float(io.max_bm_factor)
        return cls(
            perfect=bool(io.is_perfect or io.mv_type == AnalogMVType.IDEAL),
            inp_step=inp_step, inp_bound=inp_bound, inp_noise=float(io.inp_noise),
            inp_sto=bool(io.inp_sto_round), out_step=_step(io.out_res, out_bound),
            out_bound=out_bound, out_noise=float(io.out_noise), out_sto=bool(io.out_sto_round),
            nm=io.noise_management.name, nm_thres=float(io.nm_thres),
            bm=io.bound_management != BoundManagementType.NONE,
            bm_limit=min(max_bm, io.max_bm_res / inp_step) if inp_step > 0 else max_bm,
            neg_test=bool(io.bm_test_negative_bound),
            w_noise=float(io.w_noise) if io.w_noise_type.name != "NONE" else 0.0,
            w_noise_type=io.w_noise_type.name, ir_drop=float(io.ir_drop),
            ir_g_ratio=float(io.ir_drop_g_ratio), out_scale=float(io.out_scale))

    @property
    def i_unit(self) -> float:
        return self.inp_step if self.inp_step > 0 else 1.0

    @property
    def o_unit(self) -> float:
        return self.out_step if self.out_step > 0 else 1.0

    def finish_scale(self, s: Tensor) -> tuple[Tensor, Tensor | None]:
        """Per-vector scale for the noise management: the thresholds applied, non-positive
        scales set to 1 (RPUCuda leaves those vectors unscaled); also their mask (or None)."""
        if self.nm_thres > 0 and self.nm in ("ABS_MAX", "MAX"):
            s = s.clamp(max=self.nm_thres)
        nonpositive = s <= 0
        if not bool(nonpositive.any()):
            return s, None
        return torch.where(nonpositive, torch.ones_like(s), s), nonpositive

    @property
    def nm_const(self) -> float:
        """The scale of every vector under constant (or no) noise management."""
        return self.nm_thres if (self.nm == "CONSTANT" and self.nm_thres > 0) else 1.0

    @property
    def static_scale(self) -> bool:
        """Whether every input vector gets the same scale and one deterministic DAC pass:
        constant (or no) noise management, no bound management, no input noise, rounding to
        nearest. The DAC then acts on each input value alone, so a conv layer's input map can
        be quantized once for all its patches (``analog.static_conv``)."""
        return self.nm not in ("ABS_MAX", "MAX") and not self.bm and not self.inp_sto \
            and self.inp_noise <= 0 and not self.perfect

    def nm_scale(self, x: Tensor) -> Tensor:
        """Raw per-vector scale of the noise management for ``x`` (B, in, L) -> (B, 1, L)."""
        if self.nm == "ABS_MAX":
            return x.abs().amax(dim=1, keepdim=True)  # much faster than vector_norm(inf)
        if self.nm == "MAX":
            return x.amax(dim=1, keepdim=True)
        return x.new_full((x.shape[0], 1, *x.shape[2:]), self.nm_const)

    def _needs_input_clip(self) -> bool:
        # Abs-max scaling maps every vector into [-1, 1]: clipping at a bound >= 1 is a no-op.
        return not (self.nm == "ABS_MAX" and self.nm_thres <= 0 and self.inp_bound >= 1)

    def dac(self, xq: Tensor, gen: torch.Generator) -> Tensor:
        """DAC rounding, clipping and input noise of DAC-unit inputs (a buffer it may
        overwrite)."""
        i_unit = self.i_unit
        if self.inp_step > 0:
            xq = _round(xq, self.inp_sto, gen)
        bound = self.inp_bound / i_unit
        if bound < math.inf and self._needs_input_clip():
            xq = xq.clamp_(-bound, bound)
        if self.inp_noise > 0:
            xq += (self.inp_noise / i_unit) * torch.randn(xq.shape, generator=gen, device=xq.device)
        return xq

    def product_weights(self, w: Tensor) -> tuple[Tensor, Tensor | None, Tensor | None,
                                                  Tensor | None]:
        """The matrices whose products with DAC-unit inputs ``x`` give, in ADC units: the
        ideal output ``y``; IR drop's ``z = sum_j w_ij x_j (1 - (1 - j/n)^2)`` (scaled by
        ``ir_drop``) and ``a = n / (G_wire / g_max) sum_j |w_ij| |x_j|`` (the product with
        ``|x|``); the read noise's variance (the product with ``x^2``). None where the
        periphery has no such term. Constants sit on the (small) weights, not on every
        output."""
        i_unit, o_unit, n = self.i_unit, self.o_unit, w.shape[1]
        main, pos, absw, read = w * (i_unit / o_unit), None, None, None
        if self.ir_drop > 0:
            p = 1.0 - torch.arange(n, dtype=w.dtype, device=w.device) / n
            pos = w * ((1.0 - p * p) * (self.ir_drop * i_unit / o_unit))
            absw = w.abs().mul_(i_unit * n / self.ir_g_ratio)
        if self.w_noise > 0:
            scale = (self.w_noise * i_unit / o_unit) ** 2
            # PCM_READ: sigma_i^2 = w_noise^2 sum_j |w_ij| x_j^2; ADDITIVE_CONSTANT:
            # w_noise^2 |x|_2^2, the same for every output (one row, broadcast)
            read = w.abs().mul_(scale) if self.w_noise_type == "PCM_READ" \
                else w.new_full((1, n), scale)
        return main, pos, absw, read

    @property
    def out_var(self) -> float:
        """Variance of the output noise, in ADC units."""
        return (self.out_noise / self.o_unit) ** 2 if self.out_noise > 0 else 0.0

    def analog_out(self, y: Tensor, gen: torch.Generator, *, a: Tensor | None = None,
                   z: Tensor | None = None, var: Tensor | None = None) -> Tensor:
        """The analog output from the products of ``product_weights`` (``y`` overwritten):
        RPUCuda's ``applyIrDrop`` (``y -= c(a) z``, ``c(a) = a (a (0.05 a - 0.2) + 0.5)``), the
        noise, and ADC rounding (saturation is left to the caller). ``var``: the variance of
        the read noise plus ``out_var`` (None: output noise alone).

        Read noise (``applyOutputWeightNoise``) and output noise are zero-mean Gaussians added
        before the ADC: their sum is one Gaussian whose variance is the sum of theirs, so one
        draw per output gives the same distribution for half the random numbers (drawing
        them costs more than all the other passes over the outputs together on CPU)."""
        if a is not None:  # c(a) = a (0.5 + 0.05 a (a - 4)): four passes, not six
            c = torch.addcmul(y.new_tensor(0.5), a, a - 4.0, value=0.05)
            y = y.addcmul_(c.mul_(z), a, value=-1.0)
        if var is not None:
            y = y.addcmul_(randn_as(y, gen), var.sqrt_())
        elif self.out_noise > 0:
            y = y.add_(randn_as(y, gen), alpha=self.out_noise / self.o_unit)
        if self.out_step > 0:
            y = _round(y, self.out_sto, gen)
        return y

    def clip_out(self, y: Tensor) -> Tensor:
        """ADC saturation, in place."""
        bound = self.out_bound / self.o_unit
        return y.clamp_(-bound, bound) if bound < math.inf else y

    def _finish(self, xq: Tensor, w: Tensor, s: Tensor, reduction: float,
                gen: torch.Generator) -> tuple[Tensor, Tensor]:
        """DAC, product, ADC for DAC-unit inputs ``xq``: output (B, out, L) and saturation."""
        xq = self.dac(xq, gen)
        main, pos, absw, read = self.product_weights(w)
        if pos is None:
            y = torch.matmul(main, xq)
            z = a = None
        else:  # one pass over the inputs for both products
            y, z = torch.matmul(torch.cat([main, pos]), xq).split(len(main), dim=1)
            a = torch.matmul(absw, xq.abs())
        var = None if read is None else torch.matmul(read, xq * xq).add_(self.out_var)
        y = self.analog_out(y, gen, a=a, z=z, var=var)
        bound = self.out_bound / self.o_unit
        saturated = (y.abs() if self.neg_test else y).amax(dim=1) > bound
        return self.clip_out(y).mul_(s * (reduction * self.o_unit * self.out_scale)), saturated

    def run(self, w: Tensor, gen: torch.Generator, *, s: Tensor, units: Tensor,
            vectors: Vectors, nonpositive: Tensor | None = None) -> Tensor:
        """Analog ``w @ x`` with ``units = x / (s * i_unit)`` (a buffer it may overwrite) and
        the per-vector scales ``s`` (B, 1, L); ``vectors`` fetches the original x of the
        vectors that saturate, for bound management. Returns (B, out, L)."""
        y, saturated = self._finish(units, w, s, 1.0, gen)
        reduction = 1.0
        while self.bm and reduction <= self.bm_limit and bool(saturated.any()):
            reduction *= 2.0
            img, pos = saturated.nonzero(as_tuple=True)
            s_sub = s[img, :, pos].T.unsqueeze(0)  # (1, 1, S)
            # RPUCuda's order, float for float: the largest input lands exactly on a tie
            # (0.5 / step = 31.5 for a 7-bit DAC) and must round as it does there.
            x_sub = vectors(img, pos).T.unsqueeze(0)
            units_sub = (x_sub * ((1.0 / s_sub) / reduction)).div_(self.i_unit)
            y_sub, sat_sub = self._finish(units_sub, w, s_sub, reduction, gen)
            y[img, :, pos] = y_sub[0].T
            saturated = torch.zeros_like(saturated)
            saturated[img, pos] = sat_sub[0]
        if nonpositive is not None and self.inp_noise <= 0:
            y.masked_fill_(nonpositive, 0.0)  # RPUCuda short-cuts these to an exact zero
        return y

    def mvm(self, x: Tensor, w: Tensor, gen: torch.Generator) -> Tensor:
        """``w @ x`` for the vectors along dim 1 of ``x`` (B, in, L); returns (B, out, L)."""
        if self.perfect:
            return torch.matmul(w * self.out_scale, x)
        s, nonpositive = self.finish_scale(self.nm_scale(x))
        units = x * (1.0 / (s * self.i_unit))  # one pass; no input sits on a rounding tie
        return self.run(w, gen, s=s, units=units, vectors=lambda i, p: x[i, :, p],
                        nonpositive=nonpositive)
