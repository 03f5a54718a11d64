"""aihwkit's inference features as hardware options: drift compensation, conductance converters,
noise model, output-noise variation and IR drop (static and time-dependent).

``InferenceOptions`` are the fields ``analog.aimc.AnalogOptions`` inherits; ``None`` keeps the
preset's value. They are applied in two steps of ``build_rpu_config``: ``prepare`` (before
g_max and the noise scales are written, because it swaps the noise model, its converter or the
rpu config class) and ``finish`` (after drift compensation was switched on or off). Each step
returns the problems of an option the model cannot apply, so a study fails before it runs
instead of recording an option that changed nothing.

Grammar of ``converter`` (``/`` separates factors, as ``,`` separates swept values):
``single`` (``SinglePairConductanceConverter``), ``dual:F1/F2``
(``DualPairConductanceConverter(f_lst=[F1, F2])``), ``pairs:F1/.../Fn``
(``NPairConductanceConverter``); factors run from the least to the most significant pair.
A mapping ``{"f_lst": [...], "g_lst": [[...], ...]}`` (YAML or Python, not a sweep) is
``CustomPairConductanceConverter``: ``g_lst`` holds, per device, its conductance (uS) at
evenly spaced weights from -max|w| to max|w|, in (g+, g-) order per pair.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import torch
from torch import nn

from analog.coverage import split_layers
from analog.option_checks import aihwkit_problems
from hwnas.common.errors import Problem

COMPENSATIONS = {
    "global": "GlobalDriftCompensation",
    "column": "PerColumnDriftCompensation",
    "exact": "GlobalDriftCompensationWithExactReference",
}
"""``drift_comp`` value -> class in ``aihwkit.inference.compensation.drift``."""

NOISE_MODELS = {"pcm": "PCMLikeNoiseModel", "state_independent": "StateIndependentNoiseModel",
                "hermes": "HermesNoiseModel"}
"""``noise_model`` value -> class in ``aihwkit.inference``."""
OWN_CONVERTER = ("hermes",)
"""Device models that bring their own converter: HERMES is characterised up to g_max 20.7 uS
(aihwkit asserts it), so it does not take over the preset's (e.g. 25 uS)."""

PAIR_CONVERTERS = ("SinglePairConductanceConverter", "NPairConductanceConverter",
                   "DualPairConductanceConverter")
"""Converters of a differential pair (or pairs): the ones ``converter`` may replace."""


@dataclass(frozen=True, kw_only=True)
class InferenceOptions:
    """aihwkit inference features; ``None`` keeps the preset's value (docs/analog.md)."""

    drift_comp: str | None = None
    """Drift compensation: ``global`` (mean |readout|), ``column`` (one factor per output),
    ``exact`` (global, reference read from the unprogrammed weights, no periphery)."""
    converter: str | dict[str, Any] | None = None
    """Conductance converter: ``single``, ``dual:F1/F2``, ``pairs:F1/.../Fn`` or a custom
    ``{"f_lst": ..., "g_lst": ...}`` mapping."""
    noise_model: str | None = None
    """Device model swapped in on the preset's converter: ``pcm`` or ``state_independent``;
    ``hermes`` (HERMES' PCM) keeps its own characterised converter (g_max 20.7 uS)."""
    out_noise_std: float | None = None
    """Fixed output-to-output variation of the output noise, a fraction of ``out_noise``."""
    ir_drop: float | None = None
    """Scale of RPUCuda's steady-state IR drop (``forward.ir_drop``; 0 switches it off)."""
    ir_drop_t: float | None = None
    """Wire-resistance scale of aihwkit's time-dependent IR drop (its torch IR-drop tile)."""

    def inference_problems(self, where: str) -> list[Problem]:
        """Value checks that need no rpu config."""
        out = []
        for name, table in (("drift_comp", COMPENSATIONS), ("noise_model", NOISE_MODELS)):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or value not in table):
                out.append(Problem(where, f"{name} must be one of {list(table)}", value,
                                   f"e.g. {name}={next(iter(table))}"))
        for name in ("out_noise_std", "ir_drop", "ir_drop_t"):
            value = getattr(self, name)
            if value is not None and not _non_negative(value):
                out.append(Problem(where, f"{name} must be a number >= 0", value,
                                   "use 0 to switch it off"))
        if self.converter is not None:
            out += _converter_problems(where, self.converter)
        if self.ir_drop_t is not None and self.ir_drop:
            out.append(Problem(where, "ir_drop and ir_drop_t are two models of one IR drop",
                               {"ir_drop": self.ir_drop, "ir_drop_t": self.ir_drop_t},
                               "set only one of them"))
        return out


