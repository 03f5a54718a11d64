"""Multi-objective successive halving and Hyperband, decided from the study's storage.

Study option (``schedule:`` in a study file)::

    schedule: {type: sh, eta: 3, min_budget: 0.25, max_budget: 2, resource: epochs}

**Rungs.** The budgets are ``max_budget / eta**k`` down to the first one not below
``min_budget`` (the top rung is exactly ``max_budget``). ``resource`` names what the budget is:
``epochs`` or ``images`` (proxy training), or ``steps`` (the supernet evaluator's fine-tuning
from inherited weights). ``nas.study.schedule.FIDELITIES`` states which budgets each evaluator can
vary; a tabular study can vary none. The options and the rungs are the config side's
(``nas.study.schedule``); this module runs them.

**Asynchronous successive halving** (ASHA, Li et al., MLSys 2020): a new candidate starts at rung
0 (with ``type: hyperband``, one bracket per starting rung, filled in Hyperband's proportions,
``nas.study.schedule.hyperband_shares``: 9:5:3 new candidates at eta 3 with 3 rungs). After
every finished trial, each rung's finished, feasible candidates (per bracket) are ranked by
``nas.algorithms.promotion`` (non-dominated rank, then crowding distance, then trial number)
and its top ``floor(n / eta)`` are promoted, each as a queued trial (``study.enqueue_trial``)
with the same parameters and the user attributes ``rung``, ``bracket``, ``parent`` and
``promotion`` = ``"<arch>@<rung>"``.

**A free rung 0** (``schedule.prior``: synflow, naswot, meco or params; ``nas.search.prior_rung``):
every new candidate is first scored without training, its trained objectives replaced by the
prior and its costs measured, and the best ``prior_share`` (default 1/eta) of rung 0 go up to the
first trained rung by the same rule. Its trials carry ``prior``; they never enter the front and
the sampler never learns from them (their values are not accuracies).

**A promotion continues its rung** (``nas.scoring.continuation``, proxy training with an
``epochs`` budget): one learning-rate schedule spans the top rung's budget, every rung below the
top saves its state (weights, optimiser, scheduler, batch order, random streams) under
``runs/<study>/rungs``, and the promoted trial trains only the extra epochs, to the weights a
straight run to its budget gives. An ``images`` budget trains another data set at each rung, and
a ``steps`` budget fine-tunes inherited supernet weights: both start each rung afresh.

**Many workers, one storage.** Every rung result is a COMPLETE trial of its own, so the storage
keeps all of them, with their ``rung`` and ``budget``. Promotions are decided from the storage
only, never from a worker's memory. Claims: Optuna hands a queued trial to exactly one worker
(an atomic WAITING -> RUNNING update of the storage). Two workers can still queue the same
promotion at the same moment; a promotion trial therefore runs only when it is the lowest-numbered
WAITING, RUNNING or COMPLETE trial of its ``promotion`` key, and any other is ended PRUNED
(``duplicate_of``) before it evaluates anything. A killed worker's promotion turns stale, is failed
and retried by the heartbeat (``nas.study.store``) with its attributes, or is queued again by the
next promotion pass; a FAIL or PRUNED trial never holds a key. Hence no promotion is lost or run
twice.

**What the sampler learns from** (``nas.search.rung_sampler``): each arch once, at the highest rung
it completed. A rung result stays in the storage when the arch goes up, but the sampler no
longer sees it, nor a promotion that has not finished (its parameters are its parent's, already
seen): a low rung's score, trained on a fraction of the budget, is not a second observation of
the same arch.

**The front** (``nas.results.summary``) holds top-rung results only (``front_pool``: the highest
rung any arch reached, which is the top rung once one did); an arch that stopped lower and is
not dominated by it is listed beside it in the report, marked with its rung.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import non_dominated_sort
from nas.algorithms.promotion import promote
from nas.scoring.evaluate import Evaluator
from nas.search.prior_rung import PriorRung, is_prior
from nas.search.stop_share import STOPPED_BY_SHARE, stop_reason, training_share
from nas.study.schedule import (
    ScheduleCfg,
    bracket_of,
    first_share,
    hyperband_shares,
    rung_budgets,
    schedule_problems,
)

if TYPE_CHECKING:
    from nas.study.config import StudyConfig

LIVE = (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)
SCREEN_DONE = "screen_done"  # user attr of the new candidate that found the screen complete


@dataclass(frozen=True)
class Record:
    """One evaluation as the promotion rule sees it (a trial of the storage, or a Ray trial)."""

    number: int
    arch: str
    params: dict[str, Any]
    rung: int
    bracket: int
    done: bool
    feasible: bool = True
    values: tuple[float, ...] = ()
    promotion: str | None = None


def promotion_key(arch: str, rung: int) -> str:
    return f"{arch}@{rung}"


@dataclass(frozen=True)
class FirstRung:
    """What goes up from a free rung 0 (``schedule.prior``): its best ``share`` (None: 1/eta),
    or with ``front`` every member of its free front (at most ``most``, in promotion order:
    extremes first, then the most isolated); none before ``looks`` looks are done."""

    share: float | None = None
    front: bool = False
    looks: int | None = None
    most: int | None = None  # at most this many of the front (``schedule.promote_max``)

    @classmethod
    def of(cls, s: ScheduleCfg) -> FirstRung | None:
        if s.prior == "none":
            return None
        return cls(first_share(s), s.prior_promote == "front", s.looks, s.promote_max)

    def k(self, values: np.ndarray, directions: Sequence[str], eta: float) -> int:
        """How many of rung 0's finished feasible candidates (``values``) go up."""
        if self.front:  # the free front: rank 0 of (prior, costs), spread by crowding if capped
            n = int(np.sum(non_dominated_sort(values, directions) == 0)) if len(values) else 0
            return min(n, self.most) if self.most is not None else n
        share = len(values) * (self.share if self.share is not None else 1 / eta)
        return int(math.floor(share + 1e-9))


