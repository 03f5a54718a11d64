"""A study's ``schedule:`` section as data: its options, its rungs, what each evaluator varies.

Validating a study file needs to know which budgets its evaluator can train at a smaller size
(``FIDELITIES``); that is a fact about the evaluators, kept here as a table so the config side never
imports the scoring code. ``nas.search.schedule`` runs the schedule from these options, and
``nas.scoring.evaluate.budgeted`` turns a rung's budget into data and a training config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from hwnas.common.errors import Problem

if TYPE_CHECKING:
    from nas.study.config import StudyConfig

FIDELITIES: dict[str, tuple[str, ...]] = {
    "train": ("epochs", "images"),  # proxy training: fewer epochs, or the first training images
    "supernet": ("steps",),  # fine-tuning steps from the inherited weights
    "tabular": (),  # metrics are looked up: nothing to train at a smaller budget
}
"""Which budgets (``schedule.resource``) each evaluator can vary, by evaluator kind."""


def evaluator_kind(cfg: StudyConfig) -> str:
    """``tabular`` when the study looks metrics up, else its ``evaluator`` (train, supernet)."""
    return "tabular" if cfg.tabular else cfg.evaluator


def fidelities(cfg: StudyConfig) -> tuple[str, ...]:
    """The budgets the study's evaluator can vary (``FIDELITIES`` of its kind)."""
    return FIDELITIES[evaluator_kind(cfg)]


class ScheduleCfg(BaseModel):
    """How trials share the evaluation budget (``type: none`` = every trial at full budget)."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["none", "sh", "hyperband"] = Field(
        "none", description="none, sh (asynchronous successive halving) or hyperband")
    eta: float = Field(3.0, description="promotion factor: the best 1/eta of a rung move up (> 1)")
    min_budget: float | None = Field(None, description="budget of the lowest rung, in units of "
                                     "resource")
    max_budget: float | None = Field(None, description="budget of the top rung (the study's full "
                                     "budget)")
    resource: Literal["epochs", "images", "steps"] = Field(
        "epochs", description="what a budget varies: epochs, images or steps")
    rung_se: Literal["sqrt", "fixed"] = Field("sqrt", description=(
        "analog precision below the top rung: sqrt relaxes hw_eval.target_se by "
        "sqrt(max_budget / budget), at most to 5 points (RUNG_SE_CAP), and shrinks max_repeats "
        "alike; fixed scores every rung to the study's target"))
    prior: Literal["none", "synflow", "naswot", "params", "meco"] = Field("none", description=(
        "a free rung 0 below the trained rungs (type sh): every new candidate is scored without "
        "training (synflow, naswot or meco at its seeded initialisation, or log parameter count; "
        "on AnalogNAS-Bench's held-out half meco ranks 30-day HWA accuracy at Kendall tau 0.56 "
        "against 0.44 for params, BENCHMARKS.md analognas_proxies) in "
        "place of its trained objectives, beside its measured costs; its best share goes up to "
        "the first trained rung"))
    prior_share: float | None = Field(None, description=(
        "share of rung 0 promoted to the first trained rung, in (0, 1] (default 1/eta); a "
        "free rung can afford a harder cut"))
    prior_promote: Literal["share", "front"] = Field("share", description=(
        "which rung-0 candidates go up: share (the best prior_share by non-dominated rank, then "
        "crowding) or front (every member of rung 0's free front on (prior, costs), and only "
        "those: training is spent on the candidates that can be on the front)"))
    promote_max: int | None = Field(None, description=(
        "with prior_promote: front, at most this many of the free front go up, spread along "
        "it (its extremes first, then by crowding distance): a dense front of a size-like prior "
        "would otherwise train nearly every look"))
    looks: int | None = Field(None, description=(
        "with a prior: how many new candidates rung 0 looks at (the screen). Rung-0 "
        "promotions wait until every look is done, so the free front is that of all of them; "
        "no candidate is sampled after them, and the worker ends once their promotions are "
        "done (n_trials and timeout still bound the run)"))
    stop_share: float | None = Field(None, description=(
        "with prior_promote: front and looks: stop training the screen's promotions once 3 or "
        "more are trained and the trained accuracies' signal share beyond the prior "
        "(nas.algorithms.shrink.signal_share: the share of their spread about the line on "
        "log prior that is not noise) is below this, in (0, 1): training then no longer moves "
        "ranks, and the promotions left are ended PRUNED (stopped_by_share) and reported as "
        "not trained"))


RUNG_SE_CAP = 0.05
"""A lower rung is never scored looser than 5 points of SE (about 200 images)."""


@dataclass(frozen=True)
class RungPrecision:
    """How precisely a rung's analog accuracies are scored (``hw_eval`` at the top rung)."""

    target_se: float | None
    max_repeats: int


