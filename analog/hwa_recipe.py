"""Named HWA recipes: how ``hwa_fit`` schedules the noise, the loss and the length of training.

``plain`` trains at the full weight noise from the first step on the task loss. ``rasch2023``
follows the recipe of Rasch et al., Nat. Commun. 2023 ("Hardware-aware training for large-scale
and diverse deep learning inference workloads using in-memory computing-based accelerators"):
the weight noise ramps up linearly from zero (here over the first half of the steps), the
student learns from the noise-free digital model it starts from (soft distillation,
``hwnas.compress.distill``), and the fine-tuning runs longer (here three times the epochs
asked for). The ramp needs an engine that reads the noise at every forward pass (torch or
lightning); aihwkit's C++ tiles fix it at conversion.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from torch import nn

from hwnas.common.errors import ConfigError


@dataclass(frozen=True)
class HwaRecipe:
    ramp: float
    """Fraction of the training steps over which the weight noise ramps from 0 (0: none)."""
    distill: bool
    """Learn the noise-free starting model's outputs (unless the caller gives a loss)."""
    epochs_factor: float
    """Training length relative to the epochs (or steps) asked for."""


RECIPES: dict[str, HwaRecipe] = {
    "plain": HwaRecipe(ramp=0.0, distill=False, epochs_factor=1.0),
    "rasch2023": HwaRecipe(ramp=0.5, distill=True, epochs_factor=3.0),
}


def get_recipe(name: str) -> HwaRecipe:
    if name not in RECIPES:
        raise ConfigError.one("HwaOptions.recipe", f"must be one of {sorted(RECIPES)}", name,
                              "use 'plain' or 'rasch2023'")
    return RECIPES[name]


def longer(cfg, recipe: HwaRecipe):
    """``cfg`` (a ``FitConfig``) stretched by the recipe's factor."""
    if recipe.epochs_factor == 1.0:
        return cfg
    if cfg.steps:
        return replace(cfg, steps=math.ceil(cfg.steps * recipe.epochs_factor))
    return replace(cfg, epochs=cfg.epochs * recipe.epochs_factor)


def teacher_loss(model: nn.Module, recipe: HwaRecipe, loss_fn):
    """The caller's loss, else distillation from a frozen copy of ``model`` when the recipe
    asks for it."""
    if loss_fn is not None or not recipe.distill:
        return loss_fn
    from hwnas.compress.distill import Distiller

    return Distiller(copy.deepcopy(model))


def total_steps(cfg, n_train: int) -> int:
    if cfg.steps:
        return int(cfg.steps)
    return max(1, math.ceil(cfg.epochs * math.ceil(n_train / cfg.batch_size)))


def ramp_hook(set_noise: Callable[[float], None], noise: float, recipe: HwaRecipe,
              steps: int) -> Callable[[nn.Module], None] | None:
    """A per-step callback ramping the noise linearly to ``noise`` over the recipe's share of
    ``steps`` (None: no ramp); sets the first step's noise at once."""
    if recipe.ramp <= 0 or noise <= 0:
        return None
    ramp_steps = max(1, round(recipe.ramp * steps))
    done = [0]

    def step(_: nn.Module) -> None:  # a ``fit`` step hook
        done[0] += 1
        set_noise(noise * min(1.0, (done[0] + 1) / ramp_steps))

    set_noise(noise / ramp_steps)
    return step
