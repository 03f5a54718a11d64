"""Noisy scores pulled toward a free predictor's trend by their noise share (empirical Bayes).

A candidate's trained score is one noisy draw: its stored standard error (programmings and
images) is of the same size as the differences a front has to rank. A free score taken at
initialisation (the study's rung-0 prior, such as SynFlow) carries information about the same
ranking from another source. Shrinking combines the two without a tuned weight: fit the trained
scores on the log of the prior by least squares, then keep of each residual the share that is
signal, ``signal / (signal + noise)``, where noise is the median stored SE squared and signal is
the rest of the residuals' variance. A precise score stays where it is; a score whose spread is
all noise falls on the trend.

Measured on the fidelity truth (``python -m bench.fidelity report``, BENCHMARKS.md): on four
single runs of the shipped recipe, the scores shrunk toward SynFlow rank the truth's residuals
after size better than the raw scores in every run.
"""

from __future__ import annotations

import numpy as np


def shrunk(score: np.ndarray, predictor: np.ndarray, se: np.ndarray) -> np.ndarray:
    """``score`` pulled toward its least-squares line on log(``predictor``) by its noise share.

    Args:
        score: one value per candidate (e.g. accuracy), higher or lower better alike.
        predictor: a positive free score per candidate (a zero-cost proxy, a size count);
            values at or below 0 are clipped to the smallest positive float.
        se: each score's standard error; their median squared is the noise.

    Returns the shrunk scores; ``score`` itself when fewer than three are given (a line through
    two points leaves no residual to weigh).
    """
    y = np.asarray(score, float)
    if len(y) < 3:
        return y.copy()
    x = np.log(np.maximum(np.asarray(predictor, float), np.finfo(float).tiny))
    slope, icept = np.polyfit(x, y, 1)
    trend = slope * x + icept
    resid = y - trend
    noise = float(np.median(np.asarray(se, float))) ** 2
    signal = max(float(np.var(resid, ddof=1)) - noise, 0.0)
    return trend + resid * signal / (signal + noise) if signal + noise > 0 else y.copy()