def _non_negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def parse_converter(text: str) -> tuple[str, list[float]]:
    """``"dual:1/3"`` -> ``("dual", [1.0, 3.0])``; ValueError for text outside the grammar."""
    kind, _, factors = str(text).partition(":")
    if kind == "single" and not factors:
        return kind, []
    if kind not in ("dual", "pairs") or not factors:
        raise ValueError(text)
    values = [float(f) for f in factors.split("/")]
    if (kind == "dual" and len(values) != 2) or not all(v > 0 for v in values):
        raise ValueError(text)
    return kind, values


def _converter_problems(where: str, spec: str | dict[str, Any]) -> list[Problem]:
    if isinstance(spec, dict):
        return custom_converter_problems(where, spec)
    try:
        parse_converter(spec)
    except ValueError:
        return [Problem(where, "converter must be single, dual:F1/F2 or pairs:F1/.../Fn with "
                        "factors > 0, or a {f_lst, g_lst} mapping", spec,
                        "e.g. converter=dual:1/3")]
    return []


def custom_converter_problems(where: str, spec: dict[str, Any]) -> list[Problem]:
    """aihwkit's own checks of ``CustomPairConductanceConverter`` (invertibility included)."""
    if set(spec) != {"f_lst", "g_lst"}:
        return [Problem(where, "a custom converter takes exactly the keys f_lst and g_lst",
                        sorted(spec), "e.g. {f_lst: [1], g_lst: [[2, 2, 25], [25, 2, 2]]}")]
    try:
        _custom(spec, 0.0, 25.0)
    except (ValueError, TypeError, ArithmeticError) as err:
        return [Problem(where, "a custom converter must pass aihwkit's checks", str(err),
                        "one F per (g+, g-) pair of g_lst, lists of equal length, and a "
                        "mapping weights -> conductances -> weights that returns the weights")]
    return []


def _custom(spec: dict[str, Any], g_min: float, g_max: float):
    from aihwkit.inference import CustomPairConductanceConverter

    return CustomPairConductanceConverter(
        f_lst=[float(f) for f in spec["f_lst"]],
        g_lst=[[float(g) for g in row] for row in spec["g_lst"]], g_max=g_max, g_min=g_min)


def build_converter(spec: str | dict[str, Any], g_min: float, g_max: float):
    """The aihwkit converter ``spec`` names, on the conductance range [g_min, g_max] (uS)."""
    from aihwkit.inference import (
        DualPairConductanceConverter,
        NPairConductanceConverter,
        SinglePairConductanceConverter,
    )

    if isinstance(spec, dict):
        return _custom(spec, g_min, g_max)
    kind, factors = parse_converter(spec)
    if kind == "single":
        return SinglePairConductanceConverter(g_max=g_max, g_min=g_min)
    cls = DualPairConductanceConverter if kind == "dual" else NPairConductanceConverter
    return cls(f_lst=factors, g_max=g_max, g_min=g_min)


def describe_converter(noise: Any) -> str | None:
    """The noise model's converter with its factors (aihwkit's ``str`` leaves them out)."""
    conv = getattr(noise, "g_converter", None)
    if conv is None:
        return None
    factors = f"f={conv.f_lst}, " if hasattr(conv, "f_lst") else ""
    return (f"{type(conv).__name__}({factors}g_min={getattr(conv, 'g_min', None)}, "
            f"g_max={getattr(conv, 'g_max', None)})")