def pending(records: Sequence[Record], directions: Sequence[str], eta: float,
            top: int, first: FirstRung | None = None) -> list[tuple[Record, int]]:
    """Promotions due now: (finished record, rung it goes to), highest rung first.

    Per (bracket, rung) below ``top``: the first finished feasible record of each arch, ranked
    by ``nas.algorithms.promotion``; its best ``floor(n / eta)`` go up unless their key is already
    held. ``first``: the rule of a free rung 0 instead (``schedule.prior``: its share, its whole
    free front, and the looks it waits for).
    """
    held = {r.promotion for r in records if r.promotion}
    groups: dict[tuple[int, int], dict[str, Record]] = {}
    for r in sorted(records, key=lambda r: r.number):
        if r.done and r.feasible and r.rung < top:
            groups.setdefault((r.bracket, r.rung), {}).setdefault(r.arch, r)
    looked = sum(r.done and r.rung == 0 for r in records)  # infeasible looks count too
    out = []
    for (_, rung), by_arch in sorted(groups.items(), key=lambda kv: -kv[0][1]):
        cands = list(by_arch.values())
        values = np.array([c.values for c in cands])
        if rung == 0 and first is not None:
            if first.looks is not None and looked < first.looks:
                continue  # the screen is not done: its free front is not known yet
            k = first.k(values, directions, eta)
        else:
            k = int(math.floor(len(cands) / eta + 1e-9))
        best = promote(values, directions, k)
        out += [(cands[i], rung + 1) for i in best
                if promotion_key(cands[i].arch, rung + 1) not in held]
    return out


