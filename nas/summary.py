"""Study-level views: the feasible Pareto front, its hypervolume and the hypervolume history."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.config import StudyConfig
from nas.pareto import explicit_reference, hypervolume, hypervolume_history, pareto_mask
from nas.pareto import reference_point as _reference_point
from nas.store import feasible


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


def completed(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if t.values is not None]


def _budget_bound(cfg: StudyConfig, key: str, direction: str) -> float | None:
    """A budget on the objective's metric bounds the front: the natural fixed reference."""
    for b in cfg.budgets():
        if b.key == key:
            bound = b.max if direction == "minimize" else b.min
            if bound is not None:
                return bound
    return None


def reference_sources(cfg: StudyConfig) -> list[str]:
    """Where each reference coordinate comes from (printed beside the hypervolume)."""
    out = []
    for o in cfg.objectives_resolved():
        if o.key in cfg.pareto.reference:
            out.append("pareto.reference")
        elif o.metric.worst is not None:
            out.append("natural worst")
        elif _budget_bound(cfg, o.key, o.direction) is not None:
            out.append("budget")
        else:
            out.append("this run's worst + 10%: moves between runs, set pareto.reference")
    return out


def reference(cfg: StudyConfig, values: np.ndarray) -> list[float]:
    """The hypervolume reference point: ``pareto.reference``, else the metric's natural worst,
    else a budget's bound, else this run's nadir (the only rule that moves between runs)."""
    objs = cfg.objectives_resolved()
    dirs = [o.direction for o in objs]
    given = explicit_reference([o.key for o in objs], cfg.pareto.reference)
    worst = [o.metric.worst if o.metric.worst is not None
             else _budget_bound(cfg, o.key, o.direction) for o in objs]
    return _reference_point(values, dirs, worst=worst, explicit=given).tolist()


def front(cfg: StudyConfig, study: optuna.Study) -> Front:
    objs = cfg.objectives_resolved()
    keys, dirs = [o.key for o in objs], [o.direction for o in objs]
    done = completed(study)
    ok = [t for t in done if feasible(t)]
    values = np.array([t.values for t in ok]).reshape(len(ok), len(dirs))
    ref = reference(cfg, values)
    mask = pareto_mask(values, dirs) if len(ok) else np.zeros(0, dtype=bool)
    seen, trials = set(), []
    for t in sorted((t for t, on in zip(ok, mask, strict=True) if on), key=lambda t: t.values[0],
                    reverse=dirs[0] == "maximize"):
        arch = t.user_attrs.get("arch", t.number)
        if arch not in seen:  # the same arch evaluated twice is one model
            seen.add(arch)
            trials.append(t)
    hv = hypervolume(values, dirs, ref) if len(ok) else 0.0
    return Front(trials, keys, dirs, ref, hv, len(done), len(ok))


def history(cfg: StudyConfig, study: optuna.Study) -> tuple[np.ndarray, np.ndarray]:
    """(trial numbers, hypervolume after each) over feasible complete trials, by trial number."""
    objs = cfg.objectives_resolved()
    dirs = [o.direction for o in objs]
    ok = sorted((t for t in completed(study) if feasible(t)), key=lambda t: t.number)
    if not ok:
        return np.zeros(0), np.zeros(0)
    values = np.array([t.values for t in ok])
    ref = reference(cfg, values)
    return np.array([t.number for t in ok]), hypervolume_history(values, dirs, ref)