def prepare(where: str, rpu: Any, opts: InferenceOptions) -> tuple[Any, list[Problem]]:
    """Swap the noise model, its converter and, for ``ir_drop_t``, the rpu config class."""
    problems: list[Problem] = []
    if opts.noise_model is not None:
        rpu.noise_model = _noise_model(opts.noise_model, rpu.noise_model)
    if opts.converter is not None:
        problems += _set_converter(where, rpu.noise_model, opts.converter)
        problems += custom_g_max_problems(where, opts)
    if opts.ir_drop_t is not None:
        if getattr(opts, "tile", None) == "cpp":
            problems.append(Problem(where, "ir_drop_t runs on aihwkit's torch IR-drop tile, "
                                    "not its C++ tile", "tile=cpp",
                                    "drop tile=cpp, or use ir_drop (C++ tile) instead"))
        rpu = _on_ir_drop_t_tile(rpu, float(opts.ir_drop_t))
    return rpu, problems


def _noise_model(name: str, old: Any):
    """aihwkit's ``name`` model on ``old``'s converter (so g_min and g_max stay), or on its own
    where it is characterised for one (``OWN_CONVERTER``)."""
    import aihwkit.inference as inference

    cls = getattr(inference, NOISE_MODELS[name])
    return cls() if name in OWN_CONVERTER else cls(g_converter=copy.deepcopy(old.g_converter))


def _set_converter(where: str, noise: Any, text: str | dict[str, Any]) -> list[Problem]:
    old = noise.g_converter
    if type(old).__name__ not in PAIR_CONVERTERS:
        return [Problem(where, f"converter replaces a differential-pair converter; "
                        f"{type(noise).__name__} maps a weight with {type(old).__name__}",
                        text, "drop converter, or pick a pair-based model (e.g. pcm)")]
    noise.g_converter = build_converter(text, float(old.g_min), float(old.g_max))
    return []


def custom_g_max_problems(where: str, opts: Any) -> list[Problem]:
    """A custom converter's conductances are its table's: a g_max override would change
    nothing but the record."""
    if isinstance(getattr(opts, "converter", None), dict) and opts.g_max is not None:
        return [Problem(where, "g_max cannot rescale a custom converter (its g_lst holds the "
                        "conductances)", opts.g_max, "drop g_max, or scale g_lst")]
    return []


def _on_ir_drop_t_tile(rpu: Any, scale: float):
    """``rpu`` as aihwkit's ``TorchInferenceRPUConfigIRDropT``, every shared setting kept."""
    from aihwkit.simulator.configs import TorchInferenceRPUConfigIRDropT
    from aihwkit.simulator.parameters.io import IOParametersIRDropT

    out = TorchInferenceRPUConfigIRDropT()
    for f in fields(rpu):
        if f.init and hasattr(out, f.name) and f.name not in ("tile_class", "forward",
                                                              "simulator_tile_class"):
            setattr(out, f.name, copy.deepcopy(getattr(rpu, f.name)))
    fwd = IOParametersIRDropT()
    for f in fields(rpu.forward):
        if f.init and f.name != "ir_drop":  # here ir_drop scales the wire resistance
            setattr(fwd, f.name, copy.deepcopy(getattr(rpu.forward, f.name)))
    fwd.ir_drop = scale
    out.forward = fwd
    return out


