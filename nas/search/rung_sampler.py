"""What successive halving's sampler learns from: each arch once, at its highest completed rung.

``HighestRungSampler`` wraps any sampler. A rung result stays in the storage when its arch goes
up, but the wrapped sampler no longer sees it, nor a promotion that has not finished (its
parameters are its parent's, already seen): a low rung's score, trained on a fraction of the
budget, is not a second observation of the same arch (``nas.search.schedule.latest_rungs``).

**A shadow study.** Optuna's samplers read the trials from the study they are given, so the
wrapped one is given another study: an in-memory study filled through public Optuna
(``add_trial(create_trial(...))``, the documented way to show a sampler outside observations).
It holds every trial of the real study, at the same number:

* a trial ``latest_rungs`` keeps, and the trial being sampled: a copy (state, parameters,
  values, attributes, constraints);
* any other: a FAIL trial with its parameters and its user attributes only (no values or
  constraints). Optuna's samplers learn from no FAIL trial, and the default sampler's repeat
  check still sees its arch: a candidate that stopped at the free rung 0 (a prior score, hidden)
  is not proposed again. The user attributes hold the costs measured before training (latency,
  params, MACs), which no rung changes: the default sampler's budget pre-filter fits on them.
  Without them it saw only trained archs, and on the quickstart 8 of 23 rung-0 candidates were
  measured over the budget, up to 2.7 times it.

Equal numbers keep right what samplers key on trial numbers: the default sampler's moves and
plans (the driver reads ``moves[trial.number]``), its random streams (seeded with the number),
TPE's constant liar, which leaves out the trial it samples. The answers go back to the real
trial unchanged.

**What the wrapped sampler writes on a trial** (NSGA-II's generation, TPE's relative parameters)
lands in the shadow. It is kept here while the trial runs and, when it ends, stored on the real
study as the user attribute ``sampler_attrs:<number>``; every later shadow, in any worker or a
resumed run, gives it back to that trial (so TPE's constant liar in another worker sees a
running trial's parameters as they are suggested, not before). What a sampler keeps on the study
itself lives in one shadow and is recomputed in the next from the trials then complete:
NSGA-II's parents of a generation (in one worker the same trials, listed in another order, so
its crossovers differ from a bare run's); a sampler that counts there (QMC's sample index) would
repeat itself, so it is not one to wrap.

One shadow serves all calls of one trial while the other trials stay as they were; a trial that
starts, finishes or gains parameters elsewhere rebuilds it (each build copies every trial).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler
from optuna.storages import InMemoryStorage
from optuna.trial import FrozenTrial, TrialState, create_trial

from nas.search.schedule import latest_rungs

ATTRS = "sampler_attrs:"
"""Prefix of the real study's user attributes that keep what the wrapped sampler wrote on a
trial (``sampler_attrs:<trial number>``)."""


@dataclass
class _Shadow:
    key: tuple
    study: optuna.Study
    given: dict[str, Any] = field(default_factory=dict)  # the sampled trial's attrs as copied


class HighestRungSampler(BaseSampler):
    """Any sampler, fed each arch at its highest completed rung only, through a shadow study.

    The wrapped sampler's own attributes (``attach``, ``moves``) are reached through this one."""

    def __init__(self, sampler: BaseSampler):
        self.sampler = sampler
        self._shadow: _Shadow | None = None
        self._written: dict[int, dict[str, Any]] = {}  # by trial number, until the trial ends

    def __getattr__(self, name: str) -> Any:
        if "sampler" not in self.__dict__:  # copying or unpickling: nothing to delegate to yet
            raise AttributeError(name)
        return getattr(self.__dict__["sampler"], name)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_shadow": None}  # an in-memory storage holds a lock

    # -- Optuna's interface: each call asks the wrapped sampler with the shadow ------------------
    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return self._ask(study, trial, "infer_relative_search_space")

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return self._ask(study, trial, "sample_relative", search_space)

    def sample_independent(self, study: optuna.Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        return self._ask(study, trial, "sample_independent", param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._ask(study, trial, "before_trial")

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._ask(study, trial, "after_trial", state, values)
        written = self._written.pop(trial.number, None)
        if written:
            study.set_user_attr(f"{ATTRS}{trial.number}", written)

    def reseed_rng(self) -> None:
        self.sampler.reseed_rng()

    # -- the shadow -------------------------------------------------------------------------------
    def view(self, study: optuna.Study, trial: FrozenTrial) -> tuple[optuna.Study, FrozenTrial]:
        """(the shadow study, its copy of ``trial`` with the parameters ``trial`` has now)."""
        trials = study.get_trials(deepcopy=False)
        key = (trial.number, *((t.number, t.state, len(t.params)) for t in trials
                               if t.number != trial.number))
        if self._shadow is None or self._shadow.key != key:
            self._shadow = self._build(study, trials, trial.number, key)
        mine = copy.deepcopy(self._shadow.study.get_trials(deepcopy=False)[trial.number])
        mine.params, mine.distributions = trial.params, trial.distributions
        mine.user_attrs = trial.user_attrs
        mine.system_attrs = {**mine.system_attrs, **trial.system_attrs}  # keeps what it wrote
        return self._shadow.study, mine

    def _ask(self, study: optuna.Study, trial: FrozenTrial, method: str, *args: Any) -> Any:
        shadow, mine = self.view(study, trial)
        out = getattr(self.sampler, method)(shadow, mine, *args)
        self._keep_writes(trial.number)
        return out

    def _keep_writes(self, number: int) -> None:
        assert self._shadow is not None
        given = self._shadow.given
        now = self._shadow.study.get_trials(deepcopy=False)[number].system_attrs
        new = {k: v for k, v in now.items() if k not in given or given[k] != v}
        if new:
            self._written.setdefault(number, {}).update(copy.deepcopy(new))

    def _build(self, study: optuna.Study, trials: list[FrozenTrial], number: int, key: tuple
               ) -> _Shadow:
        seen = {t.number for t in latest_rungs(trials)} | {number}
        kept = {int(k[len(ATTRS):]): v for k, v in study.user_attrs.items()
                if k.startswith(ATTRS)}
        shadow = _empty_like(study, self.sampler)
        out = _Shadow(key, shadow)
        for t in trials:
            attrs = {**t.system_attrs, **kept.get(t.number, {}), **self._written.get(t.number, {})}
            shadow.add_trial(_copy(t, attrs) if t.number in seen else _hidden(t))
            if t.number == number:
                out.given = copy.deepcopy(attrs)
        return out


def _empty_like(study: optuna.Study, sampler: BaseSampler) -> optuna.Study:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # no "new study" line per build
    try:
        return optuna.create_study(storage=InMemoryStorage(), sampler=sampler,
                                   directions=study.directions)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _copy(t: FrozenTrial, system_attrs: dict[str, Any]) -> FrozenTrial:
    return create_trial(state=t.state, values=t.values, params=t.params,
                        distributions=t.distributions, user_attrs=t.user_attrs,
                        system_attrs=system_attrs, intermediate_values=t.intermediate_values)


def _hidden(trial: FrozenTrial) -> FrozenTrial:
    """A trial the wrapped sampler must not learn a score from: FAIL, with its parameters and
    its user attributes (measured costs)."""
    return create_trial(state=TrialState.FAIL, params=trial.params,
                        distributions=trial.distributions, user_attrs=trial.user_attrs)
