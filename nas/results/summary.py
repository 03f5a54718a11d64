"""Study-level views: the feasible Pareto front, its hypervolume and the hypervolume history."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.algorithms.pareto import (
    comparison_se,
    hypervolume,
    hypervolume_history,
    pareto_mask,
    unresolved,
)
from nas.algorithms.pareto import reference_point as _reference_point
from nas.algorithms.shrink import shrunk
from nas.search.prior_rung import is_prior, prior_looks
from nas.search.schedule import front_pool, highest_rung
from nas.study.config import StudyConfig
from nas.study.store import feasible


@dataclass
class Front:
    """The feasible Pareto-optimal trials (one per arch), and how they were scored."""

    trials: list[FrozenTrial]
    keys: list[str]
    directions: list[str]
    reference: list[float]
    hypervolume: float
    n_complete: int
    n_feasible: int
    resolved: list[bool] | None = None
    """Per front member: no other trial is, within the stored SEs, at least as good
    (``nas.algorithms.pareto.unresolved``); None when the study stored no SEs for a noisy
    objective."""
    missing_se: list[str] | None = None
    """Noisy objectives whose SEs were not stored (why ``resolved`` is None)."""
    lower: list[FrozenTrial] = field(default_factory=list)
    """Successive halving: archs that stopped below the front's rung and that no front member
    dominates; shown beside the front, marked with their rung, never counted in it."""
    n_free: int = 0
    """Archs of ``n_complete`` that stopped at a free rung 0 (``schedule.prior``): looked at,
    never trained."""
    picked_on: dict[int, list[float]] | None = None
    """``pareto.shrink: prior``: the values each trained trial (by number) was picked on, its
    noisy objectives shrunk toward their trend on the rung-0 prior; None when the front is the
    Pareto set of the measured values."""
    shrink_note: str = ""
    """Why ``pareto.shrink`` asked for shrunk values and the front was picked on measured
    ones (empty when it did not ask, or it was applied)."""


def completed(study: optuna.Study) -> list[FrozenTrial]:
    """Complete trials; with successive halving, each arch at the highest rung it reached."""
    return highest_rung([t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                         if t.values is not None])


def reference_sources(cfg: StudyConfig) -> list[str]:
    """Where each reference coordinate comes from (printed beside the hypervolume)."""
    out = []
    for o in cfg.objectives_resolved():
        if o.key in cfg.pareto.reference:
            out.append("pareto.reference")
        elif o.metric.worst is not None:
            out.append("natural worst")
        elif cfg.budget_bound(o.key, o.direction) is not None:
            out.append("budget")
        else:
            out.append("this run's worst + 10%: moves between runs, set pareto.reference")
    return out


def reference(cfg: StudyConfig, values: np.ndarray) -> list[float]:
    """The hypervolume reference point: ``pareto.reference``, else the metric's natural worst,
    else a budget's bound, else this run's nadir (the only rule that moves between runs)."""
    dirs = [o.direction for o in cfg.objectives_resolved()]
    return _reference_point(values, dirs, worst=cfg.fixed_reference()).tolist()


def front(cfg: StudyConfig, study: optuna.Study) -> Front:
    objs = cfg.objectives_resolved()
    keys, dirs = [o.key for o in objs], [o.direction for o in objs]
    done = completed(study)
    pool, below = front_pool(done)  # successive halving: top-rung results only
    ok = [t for t in pool if feasible(t)]
    values = np.array([t.values for t in ok]).reshape(len(ok), len(dirs))
    ref = reference(cfg, values)
    picked, note = picked_values(cfg, study, ok, values)
    mask = pareto_mask(picked, dirs) if len(ok) else np.zeros(0, dtype=bool)
    on_front = {t.number: row for t, row, on in zip(ok, picked.tolist(), mask, strict=True) if on}
    seen, trials = set(), []
    for t in sorted((t for t in ok if t.number in on_front), key=lambda t: on_front[t.number][0],
                    reverse=dirs[0] == "maximize"):
        # the same arch evaluated twice is one model; under another layer mapping, another
        info = t.user_attrs.get("info") or {}
        model = (t.user_attrs.get("arch", t.number), info.get("mapping"), info.get("hardware"))
        if model not in seen:
            seen.add(model)
            trials.append(t)
    hv = hypervolume(values, dirs, ref) if len(ok) else 0.0
    out = Front(trials, keys, dirs, ref, hv, len(done), len(ok),
                n_free=sum(1 for t in done if is_prior(t)), shrink_note=note,
                picked_on=None if picked is values else
                {t.number: row for t, row in zip(ok, picked.tolist(), strict=True)})
    out.lower = _undominated([t for t in below if feasible(t)], trials, dirs)
    _resolve(out, cfg, ok, values)
    return out


def picked_values(cfg: StudyConfig, study: optuna.Study, ok: list[FrozenTrial],
                  values: np.ndarray) -> tuple[np.ndarray, str]:
    """The values the front is picked on, and why they are the measured ones where
    ``pareto.shrink: prior`` asked otherwise: each noisy objective of the trained trials
    ``ok`` shrunk toward its line on the log of the arch's rung-0 prior score
    (``nas.algorithms.shrink``)."""
    if cfg.pareto.shrink != "prior":
        return values, ""
    looks = prior_looks(study)
    x = [looks[a].user_attrs["prior_score"] if (a := t.user_attrs.get("arch")) in looks else None
         for t in ok]
    if len(ok) < 3 or any(v is None for v in x):
        return values, (f"pareto.shrink: prior needs 3 trained candidates with a rung-0 score; "
                        f"{sum(v is not None for v in x)} of {len(ok)} have one")
    out, noisy = values.astype(float).copy(), set(noisy_keys(cfg))
    for j, key in enumerate(o.key for o in cfg.objectives_resolved()):
        se = [t.user_attrs.get(f"{key}_se") for t in ok]
        if key in noisy and all(v is not None for v in se):
            out[:, j] = shrunk(values[:, j], np.array(x, float), np.array(se, float))
    return out, ""


def _undominated(lower: list[FrozenTrial], members: list[FrozenTrial],
                 dirs: list[str]) -> list[FrozenTrial]:
    """The ``lower`` trials that would join a front mixing them with ``members``."""
    if not lower:
        return []
    both = np.array([t.values for t in [*members, *lower]])
    return [t for t, on in zip(lower, pareto_mask(both, dirs)[len(members):], strict=True) if on]


def noisy_keys(cfg: StudyConfig) -> list[str]:
    """Objectives measured with noise: accuracies under a stochastic (analog) hardware model,
    and accuracies scored on a finite image set (every ``acc_*``)."""
    return [o.key for o in cfg.objectives_resolved() if o.metric.uses_hw]


def standard_errors(cfg: StudyConfig, trials: list[FrozenTrial]) -> tuple[np.ndarray, list[str]]:
    """(n_trials, n_objectives) SEs that separate candidates (``comparison_se``: each trial's
    ``<key>_se`` at the t quantile of its ``<key>_repeats``, plus the study's
    ``pareto.train_noise`` for the key; 0 for exact objectives), and the noisy keys some trial
    lacks an SE for."""
    keys, noisy = [o.key for o in cfg.objectives_resolved()], set(noisy_keys(cfg))
    se = np.zeros((len(trials), len(keys)))
    missing = []
    for j, key in enumerate(keys):
        if key not in noisy:
            continue
        got = [t.user_attrs.get(f"{key}_se") for t in trials]
        if any(g is None for g in got):
            missing.append(key)
        reps = [float(t.user_attrs.get(f"{key}_repeats") or 0.0) for t in trials]
        se[:, j] = comparison_se(np.array([float(g or 0.0) for g in got]), np.array(reps),
                                 cfg.pareto.train_noise.get(key, 0.0))
    return se, missing


def _resolve(out: Front, cfg: StudyConfig, ok: list[FrozenTrial], values: np.ndarray) -> None:
    se, missing = standard_errors(cfg, ok)
    if missing:
        out.missing_se = missing
        return
    flags = unresolved(values, out.directions, se) if len(ok) else np.zeros(0, dtype=bool)
    by_number = {t.number: not f for t, f in zip(ok, flags, strict=True)}
    out.resolved = [by_number[t.number] for t in out.trials]


def history(cfg: StudyConfig, study: optuna.Study) -> tuple[np.ndarray, np.ndarray]:
    """(trial numbers, hypervolume after each) over feasible complete trials, by trial number."""
    objs = cfg.objectives_resolved()
    dirs = [o.direction for o in objs]
    ok = sorted((t for t in front_pool(completed(study))[0] if feasible(t)),
                key=lambda t: t.number)
    if not ok:
        return np.zeros(0), np.zeros(0)
    values = np.array([t.values for t in ok])
    ref = reference(cfg, values)
    return np.array([t.number for t in ok]), hypervolume_history(values, dirs, ref)