def finish(where: str, rpu: Any, opts: InferenceOptions) -> list[Problem]:
    """Drift compensation, output-noise variation and static IR drop; their problems."""
    problems: list[Problem] = []
    fwd = rpu.forward
    if opts.drift_comp is not None:
        if getattr(opts, "compensation", None) is False:
            problems.append(Problem(where, "drift_comp needs drift compensation on",
                                    {"drift_comp": opts.drift_comp, "compensation": False},
                                    "drop compensation=false or drift_comp"))
        else:
            from aihwkit.inference.compensation import drift

            rpu.drift_compensation = getattr(drift, COMPENSATIONS[opts.drift_comp])()
    if opts.out_noise_std is not None:
        problems += _out_noise_std_problems(where, rpu, opts)
        fwd.out_noise_std = float(opts.out_noise_std)
    if opts.ir_drop is not None:
        if fwd.is_perfect and opts.ir_drop > 0:
            problems.append(Problem(where, "ir_drop needs a periphery that is not perfect",
                                    opts.ir_drop, "drop ir_drop for this model"))
        fwd.ir_drop = float(opts.ir_drop)
    if opts.ir_drop_t is not None:
        problems += ir_drop_t_problems(where, rpu)
    return problems


def _out_noise_std_problems(where: str, rpu: Any, opts: InferenceOptions) -> list[Problem]:
    fwd, value = rpu.forward, opts.out_noise_std
    if not value:
        return []
    if fwd.is_perfect or fwd.out_noise <= 0:
        return [Problem(where, "out_noise_std is a fraction of out_noise, which this model "
                        f"has at {0.0 if fwd.is_perfect else fwd.out_noise}", value,
                        "set out_noise > 0 as well, or drop out_noise_std")]
    if type(rpu).__name__.startswith("Torch"):
        # aihwkit 1.2's torch tile draws |out_noise (1 + randn)|: a 100 % variation whatever
        # out_noise_std says, so the value asked for would be recorded, not applied
        return [Problem(where, "out_noise_std needs aihwkit's C++ tile (its torch tile "
                        "ignores the value)", value, "use tile=cpp (the default)")]
    return []


def ir_drop_t_problems(where: str, rpu: Any) -> list[Problem]:
    """aihwkit's own support checks of its time-dependent IR-drop tile on ``rpu``."""
    from aihwkit.simulator.tiles.analog_mvm_irdrop_t import AnalogMVMIRDropT
    from aihwkit.simulator.tiles.torch_tile import TorchSimulatorTile

    out = aihwkit_problems(
        where, ((TorchSimulatorTile.check_rpu_config_support, rpu),
                (AnalogMVMIRDropT.check_support, rpu.forward)),
        "ir_drop_t needs a config aihwkit's IR-drop tile supports",
        "drop ir_drop_t for this hardware model")
    if rpu.forward.is_perfect or rpu.forward.inp_res <= 0:
        out.append(Problem(where, "ir_drop_t needs a DAC (its pulse widths set the time steps)",
                           rpu.forward.inp_res, "drop ir_drop_t for this hardware model"))
    return out


def ir_drop_t_layer_problems(where: str, model: nn.Module, example: torch.Tensor,
                             digital: Sequence[str] = ()) -> list[Problem]:
    """Layers aihwkit 1.2's IR-drop tile cannot run: it handles 2-D inputs only (its column
    interleaving breaks on a third dimension), and an analog conv always feeds it 3-D patches,
    as does a Linear on tokens. ``example``: one input of the digital ``model``."""
    modules = dict(model.named_modules())
    dims: dict[str, int] = {}
    hooks = [modules[name].register_forward_hook(
        lambda mod, args, out, name=name: dims.__setitem__(name, args[0].dim()))
        for name in split_layers(model, digital)[0]]
    try:
        with torch.no_grad():
            model.eval()(example)
    finally:
        for hook in hooks:
            hook.remove()
    bad = [name for name, dim in dims.items()
           if isinstance(modules[name], nn.Conv2d | nn.Conv1d | nn.Conv3d) or dim > 2]
    if not bad:
        return []
    return [Problem(where, "ir_drop_t runs on aihwkit's IR-drop tile, which takes 2-D inputs "
                    "only (a Linear on flat features): convolutions and Linear layers on token "
                    "sequences fail inside it", bad,
                    "keep these layers digital (digital=[...]), use ir_drop instead, or drop "
                    "ir_drop_t")]