def rung_precision(cfg: StudyConfig, budget: float | None) -> RungPrecision:
    """The analog precision at a rung of ``budget`` (None: the full budget).

    A short proxy training ranks candidates with more noise than a long one: between two seeds,
    one epoch on 5,000 Fashion-MNIST images moves a score by 4-5 points, three epochs by 1.6
    (BENCHMARKS.md, fidelity). Scoring a low rung to the top rung's SE buys precision its
    training cannot use, at the top rung's cost. With ``rung_se: sqrt`` the target grows as
    sqrt(max_budget / budget), capped at ``RUNG_SE_CAP``, and the cap on programmings shrinks
    by the same factor (at least ``hw_eval.repeats``). One rung, whose candidates promotion
    compares, has one precision."""
    he, s = cfg.hw_eval, cfg.schedule
    top = RungPrecision(he.target_se, he.max_repeats)
    if (he.target_se is None or budget is None or s.type == "none" or s.rung_se == "fixed"
            or s.max_budget is None or budget >= s.max_budget):
        return top
    target = max(he.target_se, min(he.target_se * math.sqrt(s.max_budget / budget),
                                   RUNG_SE_CAP))
    repeats = max(he.repeats, round(he.max_repeats * he.target_se / target))
    return RungPrecision(target, min(repeats, he.max_repeats))


def schedule_problems(cfg: StudyConfig) -> list[Problem]:
    """Every broken schedule rule of a validated study config (empty when none)."""
    s: ScheduleCfg = cfg.schedule
    if s.type == "none":
        unused = (s.prior_share is None and s.prior_promote == "share" and s.looks is None
                  and s.promote_max is None and s.stop_share is None)
        return [] if s.prior == "none" and unused else [Problem(
            "schedule.prior", "is rung 0 of successive halving, and schedule.type is none",
            s.prior, "set schedule.type: sh with min_budget and max_budget (equal for one "
            "trained rung above the prior)")]
    out = []
    if not s.eta > 1:
        out.append(Problem("schedule.eta", "must be > 1 (a rung keeps 1/eta of the one below)",
                           s.eta, "use e.g. eta: 3"))
    lo, hi = s.min_budget, s.max_budget
    if lo is None or hi is None or not lo > 0:
        out.append(Problem("schedule.min_budget/max_budget", "both must be given and > 0",
                           (lo, hi), f"give the smallest and the full {s.resource} budget"))
    elif lo > hi:
        out.append(Problem("schedule.min_budget", "must be <= schedule.max_budget", (lo, hi),
                           "swap them, or lower min_budget"))
    can = fidelities(cfg)
    if s.resource not in can:
        out.append(Problem("schedule.resource", "must be a budget the study's evaluator can vary "
                           f"(this one can vary {list(can) or 'none: its metrics are fixed'})",
                           s.resource, "use one of those, or drop `schedule` (tabular studies "
                           "look metrics up and cannot train at a smaller budget)"))
    return out + prior_problems(cfg)


def prior_problems(cfg: StudyConfig) -> list[Problem]:
    """Broken rules of ``schedule.prior`` and ``prior_share`` (a study with a schedule)."""
    s: ScheduleCfg = cfg.schedule
    out = []
    if s.prior == "none":
        for key, value, unset in (("prior_share", s.prior_share, None),
                                  ("prior_promote", s.prior_promote, "share"),
                                  ("looks", s.looks, None),
                                  ("promote_max", s.promote_max, None),
                                  ("stop_share", s.stop_share, None)):
            if value != unset:
                out.append(Problem(f"schedule.{key}", "needs schedule.prior (it rules the free "
                                   "rung 0)", value, "set schedule.prior: synflow, naswot or "
                                   f"params, or drop {key}"))
        return out
    why = {"hyperband": "a prior is rung 0 of one successive-halving ladder; Hyperband's "
                        "brackets share their budget by rung cost, and a free rung has none",
           "tabular": "a prior scores a model at its initialisation; a tabular study looks "
                      "metrics up and builds none",
           "supernet": "a supernet candidate is already scored without training (inherited "
                       "weights); a free rung below it ranks another model and saves nothing",
           "ray": "the free rung runs inside the Optuna driver's trials"}
    fix = {"hyperband": "use schedule.type: sh", "tabular": "drop schedule.prior",
           "supernet": "use evaluator: train, or drop schedule.prior",
           "ray": "use backend: optuna (workers: N for parallel trials), or drop schedule.prior"}
    broken = [k for k, bad in (("hyperband", s.type == "hyperband"),
                               ("tabular", evaluator_kind(cfg) == "tabular"),
                               ("supernet", evaluator_kind(cfg) == "supernet"),
                               ("ray", cfg.backend == "ray")) if bad]
    out += [Problem("schedule.prior", f"cannot be used here: {why[k]}", s.prior, fix[k])
            for k in broken]
    if not any(o.metric.stage == "train" for o in cfg.objectives_resolved()):
        out.append(Problem("schedule.prior", "takes the place of the trained objectives at "
                           "rung 0, and this study has none (only cost objectives)", s.prior,
                           "add an accuracy objective, or drop schedule.prior"))
    if s.prior_share is not None and not 0 < s.prior_share <= 1:
        out.append(Problem("schedule.prior_share", "must lie in (0, 1] (a share of rung 0)",
                           s.prior_share, "use e.g. 0.1, or drop it for 1/eta"))
    return out + screen_problems(cfg)


