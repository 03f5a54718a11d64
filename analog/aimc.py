"""Analog in-memory computing hardware models on aihwkit tiles (PCM noise, drift, compensation).

Each entry names one aihwkit configuration exactly (``hwnas analog list`` prints it, and every
``DriftResult.hw_config`` records it):

* ``pcm``: aihwkit's ``InferenceRPUConfig`` defaults (7-bit DAC, 9-bit ADC with bound 12, output
  noise 0.06, abs-max noise management, iterative bound management, 512x512 tiles,
  ``PCMLikeNoiseModel`` with g_max 25 uS, ``GlobalDriftCompensation``) **plus one change**:
  column-wise weight scaling with omega 1 (``mapping.weight_scaling_omega=1``,
  ``weight_scaling_columnwise=True``): each output row's largest weight maps to g_max and a
  digital scale restores it (Rasch et al., Nat. Commun. 2023). This is neither aihwkit's default
  nor one of its presets; the mapping alone moves accuracy by tens of points.
* ``pcm_aihwkit_default``: ``InferenceRPUConfig()`` exactly as shipped (omega 0: the weights are
  not rescaled, so small weights use a small part of the conductance range).
* ``pcm_preset_io``: ``InferenceRPUConfig(forward=PresetIOParameters())``, aihwkit's documented
  periphery preset (7-bit DAC, 9-bit ADC, output bound 20, output noise 0.1), default mapping.
* ``pcm_hwa``: aihwkit's ``StandardHWATrainingPreset`` (Rasch et al. 2023: 8-bit I/O, PCM read
  noise in every MVM, IR drop, learned input ranges and output scales, omega 1 column-wise).
* ``pcm_ideal``: perfect I/O and no device noise (equals digital; a check of the plumbing).

Further device models (ReRAM, HERMES PCM, custom drift) live in ``analog.devices``; the
HERMES-like static-range periphery ``pcm_static`` in ``analog.static_io``. Overrides a model
cannot apply are refused (``analog.option_checks``); caveats per entry: ``analog.caveats``.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from torch import Tensor, nn

from analog.caveats import CAVEATS
from analog.coverage import coverage, digital_layers, split_layers, warn_if_partial
from analog.hw import HW, HardwareModel
from analog.inference_options import InferenceOptions, describe_converter, finish, prepare
from analog.input_ranges import (
    calibrate_input_ranges,
    has_learned_input_ranges,
    set_learned_input_ranges,
)
from analog.option_checks import (
    SCALES,
    g_max_problems,
    scale_problems,
    torch_tile_problems,
)
from analog.times import format_time
from hwnas.common.errors import ConfigError, Problem


@dataclass(frozen=True, kw_only=True)
class AnalogOptions(InferenceOptions):
    """Overrides of a preset; ``None`` keeps the preset's value (inherited fields:
    ``analog.inference_options``)."""

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
        return out + self.inference_problems(where)


def columnwise_omega1(rpu):
    """``rpu`` with each output row's largest weight mapped to g_max (omega 1, column-wise)."""
    rpu.mapping.weight_scaling_omega = 1.0
    rpu.mapping.weight_scaling_columnwise = True
    return rpu


def _pcm_config():
    from aihwkit.inference.compensation.drift import GlobalDriftCompensation
    from aihwkit.inference.noise.pcm import PCMLikeNoiseModel
    from aihwkit.simulator.configs import InferenceRPUConfig

    rpu = InferenceRPUConfig()
    rpu.noise_model = PCMLikeNoiseModel(g_max=25.0)  # aihwkit's default, stated explicitly
    rpu.drift_compensation = GlobalDriftCompensation()
    return columnwise_omega1(rpu)


def _aihwkit_default_config():
    from aihwkit.simulator.configs import InferenceRPUConfig

    return InferenceRPUConfig()


def _preset_io_config():
    from aihwkit.simulator.configs import InferenceRPUConfig
    from aihwkit.simulator.presets.utils import PresetIOParameters

    return InferenceRPUConfig(forward=PresetIOParameters())


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


