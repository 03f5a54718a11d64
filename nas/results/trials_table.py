"""The report's trial table, short enough to read: one row per trial with its objectives and
their SEs, where its seconds went, and a budget it broke said in words (an infeasible trial's
stored objective is a placeholder, never a measurement, so it is never shown as a number).
Every stored column stays one click away in the full table and in ``trials.csv``."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pandas as pd

from nas.search.prior_rung import is_prior
from nas.search.progress import seconds_split
from nas.study.config import StudyConfig
from nas.study.store import feasible

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def infeasible_reason(cfg: StudyConfig, attrs: dict[str, Any]) -> str:
    """``infeasible: latency_ms 5.94 outside latency_ms <= 5`` (each budget it broke)."""
    broke = [f"{b.key} {v:.4g} outside {b.describe()}" for b in cfg.budgets()
             for v in [attrs.get(b.key)]
             if isinstance(v, int | float) and math.isfinite(v) and b.violation(v) > 0]
    return "infeasible: " + ("; ".join(broke) or "a budget not met")


def _with_se(value: float | None, se: Any) -> str:
    if value is None or not math.isfinite(value):
        return ""
    if isinstance(se, int | float) and math.isfinite(se):
        return f"{value:.4g} ± {se:.2g}"
    return f"{value:.4g}"


def _objective_cells(cfg: StudyConfig, t: FrozenTrial) -> dict[str, str]:
    objs = cfg.objectives_resolved()
    keys = [o.key for o in objs]
    if t.state.name != "COMPLETE":
        return dict.fromkeys(keys, "")
    if not feasible(t):  # a measured cost stays a measurement; the rest was never scored
        why = infeasible_reason(cfg, t.user_attrs)
        return {o.key: _with_se(t.user_attrs[o.key], None) if o.metric.stage == "cost"
                and isinstance(t.user_attrs.get(o.key), int | float) else why for o in objs}
    free = is_prior(t)  # a free look holds its prior in the accuracy slot: not an accuracy
    return {k: ("" if free and k not in t.user_attrs else _with_se(v, t.user_attrs.get(f"{k}_se")))
            for k, v in zip(keys, t.values or [math.nan] * len(keys), strict=True)}


def short_table(cfg: StudyConfig, study: optuna.Study, on_front: set[int]) -> pd.DataFrame:
    """One row per trial: what a reader compares. Seconds: cost (latency measured or looked
    up), training, scoring (digital and hardware accuracy), and the trial's wall time."""
    rows = []
    for t in study.get_trials(deepcopy=False):
        split = seconds_split(t)
        reason = t.user_attrs.get("fail_reason") or ""
        row = {"trial": t.number, "state": t.state.name, "front": "yes" if t.number in on_front
               else "", "arch": t.user_attrs.get("arch", "")}
        if is_prior(t):
            row["look"] = f"free: {t.user_attrs['prior']} {t.user_attrs.get('prior_score', 0):.4g}"
        row.update(_objective_cells(cfg, t))
        row.update({f"s {part}": f"{split[part]:.1f}" if part in split else ""
                    for part in ("cost", "train", "score")})
        row["s total"] = f"{t.duration.total_seconds():.1f}" if t.duration else ""
        row["note"] = str(reason)[:120]
        rows.append(row)
    frame = pd.DataFrame(rows)
    return frame.drop(columns=[c for c in ("look", "note") if c in frame
                               and not frame[c].fillna("").astype(bool).any()])
