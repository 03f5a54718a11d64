"""Weight-programming optimisation (Mackin et al., Nat. Commun. 2022) with aihwkit's optimiser.

aihwkit 1.2.0 ships ``WeightProgrammingOptimizer``: differential evolution over the table that
maps each weight to its conductance pair, minimising the time-averaged error between the target
and the programmed, drifted and compensated weights (TNMSE) on a sample of the model's weight
distribution. Its result is a ``CustomPairConductanceConverter``; here it becomes the hardware
model's ``converter`` option (``analog.inference_options``), so the optimised programming is
scored by the same evaluation, fast path included, as any other option, and stated in every
record.

The optimiser's population and iterations are small by default (aihwkit's are 100 x dimensions
and 200 iterations, hours on a CPU); the result states them with both TNMSEs, so a table that
does not beat the baseline's is seen as such. The device's own converter (its number of pairs)
is kept: the optimiser chooses where on each pair a weight is programmed, not new hardware.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from analog.aimc import on_torch_tile
from analog.coverage import digital_layers, is_mappable
from analog.hw import get_hw
from analog.inference_options import PAIR_CONVERTERS, custom_converter_problems
from analog.option_checks import torch_tile_problems
from hwnas.common.errors import ConfigError


@dataclass(frozen=True)
class WpoSettings:
    """The optimiser's budget. ``popsize`` is per dimension (scipy's rule); ``seed`` fixes the
    weight sample, the population and every programming draw of the search."""

    popsize: int = 10
    maxiter: int = 20
    baseline_iterations: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("popsize", "maxiter", "baseline_iterations"):
            if getattr(self, name) < 1:
                raise ConfigError.one(f"wpo {name}", "must be >= 1", getattr(self, name),
                                      "pass e.g. 10")


@dataclass
class WpoResult:
    """One device's optimised programming, with what it costs and what it reached."""

    hw: str
    options: dict[str, Any]
    """The hardware-model overrides that program with the optimised table."""
    baseline_tnmse: float
    optimized_tnmse: float
    """The optimised table's TNMSE on fresh draws, as many as the baseline's (the search's own
    best is the least of many noisy draws, so it is biased low)."""
    beats_baseline: bool
    times: list[float]
    settings: dict[str, Any]
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def unitless_weights(model: nn.Module, rpu: Any, digital: Sequence[str] = ()) -> Tensor:
    """Every analog layer's weights as the tiles hold them before conversion to conductances:
    divided by the mapping scale (``weight_scaling_omega``, per output row when column-wise)."""
    mapping = rpu.mapping
    omega = mapping.weight_scaling_omega or 0.0
    keep = set(digital_layers(model, digital)) if digital else set()
    parts = []
    for name, module in model.named_modules():
        if not is_mappable(module) or name in keep:
            continue
        w = module.weight.detach().reshape(module.weight.shape[0], -1).float()
        if omega > 0:
            wmax = w.abs().amax(dim=1, keepdim=True) if mapping.weight_scaling_columnwise \
                else w.abs().max()
            w = w / (wmax / omega).clamp_min(torch.finfo(w.dtype).tiny)
        parts.append(w.flatten())
    if not parts:
        raise ConfigError.one("weight-programming optimisation", "needs an analog layer",
                              "every layer digital", "keep at least one mappable layer analog")
    return torch.cat(parts)


def _converter(hw: str, rpu: Any) -> Any:
    conv = getattr(rpu.noise_model, "g_converter", None)
    if type(conv).__name__ not in PAIR_CONVERTERS:
        raise ConfigError.one(
            "weight-programming optimisation", "needs a device mapped on conductance pairs",
            f"{hw} ({type(rpu.noise_model).__name__}, {type(conv).__name__})",
            "pick a pair-based device, e.g. pcm_static or pcm")
    return conv


