"""The default sampler: Pareto local search blended with multivariate TPE, without repeats;
grouped TPE on conditional spaces.

Why this design (measured in ``bench/search/quality.py`` and ``bench/search/conditional.py``,
figures in ``bench/results/``): architecture spaces are discrete and small next to a budget of a
few hundred evaluations, so

* plain samplers propose architectures already evaluated; every repeat wastes a whole training.
  Here a proposal equal to a finished, running or queued trial (on every parameter it asked,
  conditional ones included: the whole arch string) is replaced by a mutation of it;
* good architectures have good neighbours (one op or one width apart). Mutating members of the
  current Pareto front is a cheap, strong move (the "local search" baseline of NAS benchmarks);
* mutating the members that add most to the front's hypervolume (the ends and the edges of
  its gaps; ``parent="hvc"``), one parameter at a time, fills the front faster than picking
  members uniformly: on held-out seeds of the benchmark tables it raised the median
  hypervolume at 300 evaluations on all four tables without noise;
* TPE (multivariate, grouped, constant liar for parallel workers) keeps a global model of where the
  good regions are, so the search does not get stuck on one part of the front. Grouped TPE
  models each set of parameters that occur together, so conditional choices are modelled on the
  trials that have them.

Conditional (define-by-run) spaces: each trial is planned whole (``nas.algorithms.plans``) and
served to ``trial.suggest_*`` name by name, so mutations reach every choice that exists.

On such spaces (found from the trials: two of them asked different parameters) the sampler is
grouped TPE alone, and a proposal that repeats a trial goes through (a study answers it from its
storage, ``nas.search.repeats``, without training). After the same start it proposes exactly
what Optuna's multivariate grouped TPE proposes (tested). The random start stays the sampler's
own, seeded per trial and novel: TPE's startup draws come from one stateful generator, so a
resumed study would replay the first process's archs. Measured on the conditional bench
(``bench/search/conditional.py``, held-out seeds): with front mutations at the share that wins on
NB201, or with repeats replaced by novel archs, the hybrid fell behind grouped TPE at 300
evaluations (p < 0.01). One mutation there often redraws whole groups (a changed ``groups``), so
it is not a small step, and TPE's repeated proposals are its front members, kept in its model.
``conditional_mutation_prob`` sets the mutation share on these spaces (0: TPE only).

With a space attached (``attach``, as the study driver does) the plan comes from ``space.sample``
and mutations from ``space.mutate``; without one, from the parameters the study has seen. An
attached ``BudgetFilter`` replaces proposals that are clearly over a cost budget before they are
measured (bounded retries, then the proposal goes through).

Each trial picks its move from a generator seeded with ``(seed, trial number)``, so one worker
is reproducible and parallel workers draw different moves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial, TrialState

from hwnas.common.errors import ConfigError
from nas.algorithms import plans
from nas.algorithms.pareto import pareto_mask, to_loss
from nas.algorithms.prefilter import BudgetFilter

PARENT_RULES = ("hvc", "uniform")
FILTER_TRIES = 20  # proposals tried against the budget filter before one goes through anyway
NOVEL_TRIES = 50
# Where the parent rule's hypervolume reference lies on an objective the study gives no reference
# for, in units of the evaluated range (0 the best value, 1 the worst): just beyond the worst.
HVC_REF = 1.1


class HybridSampler(BaseSampler):
    """Random start, then per trial either mutate a Pareto-front member or ask TPE; no repeats.

    Args:
        seed: seeds TPE, the random start and every move.
        n_startup_trials: random (novel) trials before the model-based moves.
        mutation_prob: share of trials that mutate a front member; the rest ask TPE.
        conditional_mutation_prob: the same share once the study's trials show a conditional
            space (trials that asked different parameters); there TPE's repeats go through.
        max_mutations: at most this many parameters change in one mutation (1 is most likely).
        parent: how a mutation picks its front member: ``uniform``, or ``hvc`` (in proportion to
            its exclusive hypervolume contribution, so gaps and ends of the front are filled).
        reference: the hypervolume reference point the study's front is scored by, one value per
            objective in its own units (None: not known, just beyond the worst evaluated value).
            ``hvc`` weighs contributions against it, so the ends of the front get the weight the
            study's hypervolume gives them. The study driver passes the study's own reference
            (``pareto.reference``, a metric's natural worst such as accuracy 0, a budget's bound).
    """

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = 10,
                 mutation_prob: float = 0.5, conditional_mutation_prob: float = 0.0,
                 max_mutations: int = 1, parent: str = "hvc",
                 reference: Sequence[float | None] | None = None) -> None:
        self._seed = 0 if seed is None else int(seed)
        self._n_startup = n_startup_trials
        for name, share in (("mutation_prob", mutation_prob),
                            ("conditional_mutation_prob", conditional_mutation_prob)):
            if not 0 <= share <= 1:
                raise ConfigError.one(f"sampler.options.{name}", "must be a share in [0, 1]",
                                      share, "e.g. 0.5 (half the trials mutate a front member)")
        self._p_mut = mutation_prob
        self._p_mut_conditional = conditional_mutation_prob
        self._conditional = False
        if parent not in PARENT_RULES:
            raise ConfigError.one("sampler.options.parent", f"must be one of {PARENT_RULES}",
                                  parent, "use 'hvc' (the default) or 'uniform'")
        self._max_mut = max(1, max_mutations)
        self._parent = parent
        self.reference = None if reference is None else list(reference)
        self._tpe = TPESampler(seed=seed, multivariate=True, group=True, constant_liar=True,
                               n_startup_trials=n_startup_trials)
        self._random = RandomSampler(seed=seed)
        self._space: Any = None
        self._filter: BudgetFilter | None = None
        self._plans: dict[int, dict[str, Any]] = {}
        self.moves: dict[int, str] = {}
        """Each trial's move (random, tpe or mutate) by trial number, for this process's trials."""
        self.parents: dict[int, int] = {}
        """The front member each mutation started from, by trial number (this process's)."""

    def attach(self, *, space: Any = None, prefilter: BudgetFilter | None = None,
               reference: Sequence[float | None] | None = None) -> None:
        """Plan trials with ``space`` (a ``search_spaces.SearchSpace``: its ``sample`` and
        ``mutate``), drop proposals ``prefilter`` finds clearly over a budget (needs space), and
        weigh parents against the study's ``reference`` unless one was given as an option."""
        self._space, self._filter = space, prefilter
        if self.reference is None and reference is not None:
            self.reference = list(reference)

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
            share = self._p_mut_conditional if self._is_conditional(done) else self._p_mut
            move = "mutate" if self._rng(trial, 0).random() < share else "tpe"
        self.moves[trial.number] = move
        return move

    def _is_conditional(self, done: list[FrozenTrial]) -> bool:
        """Whether finished trials asked different parameter sets (define-by-run); once seen,
        kept, so a study's moves do not flip back."""
        if not self._conditional:
            self._conditional = len({frozenset(t.params) for t in done}) > 1
        return self._conditional

    def _lets_repeat(self, move: str) -> bool:
        """TPE's own repeats go through on conditional spaces (see the module's notes)."""
        return move == "tpe" and self._conditional

    # -- Optuna's interface: the whole trial is planned, then served name by name -------------
    def infer_relative_search_space(self, study: Study, trial: FrozenTrial
                                    ) -> dict[str, BaseDistribution]:
        return {}  # not the intersection: it would hide every conditional choice

    def sample_relative(self, study: Study, trial: FrozenTrial,
                        search_space: dict[str, BaseDistribution]) -> dict[str, Any]:
        return {}

    def sample_independent(self, study: Study, trial: FrozenTrial, param_name: str,
                           param_distribution: BaseDistribution) -> Any:
        plan = self._plan(study, trial)
        if param_name in plan and plans.contains(param_distribution, plan[param_name]):
            return plan[param_name]
        # a name the plan lacks: a choice the study has not seen yet, or a knob outside the space
        if self._move(study, trial) == "tpe":
            return self._tpe.sample_independent(study, trial, param_name, param_distribution)
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study: Study, trial: FrozenTrial) -> None:
        self._tpe.before_trial(study, trial)

    def after_trial(self, study: Study, trial: FrozenTrial, state: TrialState,
                    values: Sequence[float] | None) -> None:
        self._plans.pop(trial.number, None)
        self._tpe.after_trial(study, trial, state, values)

    # -- planning -----------------------------------------------------------------------------
    def _pick_parent(self, study: Study, trial: FrozenTrial,
                     rng: np.random.Generator) -> FrozenTrial | None:
        parent = _pick_parent(study, rng, self._parent, self.reference)
        if parent is not None:
            self.parents[trial.number] = parent.number
        return parent

    def _plan(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        if trial.number not in self._plans:
            move, rng = self._move(study, trial), self._rng(trial, 1)
            seen = plans.seen_items(study, exclude=trial.number)
            plan = (self._plan_arch(study, trial, move, rng, seen) if self._space is not None
                    else self._plan_params(study, trial, move, rng, seen))
            self._plans[trial.number] = plan
        return self._plans[trial.number]

    def _tpe_values(self, study: Study, trial: FrozenTrial) -> dict[str, Any]:
        tpe_space = self._tpe.infer_relative_search_space(study, trial)
        return self._tpe.sample_relative(study, trial, tpe_space)

    def _plan_params(self, study: Study, trial: FrozenTrial, move: str,
                     rng: np.random.Generator, seen: list[plans.Items]) -> dict[str, Any]:
        """A plan over every parameter seen so far (no space attached)."""
        union = plans.union_space(study)
        if not union:
            return {}
        plan = plans.random_params(union, rng)
        if move == "tpe":
            plan |= {k: v for k, v in self._tpe_values(study, trial).items() if k in union}
        elif move == "mutate":
            parent = self._pick_parent(study, trial, rng)
            if parent is not None:
                plan |= plans.mutate_params(parent.params, parent.distributions, rng,
                                            self._max_mut)
        return plan if self._lets_repeat(move) else self._novel_params(plan, union, seen, rng)

    def _novel_params(self, plan: dict[str, Any], union: dict[str, BaseDistribution],
                      seen: list[plans.Items], rng: np.random.Generator) -> dict[str, Any]:
        """``plan`` unless it repeats a trial; else its nearest unseen mutation (or a random
        one). The mutation changes names the repeated trial asked, so it leaves that trial."""
        cand = plan
        for i in range(NOVEL_TRIES):
            twin = plans.is_repeat(cand, seen)
            if twin is None:
                return cand
            asked = {name: union[name] for name, _ in twin if name in union}
            cand = (plans.mutate_params(plan, asked, rng, self._max_mut + i // 10)
                    if i < NOVEL_TRIES // 2 else plans.random_params(union, rng))
        return cand  # the space is (nearly) exhausted: a repeat is better than no trial

    def _plan_arch(self, study: Study, trial: FrozenTrial, move: str,
                   rng: np.random.Generator, seen: list[plans.Items]) -> dict[str, Any]:
        """A plan from the attached space: one arch, novel, and inside the budgets if it can."""
        parent = self._pick_parent(study, trial, rng) if move == "mutate" else None
        first = None
        for attempt in range(FILTER_TRIES if self._filter is not None else 1):
            arch = self._propose(study, trial, move, parent, rng, attempt)
            if not (attempt == 0 and self._lets_repeat(move)):
                arch = self._novel_arch(arch, seen, rng)
            first = first or arch
            if self._filter is None or not self._filter.over(study, arch):
                return plans.params_of(self._space, arch, rng)
        return plans.params_of(self._space, first, rng)  # nothing passed: let one through

    def _propose(self, study: Study, trial: FrozenTrial, move: str, parent: FrozenTrial | None,
                 rng: np.random.Generator, attempt: int) -> str:
        if move == "mutate" and parent is not None:  # every retry: another neighbour
            base = plans.parent_arch(self._space, parent, rng)
            return plans.mutate_arch(self._space, base, rng, plans.n_changes(rng, self._max_mut))
        if move == "tpe" and attempt == 0:
            return plans.record(self._space, self._tpe_values(study, trial), rng)[0]
        return plans.record(self._space, {}, rng)[0]

    def _novel_arch(self, arch: str, seen: list[plans.Items],
                    rng: np.random.Generator) -> str:
        cand = arch
        for i in range(NOVEL_TRIES):
            if plans.is_repeat(plans.params_of(self._space, cand, rng), seen) is None:
                return cand
            cand = (plans.mutate_arch(self._space, arch, rng, 1 + i // 10) if i < NOVEL_TRIES // 2
                    else plans.record(self._space, {}, rng)[0])
        return cand


# -- parents ---------------------------------------------------------------------------------
def _pick_parent(study: Study, rng: np.random.Generator, rule: str = "uniform",
                 reference: Sequence[float | None] | None = None) -> FrozenTrial | None:
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
    # One objective: the front is a tie, every member contributes alike (moocore needs two).
    if rule == "hvc" and len(front) > 2 and values.shape[1] > 1:
        weights = _hvc_weights(values, mask, dirs, reference)
        return front[int(rng.choice(len(front), p=weights))]
    return front[int(rng.integers(len(front)))]


def _hvc_weights(values: np.ndarray, mask: np.ndarray, dirs: list[str],
                 reference: Sequence[float | None] | None = None) -> np.ndarray:
    """Front members' exclusive hypervolume contributions as probabilities, in the units of the
    evaluated points' ranges, so no objective's scale decides (uniform if all are zero). The
    ends of the front count through the reference: the study's where given (never inside the
    evaluated range), else ``HVC_REF`` ranges past the best value."""
    import moocore

    loss = to_loss(values, dirs)
    lo, hi = loss.min(axis=0), loss.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    norm = (loss[mask] - lo) / span
    ref = np.full(norm.shape[1], HVC_REF)
    if reference is not None and len(reference) != norm.shape[1]:
        raise ConfigError.one("sampler.options.reference", "needs one value per objective",
                              list(reference), f"give {norm.shape[1]} values (None: not known)")
    for j, value in enumerate(reference or []):
        if value is not None and np.isfinite(value):
            given = -float(value) if dirs[j] == "maximize" else float(value)
            ref[j] = max(HVC_REF, (given - lo[j]) / span[j])
    contrib = moocore.hv_contributions(norm, ref=ref)
    total = contrib.sum()
    return contrib / total if total > 0 else np.full(len(norm), 1.0 / len(norm))
