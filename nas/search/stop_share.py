"""When training a screen's free front stops paying: the trained scores' signal share.

A screen (``schedule.looks`` with ``prior_promote: front``) trains the members of its free front
in promotion order, the ends first. Each trained accuracy is one noisy draw beside the member's
free prior. Once three are trained, ``nas.algorithms.shrink.signal_share`` says how much of
their spread about the line on log prior is more than their noise: near 0, shrinking puts every
trained score on that line, so the front is ranked as the prior ranks it and training the rest
moves no rank. ``schedule.stop_share`` ends the screen's training there.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import optuna
from optuna.trial import TrialState

from nas.algorithms.shrink import signal_share
from nas.search.prior_rung import is_prior, prior_looks

STOPPED_BY_SHARE = "stopped_by_share"  # user attr of a promotion ended by schedule.stop_share


def training_share(study: optuna.Study, keys: Sequence[str]) -> float | None:
    """The largest signal share over the objectives (``keys``, in the study's order) whose
    trained trials all carry an SE: training moves ranks while any objective's does. None
    while fewer than three trained trials have a rung-0 prior, or no objective carries an SE."""
    looks = prior_looks(study)
    trained = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
               if not is_prior(t) and t.values is not None and t.user_attrs.get("arch") in looks]
    if len(trained) < 3:
        return None
    x = np.array([looks[t.user_attrs["arch"]].user_attrs["prior_score"] for t in trained], float)
    shares = []
    for j, key in enumerate(keys):
        se = [t.user_attrs.get(f"{key}_se") for t in trained]
        if all(v is not None for v in se):
            y = np.array([t.values[j] for t in trained], float)
            shares.append(signal_share(y, x, np.array(se, float)))
    return max((s for s in shares if s is not None), default=None)


def stop_reason(share: float | None, threshold: float | None) -> str | None:
    """Why a promotion is not trained (``schedule.stop_share``), or None to train it."""
    if threshold is None or share is None or share >= threshold:
        return None
    return (f"training stopped: the trained accuracies' signal share beyond the prior is "
            f"{share:.2f}, below schedule.stop_share {threshold:g}; training more moves no rank")
