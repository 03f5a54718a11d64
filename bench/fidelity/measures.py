"""Yardstick v2: how well a score ranks the truth at equal cost, not only overall.

A parameter count ranks a truth set spread over sizes almost perfectly, for free, so an overall
Kendall tau mostly measures "is bigger better?". These measures ask what a search needs: which
of two candidates of about the same cost is better.

- ``tau``: Kendall tau of the score against the truth (over all archs);
- ``residual_tau``: Kendall tau between the residuals of score and truth after each is
  regressed (least squares) on log(params): the ranking left once size is accounted for. A
  function of size alone scores 0 here;
- ``band_concordance``: over the pairs of archs whose costs are within ``ratio`` of each other
  (latency within 1.25x by default), the fraction the score orders as the truth does (a tie in
  the score counts one half);
- ``within_band_tau``: the mean Kendall tau inside each of truth v2's latency bands;
- ``tau_ceiling``: what tau (or another measure) a noiseless score can reach against a truth
  measured with noise, simulated from the truth's own noise (its seed-to-seed spread).

All are pure functions of arrays, so the report and the tests share them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from scipy.stats import kendalltau


def tau(a: Sequence[float], b: Sequence[float]) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(kendalltau(a, b).statistic)


def residuals(y: Sequence[float], log_size: Sequence[float]) -> np.ndarray:
    """``y`` minus its least-squares line on ``log_size``."""
    y, x = np.asarray(y, float), np.asarray(log_size, float)
    slope, icept = np.polyfit(x, y, 1)
    return y - (slope * x + icept)


def residual_tau(score: Sequence[float], truth: Sequence[float],
                 params: Sequence[float]) -> float:
    """Kendall tau of score and truth after log(params) is regressed out of both; 0 for a
    score that is a linear function of log(params) (its residuals are all zero)."""
    x = np.log(np.asarray(params, float))
    rs = residuals(score, x)
    if np.allclose(rs, 0, atol=1e-12 * max(1.0, float(np.abs(score).max()))):
        return 0.0
    return tau(rs, residuals(truth, x))


def cost_pairs(cost: Sequence[float], ratio: float) -> list[tuple[int, int]]:
    """Index pairs (i < j) whose costs are within ``ratio`` of each other."""
    c = np.asarray(cost, float)
    return [(i, j) for i in range(len(c)) for j in range(i + 1, len(c))
            if max(c[i], c[j]) <= ratio * min(c[i], c[j])]


def band_concordance(score: Sequence[float], truth: Sequence[float], cost: Sequence[float],
                     ratio: float = 1.25) -> tuple[float, int]:
    """(fraction of cost-matched pairs ordered as the truth orders them, number of pairs).
    Pairs the truth ties are left out; a score tie counts one half."""
    s, t = np.asarray(score, float), np.asarray(truth, float)
    good, n = 0.0, 0
    for i, j in cost_pairs(cost, ratio):
        if t[i] == t[j]:
            continue
        n += 1
        prod = (s[i] - s[j]) * (t[i] - t[j])
        good += 1.0 if prod > 0 else 0.5 if prod == 0 else 0.0
    return (good / n if n else float("nan")), n


def within_band_tau(score: Sequence[float], truth: Sequence[float],
                    band: Sequence[str]) -> float:
    """Mean Kendall tau inside each band (bands with at least 3 archs)."""
    s, t, b = np.asarray(score, float), np.asarray(truth, float), np.asarray(band)
    taus = [tau(s[b == name], t[b == name]) for name in dict.fromkeys(band)
            if (b == name).sum() >= 3]
    taus = [x for x in taus if np.isfinite(x)]
    return float(np.mean(taus)) if taus else float("nan")


def top_overlap(score: Sequence[float], truth: Sequence[float], k: int = 5) -> int:
    s, t = np.asarray(score, float), np.asarray(truth, float)
    k = min(k, len(s))
    return len(set(np.argsort(-s)[:k]) & set(np.argsort(-t)[:k]))


def bootstrap(fn, arrays: Sequence[Sequence[float]], n: int = 2000,  # noqa: ANN001
              seed: int = 0) -> tuple[float, float]:
    """95% percentile interval of ``fn(*arrays)`` over resamples of the archs."""
    rng = np.random.default_rng(seed)
    cols = [np.asarray(a) for a in arrays]
    vals = []
    for _ in range(n):
        idx = rng.integers(0, len(cols[0]), len(cols[0]))
        v = fn(*(c[idx] for c in cols))
        if np.isfinite(v):
            vals.append(v)
    if not vals:
        return float("nan"), float("nan")
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def tau_ceiling(truth: Sequence[float], noise_sd: float, n: int = 2000, seed: int = 0,
                measure: Callable[[np.ndarray, np.ndarray], float] = tau) -> tuple[float, float]:
    """Median (and 5th percentile) of ``measure(truth, truth + noise)``, with independent noise
    of ``noise_sd`` per arch: what a noiseless score reaches against a truth measured with that
    noise, on Kendall tau or any measure of (score, truth). The truth's spread stands in for the
    true values' spread, which it exceeds by the noise, so the ceiling is if anything high."""
    rng = np.random.default_rng(seed)
    t = np.asarray(truth, float)
    vals = [measure(t, t + rng.normal(0, noise_sd, len(t))) for _ in range(n)]
    return float(np.median(vals)), float(np.percentile(vals, 5))


def seed_pairs(rows, value: str, space: str | None = None):  # noqa: ANN001, ANN201 - DataFrames
    """The digital truth rows (``truth_seeds.csv``) of archs trained under two or more seeds, one
    column of ``value`` per seed; ``space`` None: every space."""
    digital = rows[(rows.recipe == "digital") & ((rows.space == space) if space else True)]
    return digital.pivot_table(index="arch", columns="seed", values=value).dropna()


def seed_noise_sd(a: Sequence[float], b: Sequence[float]) -> float:
    """Per-measurement noise SD from paired repeats: SD(a - b) / sqrt(2)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    return float(np.std(d, ddof=1) / np.sqrt(2)) if len(d) >= 2 else float("nan")
