"""Pareto fronts and hypervolume for any number of objectives, each minimized or maximized.

Everything works on plain arrays of objective values (rows = trials) plus a direction per
objective, so the same code scores a study, a tabular benchmark run or a Ray Tune experiment.

Reference point rules for the hypervolume, in order:

1. an explicit value per objective (study config ``pareto.reference``);
2. the metric's natural worst value when it has one (accuracy 0, analog coverage 0), which makes
   hypervolumes comparable across studies and samplers;
3. otherwise the nadir (worst value among the given points) pushed out by ``margin`` of the range,
   so that the extreme points of the front still add volume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import moocore
import numpy as np
from scipy.stats import t as student

from hwnas.common.errors import ConfigError

DIRECTIONS = ("minimize", "maximize")


def _check(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim == 1:
        arr = arr.reshape(-1, len(directions)) if len(arr) else arr.reshape(0, len(directions))
    if arr.ndim != 2 or arr.shape[1] != len(directions):
        raise ConfigError.one("pareto values", "must be an (n_points, n_objectives) array",
                              arr.shape, f"pass one column per direction ({len(directions)})")
    bad = [d for d in directions if d not in DIRECTIONS]
    if bad:
        raise ConfigError.one("pareto directions", f"each must be one of {DIRECTIONS}", bad,
                              "use 'minimize' or 'maximize'")
    return arr


def to_loss(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Values turned into losses (maximized objectives negated), the form the math is done in."""
    arr = _check(values, directions)
    sign = np.array([-1.0 if d == "maximize" else 1.0 for d in directions])
    return arr * sign


