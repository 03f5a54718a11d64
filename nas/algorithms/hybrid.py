"""The default sampler: Pareto local search blended with multivariate TPE, without repeats.

Why this design (measured in ``bench/search_quality.py``, figures in ``bench/results/nas.md``):
architecture spaces are discrete and small next to a budget of a few hundred evaluations, so

* plain samplers propose architectures already evaluated; every repeat wastes a whole training.
  Here a proposal equal to a finished, running or queued trial is replaced by a mutation of it;
* good architectures have good neighbours (one op or one width apart). Mutating members of the
  current Pareto front is a cheap, strong move (the "local search" baseline of NAS benchmarks);
* mutating the members that add most to the front's hypervolume (the ends and the edges of
  its gaps; ``parent="hvc"``), one parameter at a time, fills the front faster than picking
  members uniformly: on held-out seeds of the benchmark tables it raised the median
  hypervolume at 300 evaluations on all four tables without noise;
* TPE (multivariate, grouped, constant liar for parallel workers) keeps a global model of where the
  good regions are, so the search does not get stuck on one part of the front.

Each trial picks its move from a generator seeded with ``(seed, trial number)``, so one worker
is reproducible and parallel workers draw different moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.search_space import IntersectionSearchSpace
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import pareto_mask, to_loss

PARENT_RULES = ("hvc", "uniform")


class HybridSampler(BaseSampler):
    """Random start, then per trial either mutate a Pareto-front member or ask TPE; no repeats.

    Args:
        seed: seeds TPE, the random start and every move.
        n_startup_trials: random (novel) trials before the model-based moves.
        mutation_prob: share of trials that mutate a front member; the rest ask TPE.
        max_mutations: at most this many parameters change in one mutation (1 is most likely).
        parent: how a mutation picks its front member: ``uniform``, or ``hvc`` (in proportion to
            its exclusive hypervolume contribution, so gaps and ends of the front are filled).
    """

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = 10,
                 mutation_prob: float = 0.5, max_mutations: int = 1,
                 parent: str = "hvc") -> None:
        self._seed = 0 if seed is None else int(seed)
        self._n_startup = n_startup_trials
        self._p_mut = mutation_prob
        if parent not in PARENT_RULES:
            raise ConfigError.one("sampler.options.parent", f"must be one of {PARENT_RULES}",
                                  parent, "use 'hvc' (the default) or 'uniform'")
        self._max_mut = max(1, max_mutations)
        self._parent = parent
        self._tpe = TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True,
                               n_startup_trials=n_startup_trials)
        self._random = RandomSampler(seed=seed)
        self._space = IntersectionSearchSpace(include_pruned=True)
        self._parents: dict[int, dict[str, Any]] = {}
        self.moves: dict[int, str] = {}
        """Each trial's move (random, tpe or mutate) by trial number, for this process's trials."""

    def reseed_rng(self) -> None:
        self._tpe.reseed_rng()
        self._random.reseed_rng()
        self._seed = int(np.random.SeedSequence().entropy % (2**31))

    # -- move selection ---------------------------------------------------------------------
    def _rng(self, trial: FrozenTrial, stream: int) -> np.random.Generator:
        return np.random.default_rng([self._seed, trial.number, stream])

    def _move(self, study: Study, trial: FrozenTrial) -> str:
        if trial.number in self.moves:
            return self.moves[trial.number]
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        if len(done) < self._n_startup:
            move = "random"
        else:
            move = "mutate" if self._rng(trial, 0).random() < self._p_mut else "tpe"
        self.moves[trial.number] = move
        return move

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return self._space.calculate(study)

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        if not search_space:
            return {}
        move = self._move(study, trial)
        rng = self._rng(trial, 1)
        seen = _seen(study, search_space, exclude=trial.number)
        if move == "tpe":
            tpe_space = self._tpe.infer_relative_search_space(study, trial)
            params = self._tpe.sample_relative(study, trial, tpe_space)
            params = {k: params[k] for k in search_space if k in params}
            if len(params) < len(search_space):
                params = _random_params(search_space, rng)
        elif move == "mutate":
            parent = _pick_parent(study, rng, self._parent)
            if parent is None:
                params = _random_params(search_space, rng)
            else:
                self._parents[trial.number] = parent.params
                params = _mutate({k: parent.params.get(k) for k in search_space},
                                 search_space, rng, self._max_mut)
        else:
            params = _random_params(search_space, rng)
        return _novel(params, search_space, seen, rng, self._max_mut)

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        move = self._move(study, trial)
        parent = self._parents.get(trial.number, {})
        if move == "mutate" and param_name in parent:
            value = parent[param_name]
            if _contains(param_distribution, value):
                return value
        if move == "tpe":
            return self._tpe.sample_independent(study, trial, param_name, param_distribution)
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._tpe.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._parents.pop(trial.number, None)
        self._tpe.after_trial(study, trial, state, values)


# -- helpers ---------------------------------------------------------------------------------
def _key(params: dict[str, Any], names: Sequence[str]) -> tuple:
    return tuple((n, repr(params.get(n))) for n in names)


def _seen(study: Study, space: dict[str, BaseDistribution], exclude: int) -> set[tuple]:
    names = sorted(space)
    trials = study.get_trials(deepcopy=False)
    return {_key(t.params, names) for t in trials
            if t.number != exclude and all(n in t.params for n in names)}


def _pick_parent(study: Study, rng: np.random.Generator,
                 rule: str = "uniform") -> FrozenTrial | None:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.values is not None]
    if not done:
        return None
    feasible = [t for t in done if all(v <= 0 for v in t.constraints.values())]
    pool = feasible or sorted(done, key=lambda t: sum(max(v, 0) for v in
                                                      t.constraints.values()))[:1]
    dirs = ["maximize" if d == optuna.study.StudyDirection.MAXIMIZE else "minimize"
            for d in study.directions]
    values = np.array([t.values for t in pool])
    mask = pareto_mask(values, dirs)
    front = [t for t, on in zip(pool, mask, strict=True) if on]
    if rule == "hvc" and len(front) > 2:
        return front[int(rng.choice(len(front), p=_hvc_weights(values, mask, dirs)))]
    return front[int(rng.integers(len(front)))]


def _hvc_weights(values: np.ndarray, mask: np.ndarray, dirs: list[str]) -> np.ndarray:
    """Front members' exclusive hypervolume contributions as probabilities, in the units of the
    evaluated points' ranges, so no objective's scale decides (uniform if all are zero). The
    ends of the front count through the reference just beyond the worst evaluated values."""
    import moocore

    loss = to_loss(values, dirs)
    lo, hi = loss.min(axis=0), loss.max(axis=0)
    norm = (loss[mask] - lo) / np.where(hi > lo, hi - lo, 1.0)
    contrib = moocore.hv_contributions(norm, ref=np.full(norm.shape[1], 1.1))
    total = contrib.sum()
    return contrib / total if total > 0 else np.full(len(norm), 1.0 / len(norm))


def _contains(dist: BaseDistribution, value: Any) -> bool:
    """Whether ``value`` is a valid choice of ``dist`` (a parent's value in a changed space)."""
    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    if isinstance(dist, IntDistribution | FloatDistribution):
        ok = isinstance(value, int | float) and dist.low <= value <= dist.high
        return ok and (not dist.step or abs((value - dist.low) / dist.step
                                            - round((value - dist.low) / dist.step)) < 1e-8)
    return False


def _random_value(dist: BaseDistribution, rng: np.random.Generator) -> Any:
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


def _random_params(space: dict[str, BaseDistribution], rng: np.random.Generator) -> dict:
    return {name: _random_value(dist, rng) for name, dist in space.items()}


def _neighbour(value: Any, dist: BaseDistribution, rng: np.random.Generator) -> Any:
    if isinstance(dist, CategoricalDistribution):
        others = [c for c in dist.choices if c != value] or list(dist.choices)
        return others[int(rng.integers(len(others)))]
    if isinstance(dist, IntDistribution) and value is not None and rng.random() < 0.5:
        # one step up or down keeps depths and widths local, the most common useful move
        step = dist.step * (1 if rng.random() < 0.5 else -1)
        return int(min(max(value + step, dist.low), dist.high))
    return _random_value(dist, rng)


def _mutate(params: dict[str, Any], space: dict[str, BaseDistribution],
            rng: np.random.Generator, max_mut: int) -> dict[str, Any]:
    names = sorted(space)
    k = 1 + int(rng.binomial(max_mut - 1, 0.3)) if max_mut > 1 else 1
    out = dict(params)
    for name in rng.choice(names, size=min(k, len(names)), replace=False):
        out[name] = _neighbour(out.get(name), space[name], rng)
    return out


def _novel(params: dict[str, Any], space: dict[str, BaseDistribution], seen: set[tuple],
           rng: np.random.Generator, max_mut: int, tries: int = 50) -> dict[str, Any]:
    """``params`` unless already evaluated; else its nearest unseen mutation (or a random one)."""
    names = sorted(space)
    cand = params
    for i in range(tries):
        if _key(cand, names) not in seen:
            return cand
        cand = (_mutate(params, space, rng, max_mut + i // 10) if i < tries // 2
                else _random_params(space, rng))
    return cand  # the space is (nearly) exhausted: a repeat is better than no trial