class SuccessiveHalving:
    """The schedule of one study for the Optuna driver: placement, claims and promotions."""

    def __init__(self, s: ScheduleCfg, directions: Sequence[str],
                 prior: Callable[[optuna.Trial], Any] | None = None,
                 keys: Sequence[str] = ()):
        """``prior``: the rung-0 objective when ``s.prior`` is set (``PriorRung``); ``keys``:
        the objectives' keys, in order (``s.stop_share`` reads their SEs)."""
        self.cfg, self.directions, self.prior, self.keys = s, list(directions), prior, list(keys)
        self.budgets = rung_budgets(s)
        self.top = len(self.budgets) - 1
        self.brackets = len(self.budgets) if s.type == "hyperband" else 1
        self.shares = hyperband_shares(self.brackets, s.eta) if self.brackets > 1 else [1]

    # -- one trial --------------------------------------------------------------------------
    def place(self, trial: optuna.Trial) -> tuple[int, float]:
        """(rung, budget) of a trial: a promotion's rung, or a new candidate's bracket start."""
        attrs = trial.user_attrs
        if "rung" not in attrs:
            bracket = bracket_of(trial.number, self.shares)
            trial.set_user_attr("rung", bracket)
            trial.set_user_attr("bracket", bracket)
        rung = int(trial.user_attrs["rung"])
        trial.set_user_attr("budget", self.budgets[rung])
        return rung, self.budgets[rung]

    def claim(self, trial: optuna.Trial) -> bool:
        """True unless ``trial`` repeats a promotion held by a lower-numbered live trial."""
        key = trial.user_attrs.get("promotion")
        if key is None:
            return True
        holders = [t.number for t in trial.study.get_trials(deepcopy=False, states=LIVE)
                   if t.user_attrs.get("promotion") == key]
        first = min(holders, default=trial.number)
        if first != trial.number:
            trial.set_user_attr("duplicate_of", first)
        return first == trial.number

    def wrap(self, objective: Callable[..., Any]) -> Callable[[optuna.Trial], Any]:
        """``objective(trial, budget=...)`` run at the trial's rung; duplicates end PRUNED."""

        def scheduled(trial: optuna.Trial) -> Any:
            if not self.claim(trial):
                raise optuna.TrialPruned(f"promotion held by trial "
                                         f"{trial.user_attrs['duplicate_of']}")
            if self.screened(trial):
                why = f"screen done: its {self.cfg.looks} looks were taken (schedule.looks)"
                trial.set_user_attr(SCREEN_DONE, why)
                trial.set_user_attr("fail_reason", why)
                raise optuna.TrialPruned(why)
            why = self.stopped(trial)
            if why is not None:
                trial.set_user_attr(STOPPED_BY_SHARE, why)
                trial.set_user_attr("fail_reason", why)
                raise optuna.TrialPruned(why)
            rung, budget = self.place(trial)
            if rung == 0 and self.prior is not None:  # the free rung: no training
                return self.prior(trial)
            return objective(trial, budget=budget)

        return scheduled

    def stopped(self, trial: optuna.Trial) -> str | None:
        """Why a promotion of the screen is not trained (``schedule.stop_share``), or None."""
        if self.cfg.stop_share is None or "promotion" not in trial.user_attrs:
            return None
        return stop_reason(training_share(trial.study, self.keys), self.cfg.stop_share)

    def screened(self, trial: optuna.Trial) -> bool:
        """Whether ``trial`` is a new candidate after the screen's last look (``looks``): the
        study then trains what the screen promoted, and samples nothing more."""
        if self.cfg.looks is None or self.prior is None or "rung" in trial.user_attrs:
            return False
        taken = [t for t in trial.study.get_trials(
            deepcopy=False, states=(TrialState.RUNNING, TrialState.COMPLETE))
            if t.number != trial.number and t.user_attrs.get("rung") == 0]
        return len(taken) >= self.cfg.looks

    # -- the study ----------------------------------------------------------------------------
    def records(self, study: optuna.Study) -> list[Record]:
        return [_record(t) for t in study.get_trials(deepcopy=False, states=LIVE)
                if "rung" in t.user_attrs or t.state == TrialState.WAITING]

    def promote(self, study: optuna.Study, trial: FrozenTrial | None = None) -> int:
        """Queue every promotion due now (an Optuna callback); returns how many."""
        due = pending(self.records(study), self.directions, self.cfg.eta, self.top,
                      FirstRung.of(self.cfg))
        # a promotion that schedule.stop_share ended is decided, unlike a failed one: not again
        ended = {t.user_attrs.get("promotion") for t in study.get_trials(
            deepcopy=False, states=(TrialState.PRUNED,)) if STOPPED_BY_SHARE in t.user_attrs}
        due = [(rec, rung) for rec, rung in due if promotion_key(rec.arch, rung) not in ended]
        for rec, rung in due:
            study.enqueue_trial(rec.params, user_attrs={
                "rung": rung, "bracket": rec.bracket, "parent": rec.number,
                "promotion": promotion_key(rec.arch, rung)})
        return len(due)

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.promote(study, trial)
        if SCREEN_DONE in trial.user_attrs:  # nothing queued: the screen's promotions are done
            study.stop()