def build_rpu_config(base: Callable[[], Any], opts: AnalogOptions, *,
                     where: str = "analog options"):
    """The preset from ``base`` with ``opts`` applied (a fresh object every call); an option the
    model cannot apply is a ``ConfigError`` (``analog.option_checks``), every problem at once."""
    rpu = base()
    if opts.tile == "torch":
        rpu = on_torch_tile(rpu)
    rpu, problems = prepare(where, rpu, opts)
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
    problems += _device_overrides(where, noise, opts)
    if opts.compensation is not None:
        from aihwkit.inference.compensation.drift import GlobalDriftCompensation

        rpu.drift_compensation = GlobalDriftCompensation() if opts.compensation else None
    problems += finish(where, rpu, opts)
    if opts.tile == "torch":
        problems += torch_tile_problems(where, rpu)
    if problems:
        raise ConfigError(problems)
    return rpu


def on_torch_tile(rpu):
    from aihwkit.simulator.configs import TorchInferenceRPUConfig

    torch_rpu = TorchInferenceRPUConfig()
    for f in fields(rpu):
        if f.init and hasattr(torch_rpu, f.name) and f.name not in ("tile_class",):
            setattr(torch_rpu, f.name, copy.deepcopy(getattr(rpu, f.name)))
    return torch_rpu


def _device_overrides(where: str, noise: Any, opts: AnalogOptions) -> list[Problem]:
    """Write g_max and the noise scales onto ``noise``, unless a check refuses them."""
    scales = {name: getattr(opts, name) for name in SCALES}
    problems = scale_problems(where, noise, scales)
    if opts.g_max is not None:
        problems += g_max_problems(where, noise, float(opts.g_max))
    if problems:
        return problems
    if opts.g_max is not None:
        noise.g_max = noise.g_converter.g_max = float(opts.g_max)
    for name, value in scales.items():
        if value is not None:
            setattr(noise, name, float(value))
    return []


def _aihwkit_version() -> str:
    from importlib.metadata import version

    return version("aihwkit")


def build_base(name: str, base: Callable[[], Any]):
    """``base()``, with aihwkit's refusals (a missing class, a failed check) as a clear error."""
    try:
        return base()
    except (ImportError, AttributeError, AssertionError, ValueError, TypeError) as err:
        raise ConfigError.one(
            f"hardware model {name}", f"aihwkit {_aihwkit_version()} cannot build its device "
            "model", f"{type(err).__name__}: {err}",
            "install the aihwkit version the model needs, change its parameters, or pick another "
            "model (`hwnas analog list`)") from err


def describe_rpu(rpu) -> dict[str, Any]:
    """The facts of an aihwkit rpu config that decide analog accuracy, for provenance."""
    fwd, mapping, noise = rpu.forward, rpu.mapping, rpu.noise_model
    noise_keys = ("g_max", "g_min", "prog_noise_scale", "read_noise_scale", "drift_scale",
                  "noise_scale", "t_0", "num_devices", "acceptance_range")
    return {
        "rpu_config": type(rpu).__name__,
        "forward": type(fwd).__name__,
        "noise_model": {"class": type(noise).__name__,
                        **{k: getattr(noise, k) for k in noise_keys if hasattr(noise, k)},
                        "g_converter": describe_converter(noise)},
        "drift_compensation": type(rpu.drift_compensation).__name__
        if rpu.drift_compensation is not None else None,
        "weight_scaling_omega": mapping.weight_scaling_omega,
        "weight_scaling_columnwise": mapping.weight_scaling_columnwise,
        "learn_out_scaling": mapping.learn_out_scaling,
        "tile_rows": mapping.max_input_size, "tile_cols": mapping.max_output_size,
        "inp_res": fwd.inp_res, "out_res": fwd.out_res, "out_bound": fwd.out_bound,
        "out_noise": fwd.out_noise, "out_noise_std": fwd.out_noise_std,
        "w_noise": fwd.w_noise, "w_noise_type": fwd.w_noise_type.name,
        "ir_drop": fwd.ir_drop, "noise_management": fwd.noise_management.name,
        "bound_management": fwd.bound_management.name, "is_perfect": fwd.is_perfect,
        "input_range": bool(rpu.pre_post.input_range.enable),
    }


