"""Budgets known before training, as a cheap test on a proposal: is it clearly over?

A study's budget on a cost metric (latency, params, MACs, energy) is checked after the cost
measurement, so an over-budget proposal still costs a build and a timing, and a sampler that
keeps proposing large nets spends its trials on them (the quickstart: 6 of 10). ``BudgetFilter``
judges a proposal before any of that, from what costs nothing:

* the arch's **exact static costs** at the study's input shape (``static(arch)``: params, MACs,
  built on the meta device), for a budget on one of them;
* the **cost cache's stored value** (``cached(arch)``) when the arch was measured before, so a
  candidate near the budget is judged the same way on every rerun;
* else a **log-linear fit** of the metric on log MACs and log params over the study's own
  measured trials (their ``user_attrs``), for latency or energy.

"Clearly over" means above the budget by more than the fit's own error (``margin`` at least, and
twice the residual spread of the fit), so the filter only removes proposals it is sure about;
the evaluator's measured check stays the judge, and trials that end over budget are stored so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from optuna.study import Study
from optuna.trial import TrialState

from hwnas.common.errors import ConfigError

STATIC_KEYS = ("params", "macs")
MIN_FIT = 2  # measured trials before the fit is trusted (one gives the scale, two a slope)


@dataclass(frozen=True)
class Limit:
    """One budget: ``min <= metric <= max`` (either side may be open)."""

    key: str
    max: float | None = None
    min: float | None = None

    def __post_init__(self) -> None:
        if self.max is None and self.min is None:
            raise ConfigError.one(f"budget on {self.key}", "needs a max or a min", "neither",
                                  "give max (e.g. 5.0) or min, or drop the budget")


class BudgetFilter:
    """``over(study, arch)``: whether ``arch`` is clearly outside a budget (see module doc).

    Args:
        limits: the budgets on cost metrics known before training.
        static: exact ``{"params", "macs"}`` of an arch at the study's input shape.
        cached: the stored cost dict of an arch in the study's setting, or None.
        margin: the least relative distance past a budget that counts as clearly over.
    """

    def __init__(self, limits: Sequence[Limit], static: Callable[[str], dict[str, float]],
                 cached: Callable[[str], dict | None] | None = None, margin: float = 0.15):
        self.limits, self.static, self.cached = list(limits), static, cached
        self.margin = margin
        self.checked = self.rejected = 0

    def over(self, study: Study, arch: str) -> bool:
        self.checked += 1
        feats = self.static(arch)
        stored = self.cached(arch) if self.cached else None
        for limit in self.limits:
            value, slack = self._predict(study, limit.key, feats, stored)
            if value is not None and _outside(value, limit, slack):
                self.rejected += 1
                return True
        return False

    def _predict(self, study: Study, key: str, feats: dict[str, float],
                 stored: dict | None) -> tuple[float | None, float]:
        """(predicted value, relative slack) of metric ``key``; None when nothing is known."""
        if stored is not None and isinstance(stored.get(key), int | float):
            return float(stored[key]), 0.0  # the stored median decides, as on every rerun
        if key in STATIC_KEYS and key in feats:
            return float(feats[key]), 0.0
        fit = _fit(study, key)
        if fit is None:
            return None, 0.0
        coef, spread = fit
        x = np.array([1.0, *_logs(feats)])
        return float(math.exp(x @ coef)), max(self.margin, 2.0 * spread)


def _outside(value: float, limit: Limit, slack: float) -> bool:
    hi = limit.max is not None and value > limit.max * (1.0 + slack)
    lo = limit.min is not None and value < limit.min * (1.0 - slack)
    return bool(hi or lo)


def _logs(feats: dict[str, float]) -> list[float]:
    return [math.log(max(feats.get(k, 1.0), 1.0)) for k in STATIC_KEYS]


def _fit(study: Study, key: str) -> tuple[np.ndarray, float] | None:
    """Least-squares log(key) ~ 1 + log MACs + log params over measured trials, and the
    residual spread (exp-scale relative error); None below ``MIN_FIT`` trials."""
    rows = [t.user_attrs for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if _usable(t.user_attrs, key)]
    if len(rows) < MIN_FIT:
        return None
    x = np.array([[1.0, *_logs(r)] for r in rows])
    y = np.log([float(r[key]) for r in rows])
    if len(rows) < 4:  # too few for three coefficients: latency scales with MACs
        scale = float(np.mean(y - x[:, 1]))
        coef = np.array([scale, 1.0, 0.0])
    else:  # a light ridge keeps the slopes sane on a handful of trials
        lam = np.diag([0.0, 1e-3, 1e-3])
        coef = np.linalg.solve(x.T @ x + lam, x.T @ y)
    resid = y - x @ coef
    spread = float(np.sqrt(np.mean(resid**2))) if len(rows) > 2 else 0.25
    return coef, math.expm1(spread)


def _usable(attrs: dict, key: str) -> bool:
    return all(isinstance(attrs.get(k), int | float) and attrs[k] > 0 for k in (key, *STATIC_KEYS))
