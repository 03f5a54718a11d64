"""Which candidates of a rung go up: non-dominated sorting, ties broken by crowding distance.

The promotion rule of multi-objective successive halving (``nas.search.schedule``), as a pure
function of the objective values of a rung's finished candidates:

1. **Non-dominated rank** first: the Pareto front of the rung is rank 0, the front of the rest
   rank 1, and so on. A candidate is never promoted before one that dominates it.
2. **Crowding distance** within a rank, largest first (NSGA-II's measure: the sum over objectives
   of the normalized gap between a point's two neighbours on that objective; each objective's
   extremes get infinity). It keeps the promoted set spread along the front instead of bunched
   where the rung happens to have many similar candidates. It needs no reference point, which
   at a low budget (accuracies far below the final ones) would be arbitrary.
3. **Earlier candidate first** when both are equal (deterministic across workers).

``promotion_order`` returns the whole order; ``promote(values, directions, k)`` its first ``k``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nas.algorithms.pareto import non_dominated_sort, to_loss


def crowding_distance(loss: np.ndarray) -> np.ndarray:
    """NSGA-II crowding distance of every row of one front (losses; any number of columns)."""
    n, m = loss.shape
    dist = np.zeros(n)
    if n <= 2:
        return np.full(n, np.inf)
    for j in range(m):
        order = np.argsort(loss[:, j], kind="stable")
        span = loss[order[-1], j] - loss[order[0], j]
        dist[order[0]] = dist[order[-1]] = np.inf
        if span <= 0:
            continue
        gaps = (loss[order[2:], j] - loss[order[:-2], j]) / span
        dist[order[1:-1]] += gaps
    return dist


def promotion_order(values: np.ndarray, directions: Sequence[str]) -> np.ndarray:
    """Row indices best-first: by rank, then crowding distance (larger first), then row."""
    loss = to_loss(values, directions)
    if len(loss) == 0:
        return np.zeros(0, dtype=int)
    ranks = non_dominated_sort(loss, ["minimize"] * loss.shape[1])
    crowd = np.zeros(len(loss))
    for r in np.unique(ranks):
        members = np.flatnonzero(ranks == r)
        crowd[members] = crowding_distance(loss[members])
    rows = np.arange(len(loss))
    return np.array(sorted(rows, key=lambda i: (ranks[i], -crowd[i], i)), dtype=int)


def promote(values: np.ndarray, directions: Sequence[str], k: int) -> np.ndarray:
    """The ``k`` best rows by ``promotion_order`` (fewer when there are fewer rows)."""
    return promotion_order(values, directions)[:max(k, 0)]