def pareto_mask(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """True for every point that no other point dominates (duplicates are all kept)."""
    loss = to_loss(values, directions)
    n = len(loss)
    mask = np.ones(n, dtype=bool)
    if n == 0:
        return mask
    if loss.shape[1] == 2:
        return _pareto_mask_2d(loss)
    for i in range(n):  # O(n^2 m) in numpy: fine for studies (thousands of trials at most)
        if not mask[i]:
            continue
        dominated = np.all(loss[i] <= loss, axis=1) & np.any(loss[i] < loss, axis=1)
        mask &= ~dominated
    return mask


def _pareto_mask_2d(loss: np.ndarray) -> np.ndarray:
    # Sweep by the first objective: a point is on the front when its second objective is
    # strictly below every earlier one; an exact duplicate of a front point stays on the front.
    order = np.lexsort((loss[:, 1], loss[:, 0]))
    mask = np.zeros(len(loss), dtype=bool)
    best, prev, prev_on = np.inf, None, False
    for i in order:
        point = (loss[i, 0], loss[i, 1])
        on = point[1] < best or (point == prev and prev_on)
        best = min(best, point[1])
        mask[i], prev, prev_on = on, point, on
    return mask


def non_dominated_sort(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Front rank of every point: 0 for the Pareto front, 1 for the next layer, and so on."""
    loss = to_loss(values, directions)
    ranks = np.full(len(loss), -1, dtype=int)
    left = np.arange(len(loss))
    rank = 0
    while len(left):
        front = pareto_mask(loss[left], ["minimize"] * loss.shape[1])
        ranks[left[front]] = rank
        left = left[~front]
        rank += 1
    return ranks


def unresolved(values: np.ndarray, directions: Sequence[str], se: np.ndarray, *,
               z: float = 2.0) -> np.ndarray:
    """True for every point whose place rests on differences smaller than the noise.

    ``se`` holds each value's standard error (0 for exact objectives such as latency). Point
    ``b`` *covers* point ``a`` when ``b`` is at least as good on every exact objective, not
    worse by more than ``z * sqrt(se_a**2 + se_b**2)`` on any noisy one, and better than ``a``
    on some objective (an exact one, or a noisy one by its mean). A point that another covers
    cannot be told apart from a point at least as good: on a front, it is a member only because
    its noisy score happened to come out higher. A front member that nothing covers is resolved.
    """
    loss = to_loss(values, directions)
    err = np.abs(np.asarray(se, dtype=float).reshape(loss.shape))
    noisy = err > 0
    out = np.zeros(len(loss), dtype=bool)
    for a in range(len(loss)):
        slack = z * np.sqrt(err[a] ** 2 + err**2)  # (n, m)
        allowed = np.where(noisy[a] | noisy, slack, 0.0)
        as_good = np.all(loss <= loss[a] + allowed, axis=1)
        better = np.any(loss < loss[a], axis=1)
        as_good[a] = False
        out[a] = bool(np.any(as_good & better))
    return out


def comparison_se(se: np.ndarray, repeats: np.ndarray | None = None,
                  train_sd: np.ndarray | float = 0.0) -> np.ndarray:
    """The standard error that separates two candidates, for ``unresolved``'s 2-SE margin.

    ``se`` is a score's evaluation SE (programmings, images). Few programmings make it an
    uncertain estimate of itself: it is scaled by ``t(0.975, 2 * (repeats - 1)) / 2``, so the
    margin is a t quantile rather than 2 (``repeats`` None or 0: normal). The degrees of freedom
    are Welch's for the difference of two scores with equal SEs and repeats, the comparison
    the margin serves. ``train_sd`` adds, in
    quadrature, the training noise that moves one arch's score between seeds (the recipe's,
    calibrated by ``python -m bench.fidelity report`` from seed gaps), which the evaluation SE
    lacks.
    """
    se = np.abs(np.asarray(se, dtype=float))
    scale = np.ones_like(se)
    if repeats is not None:
        reps = np.asarray(repeats, dtype=float) * np.ones_like(se)
        few = reps >= 2
        scale[few] = student.ppf(0.975, 2 * (reps[few] - 1)) / 2.0
    return np.sqrt((se * scale) ** 2 + np.asarray(train_sd, dtype=float) ** 2)


def reference_point(values: np.ndarray, directions: Sequence[str], *,
                    worst: Sequence[float | None] | None = None,
                    explicit: Sequence[float | None] | None = None,
                    margin: float = 0.1) -> np.ndarray:
    """The hypervolume reference point in the objectives' own units (rules in the module doc)."""
    arr = _check(values, directions)
    m = len(directions)
    worst = list(worst or [None] * m)
    explicit = list(explicit or [None] * m)
    loss = to_loss(arr, directions)
    ref_loss = np.zeros(m)
    for j, d in enumerate(directions):
        sign = -1.0 if d == "maximize" else 1.0
        if explicit[j] is not None:
            ref_loss[j] = sign * float(explicit[j])
        elif worst[j] is not None:
            ref_loss[j] = sign * float(worst[j])
        elif len(loss):
            lo, hi = float(np.min(loss[:, j])), float(np.max(loss[:, j]))
            span = hi - lo if hi > lo else max(abs(hi), 1.0)
            ref_loss[j] = hi + margin * span
        else:
            ref_loss[j] = np.inf
    return ref_loss * np.array([-1.0 if d == "maximize" else 1.0 for d in directions])


def hypervolume(values: np.ndarray, directions: Sequence[str], reference: Sequence[float]) -> float:
    """Exact hypervolume dominated by ``values`` and bounded by ``reference`` (moocore)."""
    loss = to_loss(values, directions)
    ref = to_loss(np.asarray(reference, dtype=float).reshape(1, -1), directions)[0]
    inside = loss[np.all(loss < ref, axis=1)] if len(loss) else loss
    if len(inside) == 0:
        return 0.0
    return float(moocore.hypervolume(inside, ref=ref))


def hypervolume_history(values: np.ndarray, directions: Sequence[str],
                        reference: Sequence[float]) -> np.ndarray:
    """Hypervolume after each point in order (the anytime curve of a search)."""
    arr = _check(values, directions)
    out = np.zeros(len(arr))
    front = np.zeros((0, arr.shape[1]))
    for i, row in enumerate(arr):
        merged = np.vstack([front, row[None]])
        front = merged[pareto_mask(merged, directions)]
        out[i] = hypervolume(front, directions, reference)
    return out


def explicit_reference(keys: Sequence[str],
                       given: Mapping[str, float] | None) -> list[float | None]:
    """Map a ``{metric key: value}`` reference from the config onto the objective order."""
    given = dict(given or {})
    return [given.get(k) for k in keys]