def screen_problems(cfg: StudyConfig) -> list[Problem]:
    """Broken rules of ``schedule.prior_promote`` and ``looks`` (a study with a prior)."""
    s: ScheduleCfg = cfg.schedule
    out = []
    if s.prior_promote == "front" and s.prior_share is not None:
        out.append(Problem("schedule.prior_share", "is the share promoted by prior_promote: "
                           "share; prior_promote: front promotes the free front instead",
                           s.prior_share, "drop prior_share, or set prior_promote: share"))
    if s.promote_max is not None and (s.prior_promote != "front" or s.promote_max < 1):
        out.append(Problem("schedule.promote_max", "caps the free front that goes up: it needs "
                           "prior_promote: front and must be >= 1", s.promote_max,
                           "set prior_promote: front and e.g. promote_max: 4, or drop it"))
    if s.stop_share is not None and (not 0 < s.stop_share < 1 or s.prior_promote != "front"
                                     or s.looks is None):
        out.append(Problem("schedule.stop_share", "stops training a screen's free front: it "
                           "needs prior_promote: front and looks, and must lie in (0, 1)",
                           s.stop_share, "use e.g. stop_share: 0.25 with prior_promote: front "
                           "and looks: 40, or drop it"))
    if s.looks is not None and not 0 < s.looks < cfg.n_trials:
        out.append(Problem("schedule.looks", "must lie in [1, n_trials) (the looks leave "
                           "n_trials room for the trained candidates)", s.looks,
                           f"use e.g. looks: {max(1, cfg.n_trials * 2 // 3)}, or raise "
                           "n_trials"))
    return out


def rung_budgets(s: ScheduleCfg) -> list[float]:
    """Budgets from the lowest rung to the top one (``max_budget``); with a ``prior``, rung 0
    is the free rung, budget 0 (no training), below the trained rungs."""
    assert s.min_budget is not None and s.max_budget is not None
    n = int(math.floor(math.log(s.max_budget / s.min_budget) / math.log(s.eta) + 1e-9))
    budgets = [s.max_budget / s.eta ** (n - k) for k in range(n + 1)]
    budgets = [float(round(b)) for b in budgets] if s.resource != "epochs" else budgets
    return [0.0, *budgets] if s.prior != "none" else budgets


def first_share(s: ScheduleCfg) -> float | None:
    """The share of rung 0 promoted when it is not 1/eta (``prior_share``), else None."""
    return s.prior_share if s.prior != "none" else None


def hyperband_shares(n_rungs: int, eta: float) -> list[int]:
    """New candidates per bracket in one Hyperband round (Li et al., JMLR 2018), indexed by the
    bracket's starting rung: bracket ``b`` halves ``s = n_rungs - 1 - b`` times and starts
    ``ceil((s_max + 1) / (s + 1) * eta**s)`` candidates, so every bracket spends about the same
    budget (9:5:3 at eta 3 with 3 rungs; equal counts would let the bracket that never halves
    spend about half of all compute)."""
    s_max = n_rungs - 1
    return [math.ceil((s_max + 1) / (s_max - b + 1) * eta ** (s_max - b)) for b in range(n_rungs)]


def bracket_of(candidate: int, shares: list[int]) -> int:
    """The bracket (starting rung) of the ``candidate``-th new candidate: rounds of
    ``sum(shares)`` candidates, each bracket taking its share in turn."""
    pos = candidate % sum(shares)
    for bracket, n in enumerate(shares):
        if pos < n:
            return bracket
        pos -= n
    raise AssertionError("unreachable: pos < sum(shares)")