def _objective_config(hw: str) -> Any:
    """``hw``'s rpu config for the optimiser's objective, on aihwkit's torch tile: the drift
    compensation's read-out then draws its output noise from torch's generator, which is seeded
    (aihwkit's C++ tile has its own, unseeded one), so one seed repeats the search. The torch
    tile has neither per-MVM read noise nor IR drop, so the read-out runs without them; both
    act alike on it and on its reference read-out, whose ratio is the compensation. The
    weights' programming noise, drift and read noise, which the objective measures, stay."""
    from aihwkit.simulator.parameters.enums import WeightNoiseType

    rpu = get_hw(hw).rpu_config()
    rpu.forward.w_noise, rpu.forward.w_noise_type = 0.0, WeightNoiseType.NONE
    rpu.forward.ir_drop = 0.0
    rpu = on_torch_tile(rpu)
    problems = torch_tile_problems(f"{hw} weight-programming objective", rpu)
    if problems:
        raise ConfigError(problems)
    return rpu


def _tnmse(opt: Any, table: Any, mapping: Any) -> float:
    """``table``'s weight error on as many fresh draws as the optimiser's baseline, with the
    objective's settings. The search's own best is the least of many noisy draws (biased low),
    so the table is scored again, as the baseline was."""
    from aihwkit.inference.converter.wpo import loss_rpu_config

    params = copy.deepcopy(opt.__dict__) | {"get_baseline": True}
    params["rpu_config"].mapping = mapping
    params["rpu_config"].noise_model.g_converter = copy.deepcopy(table)
    draws = opt.baseline_iterations
    return sum(float(loss_rpu_config(copy.deepcopy(params))) for _ in range(draws)) / draws


@contextmanager
def _seeded_globals(seed: int) -> Iterator[None]:
    """The optimiser draws its weight sample and its programming noise from torch's and numpy's
    global generators: seeded here, and put back afterwards."""
    torch_state, np_state = torch.random.get_rng_state(), np.random.get_state()
    try:
        torch.manual_seed(seed)
        np.random.seed(seed)
        yield
    finally:
        torch.random.set_rng_state(torch_state)
        np.random.set_state(np_state)


def _stop_once_beaten(intermediate_result: Any) -> None:
    """aihwkit's stopping rule (beaten the baseline by its margin: ``fun < 0``) without its
    print; a module function, as the optimiser pickles its settings."""
    if intermediate_result.fun < 0.0:
        raise StopIteration


def optimize_programming(model: nn.Module, hw: str, times: Sequence[float],
                         settings: WpoSettings = WpoSettings(), *,
                         digital: Sequence[str] = ()) -> WpoResult:
    """The conductance table aihwkit's optimiser finds for ``model``'s analog weights on ``hw``,
    minimising the weight error over drift ``times`` (seconds), as ``hw``'s options."""
    from aihwkit.inference.converter.wpo import WeightProgrammingOptimizer

    rpu = _objective_config(hw)
    baseline = _converter(hw, rpu)
    weights = unitless_weights(model, rpu, digital)
    start = time.perf_counter()

    with _seeded_globals(settings.seed):
        opt = WeightProgrammingOptimizer(
            weights, list(getattr(baseline, "f_lst", [1.0])), rpu, [float(t) for t in times],
            baseline, symmetric=True, popsize=settings.popsize, maxiter=settings.maxiter,
            baseline_iterations=settings.baseline_iterations, seed=settings.seed, workers=1,
            polish=False, disp=False, callback=_stop_once_beaten)
        mapping = copy.deepcopy(opt.rpu_config.mapping)  # the objective's: no weight scaling
        table, _ = opt.run_optimizer()
        best = _tnmse(opt, table, mapping)
    spec = {"f_lst": [float(f) for f in table.f_lst],
            "g_lst": [[float(g) for g in row] for row in table.g_lst]}
    problems = custom_converter_problems(f"{hw} optimised converter", spec)
    if problems:
        raise ConfigError(problems)
    base = float(opt.loss_baseline)
    return WpoResult(hw, {"converter": spec}, base, best, best < base,
                     [float(t) for t in times], asdict(settings), time.perf_counter() - start)