@dataclass(frozen=True)
class AnalogHW(HardwareModel):
    """A hardware model on aihwkit tiles; ``apply`` converts with ``convert_to_analog``.

    ``times``: the only drift times (s) the device model defines, or None for any time.
    ``caveats``: what the model does not describe, printed by ``hwnas analog list`` and stored
    in every result's ``hw_config``; None takes the built-in entry's (``analog.caveats``).
    """

    base: Callable[[], Any] = _pcm_config
    times: tuple[float, ...] | None = None
    caveats: tuple[str, ...] | None = None
    kind: ClassVar[str] = "analog"

    def __post_init__(self) -> None:
        if self.caveats is None:  # frozen: set once, here
            object.__setattr__(self, "caveats", CAVEATS.get(self.name, ()))

    def rpu_config(self, **overrides: Any):
        opts = AnalogOptions.parse(f"{self.name} options", overrides)
        return build_rpu_config(lambda: build_base(self.name, self.base), opts,
                                where=f"{self.name} options")

    def describe(self, **overrides: Any) -> dict[str, Any]:
        """``describe_rpu`` of this model's rpu config with ``overrides`` applied."""
        return {"name": self.name, "description": self.description,
                **describe_rpu(self.rpu_config(**overrides)), "caveats": list(self.caveats)}

    def calibrated(self, model: nn.Module, rpu: Any, calib: Tensor | None,
                   digital: Sequence[str] = ()) -> nn.Module:
        """``model`` as the tiles should see it before conversion: unchanged here;
        ``analog.static_io.StaticRangeHW`` sets its input ranges once, after training."""
        return model

    def time_problems(self, seconds: list[float]) -> list[Problem]:
        if self.times is None:
            return []
        bad = [t for t in seconds if not any(math.isclose(t, ok) for ok in self.times)]
        if not bad:
            return []
        return [Problem(f"{self.name} drift times", "the device model is defined only at "
                        f"{[format_time(t) for t in self.times]}", [format_time(t) for t in bad],
                        "evaluate at those times, or pick a model with a drift law "
                        "(`hwnas analog list`)")]

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              digital: Sequence[str] = (), **overrides: Any) -> nn.Module:
        from aihwkit.nn.conversion import convert_to_analog

        rpu = self.rpu_config(**overrides)
        keep = digital_layers(model, digital)
        _, unmappable = split_layers(model)
        if unmappable:
            warn_if_partial(coverage(model, calib), model, self.name)
        analog = convert_to_analog(copy.deepcopy(model).eval(), rpu,
                                   exclude_modules=unmappable + keep, inplace=True)
        if rpu.pre_post.input_range.enable:
            if not set_learned_input_ranges(model, analog) and calib is None:
                raise ConfigError.one(
                    f"{self.name} calibration", "learned input ranges need calibration images",
                    None, "pass calib=<training images, e.g. data.x_train[:512]>")
            if calib is not None and not has_learned_input_ranges(model):
                calibrate_input_ranges(analog, calib)
        return analog.eval()


HW.register("pcm")(AnalogHW(
    "pcm", "aihwkit InferenceRPUConfig defaults (7-bit DAC, 9-bit ADC, output noise 0.06, "
           "PCMLikeNoiseModel g_max 25 uS, global drift compensation) + column-wise weight "
           "scaling omega 1", base=_pcm_config))
HW.register("pcm_aihwkit_default")(AnalogHW(
    "pcm_aihwkit_default", "aihwkit InferenceRPUConfig() exactly as shipped (weight scaling "
                           "omega 0: no rescaling)", base=_aihwkit_default_config))
HW.register("pcm_preset_io")(AnalogHW(
    "pcm_preset_io", "aihwkit InferenceRPUConfig(forward=PresetIOParameters()): output bound "
                     "20, output noise 0.1, default mapping (omega 0)", base=_preset_io_config))
HW.register("pcm_ideal")(AnalogHW(
    "pcm_ideal", "aihwkit tiles without any noise or quantization (equals digital)",
    base=_pcm_ideal_config))
HW.register("pcm_hwa")(AnalogHW(
    "pcm_hwa", "aihwkit StandardHWATrainingPreset (Rasch et al. 2023): 8-bit I/O, PCM read "
               "noise, IR drop, learned input ranges", base=_pcm_hwa_config))
