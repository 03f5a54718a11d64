"""Which layers aihwkit can put on analog tiles, and the share of the work they carry.

aihwkit converts modules whose class is exactly ``nn.Linear`` or ``nn.Conv1d/2d/3d``
(``convert_to_analog`` looks the class up in its conversion map) and raises ``Only one group is
supported`` on grouped/depthwise convs. Everything else (grouped convs, subclasses such as
timm's ``Conv2dSame`` or attention's out-projection, attention matmuls, norms) stays digital, so
every analog result carries its coverage. ``is_mappable`` is that one test, shared by the
conversion, the fast path and the cost model (``hw_cost.analog_cost``).

Layer-wise mapping: ``digital`` patterns (shell patterns over module names, e.g. ``stem.*``,
``head.fc``) keep further mappable layers digital; ``digital_layers`` resolves them.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

import torch
from torch import Tensor, nn

from hwnas.common.errors import ConfigError, Problem

MAPPABLE = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)


class CoverageWarning(UserWarning):
    """Some compute layers stay digital because aihwkit cannot map them."""


@dataclass
class Coverage:
    """Share of the model on analog tiles.

    ``weight_fraction``: analog weight elements / all parameters. ``mac_fraction``: MACs of
    analog layers / all MACs of one forward pass (torch's FLOP counter, attention included).
    """

    weight_fraction: float
    mac_fraction: float
    analog_layers: list[str] = field(default_factory=list)
    digital_layers: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def summary(self) -> str:
        macs = "n/a (no example input)" if self.mac_fraction != self.mac_fraction \
            else f"{100 * self.mac_fraction:.1f}%"
        return f"{100 * self.weight_fraction:.1f}% of weights and {macs} of MACs on analog tiles"


def is_mappable(module: nn.Module) -> bool:
    return type(module) in MAPPABLE and getattr(module, "groups", 1) == 1


def is_compute_layer(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear | nn.modules.conv._ConvNd)


def split_layers(model: nn.Module, digital: Sequence[str] = ()) -> tuple[list[str], list[str]]:
    """Names of (analog, digital) compute layers, in module order: unmappable layers and those
    matching a ``digital`` pattern are digital."""
    keep = set(digital_layers(model, digital)) if digital else set()
    analog, rest = [], []
    for name, module in model.named_modules():
        if is_compute_layer(module):
            (analog if is_mappable(module) and name not in keep else rest).append(name)
    return analog, rest


def mappable_layers(model: nn.Module) -> list[str]:
    return [name for name, module in model.named_modules() if is_mappable(module)]


def digital_layers(model: nn.Module, patterns: Sequence[str]) -> list[str]:
    """Mappable layers that ``patterns`` (shell patterns over module names) keep digital.

    A pattern that matches no mappable layer is an error: a typo would silently map everything.
    """
    if isinstance(patterns, str):
        patterns = [patterns]
    names = mappable_layers(model)
    problems = [Problem("digital layers", "each pattern must match at least one analog-mappable "
                        "layer", pat, f"use shell patterns over module names, e.g. one of "
                        f"{names[:4] + ['...'] if len(names) > 4 else names}")
                for pat in patterns if not fnmatch.filter(names, pat)]
    if problems:
        raise ConfigError(problems)
    return [n for n in names if any(fnmatch.fnmatchcase(n, pat) for pat in patterns)]


def _layer_macs(module: nn.Module, inp: Tensor, out: Tensor) -> int:
    if isinstance(module, nn.Linear):
        return inp.numel() // module.in_features * module.in_features * module.out_features
    per_output = module.in_channels // module.groups * int(torch.tensor(module.kernel_size).prod())
    return out.numel() * per_output


@torch.no_grad()
def _count_macs(model: nn.Module, example: Tensor) -> tuple[dict[str, int], int]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    per_layer: dict[str, int] = {}
    hooks = [m.register_forward_hook(
        lambda mod, args, out, name=name: per_layer.__setitem__(
            name, per_layer.get(name, 0) + _layer_macs(mod, args[0], out)))
        for name, m in model.named_modules() if is_compute_layer(m)]
    counter = FlopCounterMode(display=False)
    param = next(model.parameters(), None)
    if param is not None:  # a model on CUDA is counted on CUDA, with a CPU example too
        example = example.to(param.device)
    was_training = model.training
    try:
        model.eval()
        # The fused CPU attention kernel reports 0 FLOPs; the math kernel counts them.
        with sdpa_kernel(SDPBackend.MATH), counter:
            model(example)
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return per_layer, max(counter.get_total_flops() // 2, sum(per_layer.values()), 1)


def coverage(model: nn.Module, example: Tensor | None, digital: Sequence[str] = ()) -> Coverage:
    """Coverage of the digital ``model`` with the layers matching ``digital`` kept digital;
    MACs need one input ``example`` (batch of 1 is enough), without it ``mac_fraction`` is NaN."""
    analog, digital = split_layers(model, digital)
    modules = dict(model.named_modules())
    analog_weights = sum(modules[n].weight.numel() for n in analog)
    total_weights = max(sum(p.numel() for p in model.parameters()), 1)
    mac_fraction = float("nan")
    if example is not None:
        per_layer, total_macs = _count_macs(model, example[:1])
        mac_fraction = sum(per_layer.get(n, 0) for n in analog) / total_macs
    return Coverage(analog_weights / total_weights, mac_fraction, analog, digital)


def warn_if_partial(cov: Coverage, model: nn.Module, hw: str) -> None:
    """One warning naming the layers kept digital and the coverage that results."""
    if not cov.digital_layers:
        return
    modules = dict(model.named_modules())
    shown = ", ".join(
        f"{n} ({type(modules[n]).__name__}, groups={getattr(modules[n], 'groups', 1)})"
        for n in cov.digital_layers[:5])
    more = f" and {len(cov.digital_layers) - 5} more" if len(cov.digital_layers) > 5 else ""
    warnings.warn(
        f"{hw}: {len(cov.digital_layers)} layer(s) kept digital because aihwkit maps only "
        f"ungrouped nn.Linear/nn.Conv layers: {shown}{more}. Analog coverage: {cov.summary()}.",
        CoverageWarning, stacklevel=3)