def _record(t: FrozenTrial) -> Record:
    a = t.user_attrs
    return Record(number=t.number, arch=str(a.get("arch", t.params)), params=dict(t.params),
                  rung=int(a.get("rung", -1)), bracket=int(a.get("bracket", 0)),
                  done=t.state == TrialState.COMPLETE and t.values is not None,
                  feasible=all(v <= 0 for v in t.constraints.values()),
                  values=tuple(t.values or ()), promotion=a.get("promotion"))


def highest_rung(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """Per arch, only its trials at the highest rung it reached (unscheduled trials all kept)."""
    top: dict[str, int] = {}
    for t in trials:
        if "rung" in t.user_attrs:
            arch = t.user_attrs.get("arch", "")
            top[arch] = max(top.get(arch, -1), int(t.user_attrs["rung"]))
    return [t for t in trials if "rung" not in t.user_attrs
            or int(t.user_attrs["rung"]) == top[t.user_attrs.get("arch", "")]]


def front_pool(trials: Sequence[FrozenTrial]) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
    """(``trials`` a front is made of, the others) after ``highest_rung``: the trials at the
    highest rung any arch reached (the top rung once one did) and every unscheduled trial;
    the others stopped at a lower rung, trained on less of the budget and scored mid-schedule,
    so they are not comparable with full-budget results. A rung-0 prior result (``is_prior``)
    is in neither list: its values are a free score, not an accuracy."""
    trials = [t for t in trials if not is_prior(t)]
    rungs = [int(t.user_attrs["rung"]) for t in trials if "rung" in t.user_attrs]
    top = max(rungs, default=-1)
    pool = [t for t in trials if int(t.user_attrs.get("rung", top)) == top]
    return pool, [t for t in trials if int(t.user_attrs.get("rung", top)) != top]


def latest_rungs(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """``trials`` as a sampler should learn from them: each arch's COMPLETE trials at the
    highest rung it completed, no unfinished promotion, every unscheduled trial. A rung-0
    prior result is left out: its values are a free score, on another scale than a trained one."""
    trials = [t for t in trials if not (is_prior(t) and t.state == TrialState.COMPLETE)]
    top: dict[str, int] = {}
    for t in trials:
        if "rung" in t.user_attrs and t.state == TrialState.COMPLETE:
            arch = str(t.user_attrs.get("arch", ""))
            top[arch] = max(top.get(arch, -1), int(t.user_attrs["rung"]))
    out = []
    for t in trials:
        if "rung" not in t.user_attrs:
            out.append(t)
        elif t.state == TrialState.COMPLETE:
            if int(t.user_attrs["rung"]) == top[str(t.user_attrs.get("arch", ""))]:
                out.append(t)
        elif "promotion" not in t.user_attrs:  # a new candidate, running or queued
            out.append(t)
    return out


def budget_of(sh: SuccessiveHalving | None, config: dict[str, Any]) -> float | None:
    """The budget a Ray trial trains at (None: no schedule, the full budget)."""
    return None if sh is None or "rung" not in config else sh.budgets[int(config["rung"])]


def make(cfg: StudyConfig, evaluator: Evaluator | None = None) -> SuccessiveHalving | None:
    """The study's schedule, or None; a broken schedule is a ConfigError here too.
    ``evaluator``: the driver's ``Evaluator``, which a free rung 0 scores with (its data set
    is then loaded once)."""
    if cfg.schedule.type == "none":
        return None
    problems = schedule_problems(cfg)
    if problems:
        raise ConfigError(problems)
    prior = PriorRung(cfg, evaluator) if cfg.schedule.prior != "none" else None
    objectives = cfg.objectives_resolved()
    return SuccessiveHalving(cfg.schedule, [o.direction for o in objectives], prior,
                             [o.key for o in objectives])
