"""The hypervolume training bought: the trained front's, with its SE, beside the free front's.

A screen's free front has no accuracies, so its hypervolume cannot be read off; it can be
predicted. The trained members' accuracies, fitted on the log of their rung-0 prior, give each
free-front member the accuracy that line predicts for it; with the costs its look measured,
that is the front the study would have promised without training the rest. Beside it stands
the hypervolume of every feasible trained candidate on its measured values. Both carry an SE:
the SD over draws of each trained accuracy within its stored SE (the prediction refitted on
every draw), the noise a rerun of the scoring would bring.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from nas.algorithms.pareto import hypervolume
from nas.algorithms.shrink import line, log_predictor
from nas.search.prior_rung import prior_looks
from nas.study.config import StudyConfig
from nas.study.store import feasible

DRAWS = 200


@dataclass(frozen=True)
class HvChange:
    """Hypervolume of the trained front and of the free front as predicted, each with its SE."""

    trained: float
    trained_se: float
    predicted: float
    predicted_se: float
    n_trained: int
    n_free: int
    draws: int


def hv_change(cfg: StudyConfig, study: optuna.Study, trained: list[FrozenTrial],
              free: list[str], reference: list[float],
              draws: int = DRAWS, seed: int = 0) -> HvChange | None:
    """``trained``: the feasible trained candidates the front is made of; ``free``: the free
    front's archs. None when fewer than three trained candidates have a rung-0 prior or a
    trained objective has no stored SE (nothing to fit, or no noise to draw)."""
    objs = cfg.objectives_resolved()
    dirs, train_cols = [o.direction for o in objs], [
        j for j, o in enumerate(objs) if o.metric.stage == "train"]
    looks = prior_looks(study)
    ok = [t for t in trained if feasible(t) and t.user_attrs.get("arch") in looks]
    se_cols = [[t.user_attrs.get(f"{objs[j].key}_se") for t in ok] for j in train_cols]
    if len(ok) < 3 or not free or any(v is None for col in se_cols for v in col):
        return None
    values = np.array([t.values for t in ok], float)
    se = np.zeros_like(values)
    se[:, train_cols] = np.array(se_cols, float).T
    p_trained = _prior(ok, looks)
    members = [looks[a] for a in free if a in looks]
    x_free = log_predictor(_prior(members, looks))
    base = np.array([t.values for t in members], float)

    def predicted(v: np.ndarray) -> np.ndarray:
        out = base.copy()  # the looks' measured costs; each trained objective predicted
        for j in train_cols:
            slope, icept = line(v[:, j], p_trained)
            out[:, j] = slope * x_free + icept
        return out

    rng = np.random.default_rng(seed)
    noisy = [values + rng.normal(0.0, 1.0, values.shape) * se for _ in range(draws)]
    return HvChange(
        trained=hypervolume(values, dirs, reference),
        trained_se=float(np.std([hypervolume(v, dirs, reference) for v in noisy], ddof=1)),
        predicted=hypervolume(predicted(values), dirs, reference),
        predicted_se=float(np.std([hypervolume(predicted(v), dirs, reference) for v in noisy],
                                  ddof=1)),
        n_trained=len(ok), n_free=len(members), draws=draws)


def _prior(trials: list[FrozenTrial], looks: dict[str, FrozenTrial]) -> np.ndarray:
    """Each trial's arch's rung-0 prior score."""
    return np.array([looks[t.user_attrs["arch"]].user_attrs["prior_score"] for t in trials],
                    float)
