"""Whole-trial proposals for define-by-run spaces: plan every choice of a trial at once.

A conditional space (``resnet``: the ``g3_*`` choices exist only when ``groups >= 3``) asks a
different set of parameters in each trial, so a proposal made on the parameters common to all
trials (Optuna's intersection search space) never changes the conditional ones. A *plan* is a
``{name: value}`` dict for the whole trial; the sampler serves it to ``trial.suggest_*`` one name
at a time, so ``space.sample(trial)`` rebuilds exactly the planned architecture.

Two ways to make a plan:

* with the space: run ``space.sample`` on a ``Recorder`` (a stand-in trial that answers from
  given values, else draws at random) and keep what it asked: the plan is then exactly the
  arch's parameters, and mutations go through ``space.mutate``;
* without it (a sampler used on a bare objective): over the union of every distribution the
  study has seen, mutating a parent's own parameters (``mutate_params``).

Duplicates (``is_repeat``): a plan repeats an earlier trial when it gives every parameter that
trial asked the same value. Define-by-run follows the same path for the same answers, so this
is exact: it is the whole arch string, conditional choices included.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.study import Study
from optuna.trial import FrozenTrial

Items = frozenset[tuple[str, str]]


class Recorder:
    """Duck-types the ``trial.suggest_*`` calls of a space; answers from ``values`` where the
    value fits the distribution asked (else at random) and records every answer."""

    def __init__(self, values: dict[str, Any], rng: np.random.Generator):
        self.values, self.rng = values, rng
        self.params: dict[str, Any] = {}
        self.distributions: dict[str, BaseDistribution] = {}

    def _answer(self, name: str, dist: BaseDistribution) -> Any:
        value = self.values.get(name)
        if name not in self.values or not contains(dist, value):
            value = random_value(dist, self.rng)
        self.params[name], self.distributions[name] = value, dist
        return value

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        return self._answer(name, CategoricalDistribution(tuple(choices)))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        return int(self._answer(name, IntDistribution(low, high, log=log, step=step)))

    def suggest_float(self, name: str, low: float, high: float, step: float | None = None,
                      log: bool = False) -> float:
        return float(self._answer(name, FloatDistribution(low, high, log=log, step=step)))


def record(space: Any, values: dict[str, Any], rng: np.random.Generator
           ) -> tuple[str, dict[str, Any]]:
    """(arch, the parameters ``space.sample`` asks for it), answering from ``values``."""
    rec = Recorder(values, rng)
    arch = space.sample(rec)
    return arch, rec.params


def params_of(space: Any, arch: str, rng: np.random.Generator) -> dict[str, Any]:
    """The trial parameters that make ``space.sample`` return ``arch``.

    Spaces keep their spec as the ``{parameter: value}`` dict (``search_spaces.choices``), so
    the decoded spec answers every question ``sample`` asks; anything else is a broken space."""
    spec = space.decode(arch)
    again, params = record(space, dict(spec) if isinstance(spec, dict) else {}, rng)
    if again != arch:
        raise ValueError(f"space {space.name!r}: sampling with the decoded parameters of {arch!r}"
                         f" gave {again!r}; its decode() must return the trial parameters")
    return params


def mutate_arch(space: Any, arch: str, rng: np.random.Generator, k: int = 1) -> str:
    """``arch`` after ``k`` of the space's own one-choice mutations."""
    pyrng = random.Random(int(rng.integers(2**63)))
    for _ in range(k):
        arch = space.mutate(arch, pyrng)
    return arch


# -- duplicates -------------------------------------------------------------------------------
def items(params: dict[str, Any]) -> Items:
    return frozenset((n, repr(v)) for n, v in params.items())


def seen_items(study: Study, exclude: int) -> list[Items]:
    """Every other trial's parameters (finished, running or queued), for ``is_repeat``."""
    return [items(t.params) for t in study.get_trials(deepcopy=False)
            if t.number != exclude and t.params]


def is_repeat(plan: dict[str, Any], seen: Iterable[Items]) -> Items | None:
    """The earlier trial ``plan`` repeats (all its parameters, same values), or None."""
    mine = items(plan)
    return next((s for s in seen if s <= mine), None)


# -- values and generic mutation --------------------------------------------------------------
def union_space(study: Study) -> dict[str, BaseDistribution]:
    """Every parameter any trial asked, with its (latest) distribution."""
    out: dict[str, BaseDistribution] = {}
    for t in study.get_trials(deepcopy=False):
        out.update(t.distributions)
    return dict(sorted(out.items()))


def contains(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is a valid choice of ``dist`` (a parent's value in a changed space)."""
    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    if isinstance(dist, IntDistribution | FloatDistribution):
        ok = isinstance(value, int | float) and dist.low <= value <= dist.high
        return ok and (not dist.step or abs((value - dist.low) / dist.step
                                            - round((value - dist.low) / dist.step)) < 1e-8)
    return False


def random_value(dist: BaseDistribution, rng: np.random.Generator) -> Any:
    if isinstance(dist, CategoricalDistribution):
        return dist.choices[int(rng.integers(len(dist.choices)))]
    if isinstance(dist, IntDistribution):
        n = (dist.high - dist.low) // dist.step
        return dist.low + dist.step * int(rng.integers(n + 1))
    if isinstance(dist, FloatDistribution):
        if dist.log:
            return float(np.exp(rng.uniform(np.log(dist.low), np.log(dist.high))))
        if dist.step:
            n = int(round((dist.high - dist.low) / dist.step))
            return dist.low + dist.step * int(rng.integers(n + 1))
        return float(rng.uniform(dist.low, dist.high))
    raise TypeError(f"unsupported distribution {dist!r}")


def random_params(space: dict[str, BaseDistribution], rng: np.random.Generator) -> dict:
    return {name: random_value(dist, rng) for name, dist in space.items()}


def neighbour(value: Any, dist: BaseDistribution, rng: np.random.Generator) -> Any:
    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value] or list(dist.choices)
        return others[int(rng.integers(len(others)))]
    if isinstance(dist, IntDistribution) and value is not None and rng.random() < 0.5:
        # one step up or down keeps depths and widths local, the most common useful move
        step = dist.step * (1 if rng.random() < 0.5 else -1)
        return int(min(max(value + step, dist.low), dist.high))
    return random_value(dist, rng)


def n_changes(rng: np.random.Generator, max_mut: int) -> int:
    """How many choices one mutation changes: 1, sometimes more (up to ``max_mut``)."""
    return 1 + int(rng.binomial(max_mut - 1, 0.3)) if max_mut > 1 else 1


def mutate_params(params: dict[str, Any], space: dict[str, BaseDistribution],
                  rng: np.random.Generator, max_mut: int) -> dict[str, Any]:
    """Copy of ``params`` with 1..``max_mut`` of the names in ``space`` changed (the generic
    mutation, for a space without ``mutate``: any parameter the parent asked can change)."""
    names = sorted(space)
    out = dict(params)
    for name in rng.choice(names, size=min(n_changes(rng, max_mut), len(names)), replace=False):
        out[name] = neighbour(out.get(name), space[name], rng)
    return out


def parent_arch(space: Any, parent: FrozenTrial, rng: np.random.Generator) -> str:
    """A finished trial's arch string (its ``arch`` attribute, else re-sampled from params)."""
    arch = parent.user_attrs.get("arch")
    return arch if isinstance(arch, str) else record(space, dict(parent.params), rng)[0]
