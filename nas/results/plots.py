"""The report's figures. Each function returns a matplotlib Figure (the caller saves it).

Figures are built with the object-oriented API (``Figure``, no pyplot): no global backend is
chosen and no figure is registered with pyplot, so a notebook that imports hwnas keeps its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from optuna.trial import TrialState

from nas.results.summary import Front, completed
from nas.search.prior_rung import is_prior
from nas.study.config import StudyConfig
from nas.study.objectives import Objective
from nas.study.store import feasible

if TYPE_CHECKING:
    import optuna


def _axes(cfg: StudyConfig) -> tuple[Objective, Objective]:
    """x: the first cost objective (else the second objective); y: the first accuracy one."""
    objs = cfg.objectives_resolved()
    acc = next((o for o in objs if o.metric.uses_hw), objs[0])
    rest = [o for o in objs if o is not acc]
    cost = next((o for o in rest if o.metric.stage == "cost"), rest[0] if rest else acc)
    return cost, acc


def _attr(trials: list[Any], key: str) -> np.ndarray:
    return np.array([float(t.user_attrs.get(key, np.nan)) for t in trials])


def _error_bars(ax: Any, trials: list[Any], x_key: str, y_key: str, c: str) -> None:
    """±1 standard error on every point whose SE was stored (analog accuracies)."""
    se = _attr(trials, f"{y_key}_se")
    if len(se) and np.isfinite(se).any():
        ax.errorbar(_attr(trials, x_key), _attr(trials, y_key), yerr=np.nan_to_num(se), fmt="none",
                    ecolor=c, elinewidth=1, capsize=2, zorder=2)


def _latency_bars(ax: Any, trials: list[Any], x_key: str, y_key: str, c: str) -> bool:
    """The p10-p90 of each front point's timed calls, as horizontal bars (latency axis only)."""
    if x_key != "latency_ms":
        return False
    x, lo, hi = (_attr(trials, k) for k in (x_key, "latency_p10_ms", "latency_p90_ms"))
    if not (len(x) and np.isfinite(lo).any() and np.isfinite(hi).any()):
        return False
    err = np.vstack([np.nan_to_num(x - lo).clip(0), np.nan_to_num(hi - x).clip(0)])
    ax.errorbar(x, _attr(trials, y_key), xerr=err, fmt="none", ecolor=c, elinewidth=1,
                capsize=2, zorder=2)
    return True


def pareto_figure(cfg: StudyConfig, study: optuna.Study, front: Front) -> Figure:
    x_obj, y_obj = _axes(cfg)
    done = completed(study)
    ok = [t for t in done if feasible(t)]
    bad = [t for t in done if not feasible(t)]
    fig = Figure(figsize=(7.5, 6.2), layout="constrained")
    ax = fig.subplots()
    ax.scatter(_attr(ok, x_obj.key), _attr(ok, y_obj.key), s=18, c="0.7",
               label=f"trials ({y_obj.hw or 'value'})")
    hw = y_obj.metric.uses_hw and y_obj.hw != "digital"
    if hw:
        ax.scatter(_attr(ok, x_obj.key), _attr(ok, "acc_digital"), s=10, c="#9ecae1",
                   label="trials (digital)")
    fx, fy = _attr(front.trials, x_obj.key), _attr(front.trials, y_obj.key)
    order = np.argsort(fx)
    ax.step(fx[order], fy[order], where="post", c="C3", lw=1.2)
    _error_bars(ax, ok, x_obj.key, y_obj.key, c="0.7")
    _error_bars(ax, front.trials, x_obj.key, y_obj.key, c="C3")
    timed = _latency_bars(ax, front.trials, x_obj.key, y_obj.key, c="C3")
    bars = "±1 SE" + (", latency p10-p90 of the timed calls" if timed else "")
    ax.scatter(fx, fy, s=40, c="C3", zorder=3, label=f"Pareto front: {y_obj.label} (bars: {bars})")
    if front.resolved is not None and not all(front.resolved):
        weak = ~np.array(front.resolved)
        ax.scatter(fx[weak], fy[weak], s=90, facecolors="none", edgecolors="k", zorder=4,
                   label="not resolved within 2 SE (hwnas pareto)")
    if hw:
        dy = _attr(front.trials, "acc_digital")
        ax.scatter(fx, dy, s=40, facecolors="none", edgecolors="C0", zorder=3,
                   label="same models, digital")
        ax.vlines(fx, np.minimum(fy, dy), np.maximum(fy, dy), colors="C0", lw=0.8, alpha=0.6)
    if bad:
        ax.plot(_attr(bad, x_obj.key), np.full(len(bad), np.nanmin(fy) if len(fy) else 0), "x",
                c="0.4", label="over a budget (not trained)")
    for b in cfg.budgets():
        if b.key == x_obj.key and b.max is not None:
            ax.axvline(b.max, ls="--", c="0.3", lw=1, label=f"budget {b.describe()}")
    ax.set_xlabel(x_obj.label)
    ax.set_ylabel(y_obj.label)
    trained = [t for t in ok if not is_prior(t)]  # not the free rung 0
    ax.set_title(f"{cfg.name}: Pareto front ({len(front.trials)} of {len(trained)} feasible "
                 "trials)")
    ax.grid(alpha=0.3)
    # below the axes: inside, its seven entries hid the points of one corner (the over-budget
    # marks at the budget's far side)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2,
              frameon=False)
    return fig


def hv_figure(numbers: np.ndarray, hv: np.ndarray, cfg: StudyConfig, study: optuna.Study) -> Figure:
    fig = Figure(figsize=(7.5, 3.5))
    ax = fig.subplots()
    ax.plot(numbers, hv, c="C2", drawstyle="steps-post")
    ax.set_xlabel("trial number")
    ax.set_ylabel("hypervolume (feasible trials)")
    failed = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))]
    if failed:
        ax.plot(failed, np.zeros(len(failed)), "|", c="C3", ms=12, label="failed trials")
        ax.legend(fontsize=8)
    ax.set_title(f"{cfg.name}: hypervolume over trials (sampler {cfg.sampler.name})")
    ax.grid(alpha=0.3)
    return fig


def pairs_figure(cfg: StudyConfig, study: optuna.Study, front: Front) -> Figure:
    objs = cfg.objectives_resolved()
    ok = [t for t in completed(study) if feasible(t)]
    n = len(objs)
    fig = Figure(figsize=(2.6 * n, 2.6 * n))
    axes = fig.subplots(n, n, squeeze=False)
    for i, yo in enumerate(objs):
        for j, xo in enumerate(objs):
            ax = axes[i, j]
            if i == j:
                ax.hist(_attr(ok, xo.key)[~np.isnan(_attr(ok, xo.key))], bins=20, color="0.6")
            else:
                ax.scatter(_attr(ok, xo.key), _attr(ok, yo.key), s=6, c="0.7")
                ax.scatter(_attr(front.trials, xo.key), _attr(front.trials, yo.key), s=14,
                           c="C3")
            if i == n - 1:
                ax.set_xlabel(xo.key, fontsize=8)
            if j == 0:
                ax.set_ylabel(yo.key, fontsize=8)
    fig.tight_layout()
    return fig
