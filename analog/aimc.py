"""Analog in-memory computing hardware models on aihwkit tiles (PCM noise, drift, compensation).

``pcm``: aihwkit's ``InferenceRPUConfig`` as shipped (7-bit DAC, 9-bit ADC with bound 12,
output noise 0.06, abs-max noise management, iterative bound management, 512x512 tiles),
``PCMLikeNoiseModel`` (programming noise, drift, 1/f read noise; g_max 25 uS) and
``GlobalDriftCompensation``; each output row's largest weight is mapped to g_max
(``weight_scaling_omega=1`` column-wise, restored by a digital scale, as in Rasch et al. 2023).
``pcm_hwa``: aihwkit's ``StandardHWATrainingPreset`` (Rasch et al. 2023: 8-bit I/O, PCM read
noise in every MVM, IR drop, learned input ranges). ``pcm_ideal``: perfect I/O and no device
noise (equals digital; a check of the plumbing).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from analog.adabs import batch_norms
from analog.coverage import coverage, split_layers, warn_if_partial
from analog.hw import HW, HardwareModel
from hwnas.common.errors import ConfigError, Problem


@dataclass(frozen=True, kw_only=True)
class AnalogOptions:
    """Overrides of a preset; ``None`` keeps the preset's value."""

    dac_bits: int | None = None
    """Input (DAC) resolution in bits: ``inp_res = 1 / (2**bits - 2)``."""
    adc_bits: int | None = None
    """Output (ADC) resolution in bits: ``out_res = 1 / (2**bits - 2)``."""
    out_noise: float | None = None
    """Std of the additive Gaussian output noise, in units of the normalized output."""
    out_bound: float | None = None
    """ADC saturation level (normalized output units)."""
    tile_size: int | None = None
    """Crossbar rows and columns; larger weight matrices are split over several tiles."""
    g_max: float | None = None
    """Conductance (uS) that the largest weight maps to."""
    prog_noise_scale: float | None = None
    read_noise_scale: float | None = None
    drift_scale: float | None = None
    compensation: bool | None = None
    """Global drift compensation on (True) or off (False)."""
    tile: str | None = None
    """``cpp`` (aihwkit's RPUCuda tile) or ``torch`` (``TorchInferenceRPUConfig``)."""

    @classmethod
    def parse(cls, where: str, overrides: dict[str, Any]) -> AnalogOptions:
        names = [f.name for f in fields(cls)]
        problems = [Problem(where, f"option must be one of {names}", key, "drop or rename it")
                    for key in overrides if key not in names]
        opts = cls(**{k: v for k, v in overrides.items() if k in names})
        problems += opts.problems(where)
        if problems:
            raise ConfigError(problems)
        return opts

    def problems(self, where: str) -> list[Problem]:
        out = []
        for name in ("dac_bits", "adc_bits"):
            bits = getattr(self, name)
            if bits is not None and not (isinstance(bits, int) and 2 <= bits <= 16):
                out.append(Problem(where, f"{name} must be an integer in 2..16", bits,
                                   "use e.g. 7 (DAC) or 9 (ADC)"))
        for name in ("out_noise", "prog_noise_scale", "read_noise_scale", "drift_scale"):
            val = getattr(self, name)
            if val is not None and not float(val) >= 0:
                out.append(Problem(where, f"{name} must be >= 0", val, "use 0 to switch it off"))
        for name in ("out_bound", "g_max"):
            val = getattr(self, name)
            if val is not None and not float(val) > 0:
                out.append(Problem(where, f"{name} must be > 0", val, "use a positive number"))
        if self.tile_size is not None and not (isinstance(self.tile_size, int)
                                               and self.tile_size >= 1):
            out.append(Problem(where, "tile_size must be an integer >= 1", self.tile_size,
                               "use e.g. 256 or 512"))
        if self.tile not in (None, "cpp", "torch"):
            out.append(Problem(where, "tile must be 'cpp' or 'torch'", self.tile,
                               "cpp for aihwkit's C++ tile, torch for its torch tile"))
        return out


def _pcm_config():
    from aihwkit.inference.compensation.drift import GlobalDriftCompensation
    from aihwkit.inference.noise.pcm import PCMLikeNoiseModel
    from aihwkit.simulator.configs import InferenceRPUConfig

    rpu = InferenceRPUConfig()
    rpu.noise_model = PCMLikeNoiseModel(g_max=25.0)
    rpu.drift_compensation = GlobalDriftCompensation()
    rpu.mapping.weight_scaling_omega = 1.0
    rpu.mapping.weight_scaling_columnwise = True
    return rpu


