"""What training changed: the study's front against the free front its rung 0 saw.

A study with a free rung 0 (``schedule.prior``) looks at candidates without training and trains
some of them. The free front is the Pareto set of the feasible looks on (prior, costs): what the
study would have returned without training a single candidate. Beside the trained front it says
which free-front members training kept, which it dropped (dominated once trained), which it
never trained, and which trained members joined from off the free front.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState

from nas.algorithms.pareto import pareto_mask
from nas.search.prior_rung import is_prior
from nas.study.config import StudyConfig
from nas.study.store import feasible


@dataclass
class FrontChange:
    """Archs of the free front and of the trained front, sorted into what training did."""

    free: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    untrained: list[str] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    n_looks: int = 0


def free_front(cfg: StudyConfig, study: optuna.Study) -> tuple[list[str], int]:
    """(archs of the free front, number of looks): the Pareto set of the feasible rung-0
    results on their stored values (the prior in place of each trained objective, the costs)."""
    looks = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
             if is_prior(t) and t.values is not None]
    ok = [t for t in looks if feasible(t)]
    if not ok:
        return [], len(looks)
    dirs = [o.direction for o in cfg.objectives_resolved()]
    mask = pareto_mask(np.array([t.values for t in ok]), dirs)
    return [t.user_attrs["arch"] for t, on in zip(ok, mask, strict=True) if on], len(looks)


def front_change(cfg: StudyConfig, study: optuna.Study,
                 front: list[FrozenTrial]) -> FrontChange | None:
    """How the trained ``front`` differs from the free front (None: the study had no rung 0)."""
    free, n_looks = free_front(cfg, study)
    if not n_looks:
        return None
    trained = {t.user_attrs.get("arch") for t in study.get_trials(
        deepcopy=False, states=(TrialState.COMPLETE,)) if not is_prior(t)}
    on = [t.user_attrs.get("arch") for t in front]
    return FrontChange(free=free, kept=[a for a in free if a in on],
                       dropped=[a for a in free if a in trained and a not in on],
                       untrained=[a for a in free if a not in trained],
                       added=[a for a in on if a not in free], n_looks=n_looks)
