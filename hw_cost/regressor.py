"""A learned latency regressor on architecture features, trained from cached measurements.

Inputs: the space's own ``features(arch)`` plus static costs (MACs, params, activation and model
bytes, log-scaled). Target: log latency, so the fit minimises relative error, which is what
"within +-10%" asks for. Regressor families are registered by name (``gbr``, ``ridge``).

The default is ``ridge``: on 150 measured archs per space (CPU, batch 1, 1x28x28; see
``bench/hw_cost/predictor.py``) it held more held-out archs within +-10% than gradient boosting
on both ``mbconv`` and ``resnet``; latency is close to log-linear in log MACs and bytes, and
boosting on ~100 training rows fits noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from sklearn.base import RegressorMixin
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from hwnas.common.errors import ConfigError
from hwnas.common.registry import Registry

REGRESSORS: Registry[Callable[[int], RegressorMixin]] = Registry("latency regressor")
STATIC_FEATURES = ("macs", "params", "activation_bytes", "peak_activation_bytes", "model_bytes",
                   "leaf_calls")


@REGRESSORS.register("gbr")
def _gbr(seed: int) -> RegressorMixin:
    return GradientBoostingRegressor(n_estimators=400, max_depth=3, learning_rate=0.05,
                                     subsample=0.8, random_state=seed)


@REGRESSORS.register("ridge")
def _ridge(seed: int) -> RegressorMixin:
    return make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-3, 3, 13)))


def feature_row(row: dict) -> dict[str, float]:
    """Named features of one cost row (a ``cost_of`` result or a static-only stand-in)."""
    out = {f"f_{k}": float(v) for k, v in row.get("features", {}).items()}
    for name in STATIC_FEATURES:
        if name in row:  # rows cached before a feature existed simply lack it
            out[name] = float(np.log1p(row[name]))
    return out


class LatencyRegressor:
    """``fit(rows)`` on rows that carry ``target`` (default the median ``latency_ms``);
    ``predict(rows)`` in milliseconds."""

    def __init__(self, kind: str = "ridge", *, seed: int = 0, target: str = "latency_ms"):
        if kind not in REGRESSORS:
            raise ConfigError.one("regressor", f"must be one of {REGRESSORS.list()}", kind,
                                  "pass --regressor ridge or gbr (gradient boosting)")
        self.kind, self.model, self.target = kind, REGRESSORS.get(kind)(seed), target
        self.columns: list[str] = []

    def _matrix(self, rows: Sequence[dict]) -> np.ndarray:
        feats = [feature_row(r) for r in rows]
        return np.array([[f.get(c, 0.0) for c in self.columns] for f in feats], dtype=float)

    def fit(self, rows: Sequence[dict]) -> LatencyRegressor:
        if len(rows) < 5:
            raise ConfigError.one("regressor training set", "needs at least 5 measured archs",
                                  len(rows), "measure more: hwnas cost eval-predictor --measure N")
        self.columns = sorted({c for r in rows for c in feature_row(r)})
        y = np.log([r[self.target] for r in rows])
        self.model.fit(self._matrix(rows), y)
        return self

    def predict(self, rows: Sequence[dict]) -> np.ndarray:
        return np.exp(self.model.predict(self._matrix(rows)))