def _pcm_ideal_config():
    from aihwkit.inference.noise.pcm import PCMLikeNoiseModel

    rpu = _pcm_config()
    rpu.forward.is_perfect = True
    rpu.noise_model = PCMLikeNoiseModel(g_max=25.0, prog_noise_scale=0.0, read_noise_scale=0.0,
                                        drift_scale=0.0)
    return rpu


def _pcm_hwa_config():
    from aihwkit.simulator.presets import StandardHWATrainingPreset

    return StandardHWATrainingPreset()


def _set_res(bits: int) -> float:
    return 1.0 / (2**bits - 2)


def build_rpu_config(base: Callable[[], Any], opts: AnalogOptions):
    """The preset from ``base`` with ``opts`` applied (a fresh object every call)."""
    from aihwkit.inference.compensation.drift import GlobalDriftCompensation
    from aihwkit.simulator.configs import TorchInferenceRPUConfig

    rpu = base()
    if opts.tile == "torch":
        torch_rpu = TorchInferenceRPUConfig()
        for f in fields(rpu):
            if f.init and hasattr(torch_rpu, f.name) and f.name not in ("tile_class",):
                setattr(torch_rpu, f.name, copy.deepcopy(getattr(rpu, f.name)))
        rpu = torch_rpu
    fwd, noise = rpu.forward, rpu.noise_model
    if opts.dac_bits is not None:
        fwd.inp_res = _set_res(opts.dac_bits)
    if opts.adc_bits is not None:
        fwd.out_res = _set_res(opts.adc_bits)
    if opts.out_noise is not None:
        fwd.out_noise = float(opts.out_noise)
    if opts.out_bound is not None:
        fwd.out_bound = float(opts.out_bound)
    if opts.tile_size is not None:
        rpu.mapping.max_input_size = rpu.mapping.max_output_size = opts.tile_size
    if opts.g_max is not None:
        noise.g_max = noise.g_converter.g_max = float(opts.g_max)
    for name in ("prog_noise_scale", "read_noise_scale", "drift_scale"):
        if getattr(opts, name) is not None:
            setattr(noise, name, float(getattr(opts, name)))
    if opts.compensation is not None:
        rpu.drift_compensation = GlobalDriftCompensation() if opts.compensation else None
    return rpu


@torch.no_grad()
def calibrate_input_ranges(analog: nn.Module, calib: Tensor, batch_size: int = 128) -> None:
    """aihwkit's own input-range initialisation (``init_from_data``) from calibration images.

    Presets with learned input ranges clip each tile's inputs; an untrained range (3.0) is
    arbitrary, so a digitally trained model gets its ranges from data (train-mode forwards
    without any weight update), as the first HWA-training batches would do.
    """
    analog.train()
    # Only the tiles calibrate: batch norms stay in eval mode, so their running statistics
    # (the digital model's, or AdaBS's) are used and left unchanged.
    for norm in batch_norms(analog):
        norm.eval()
    for start in range(0, len(calib), batch_size):
        analog(calib[start:start + batch_size])
    analog.eval()


@dataclass(frozen=True)
class AnalogHW(HardwareModel):
    """A hardware model on aihwkit tiles; ``apply`` converts with ``convert_to_analog``."""

    base: Callable[[], Any] = _pcm_config
    kind: ClassVar[str] = "analog"

    def rpu_config(self, **overrides: Any):
        return build_rpu_config(self.base, AnalogOptions.parse(f"{self.name} options", overrides))

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              **overrides: Any) -> nn.Module:
        from aihwkit.nn.conversion import convert_to_analog

        rpu = self.rpu_config(**overrides)
        _, digital = split_layers(model)
        if digital:
            warn_if_partial(coverage(model, calib), model, self.name)
        analog = convert_to_analog(copy.deepcopy(model).eval(), rpu, exclude_modules=digital,
                                   inplace=True)
        if rpu.pre_post.input_range.enable:
            if calib is None:
                raise ConfigError.one(
                    f"{self.name} calibration", "learned input ranges need calibration images",
                    None, "pass calib=<training images, e.g. data.x_train[:512]>")
            calibrate_input_ranges(analog, calib)
        return analog.eval()


HW.register("pcm")(AnalogHW(
    "pcm", "PCM on aihwkit InferenceRPUConfig: 7-bit DAC, 9-bit ADC, output noise, "
           "PCMLikeNoiseModel, global drift compensation", base=_pcm_config))
HW.register("pcm_ideal")(AnalogHW(
    "pcm_ideal", "aihwkit tiles without any noise or quantization (equals digital)",
    base=_pcm_ideal_config))
HW.register("pcm_hwa")(AnalogHW(
    "pcm_hwa", "aihwkit StandardHWATrainingPreset (Rasch et al. 2023): 8-bit I/O, PCM read "
               "noise, IR drop, learned input ranges", base=_pcm_hwa_config))
