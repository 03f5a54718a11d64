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
    trend, signal, noise = _split(y, predictor, se)
    resid = y - trend
    return trend + resid * signal / (signal + noise) if signal + noise > 0 else y.copy()


def signal_share(score: np.ndarray, predictor: np.ndarray, se: np.ndarray) -> float | None:
    """The share of the residuals' variance about the line on log(``predictor``) that is signal,
    ``signal / (signal + noise)`` as ``shrunk`` weighs it: 0 when the trained scores say nothing
    the free predictor does not (shrinking puts every score on the line, so the front is ranked
    as the predictor ranks it), near 1 when they rank beyond it. None for fewer than three
    scores; 1 when there is neither noise nor spread (nothing to shrink)."""
    y = np.asarray(score, float)
    if len(y) < 3:
        return None
    _, signal, noise = _split(y, predictor, se)
    return signal / (signal + noise) if signal + noise > 0 else 1.0


def log_predictor(predictor: np.ndarray) -> np.ndarray:
    """log(``predictor``), values at or below 0 clipped to the smallest positive float."""
    return np.log(np.maximum(np.asarray(predictor, float), np.finfo(float).tiny))


def line(score: np.ndarray, predictor: np.ndarray) -> tuple[float, float]:
    """(slope, intercept) of the least-squares line of ``score`` on log(``predictor``)."""
    slope, icept = np.polyfit(log_predictor(predictor), np.asarray(score, float), 1)
    return float(slope), float(icept)


def _split(y: np.ndarray, predictor: np.ndarray, se: np.ndarray) -> tuple[np.ndarray, float,
                                                                           float]:
    """(the least-squares line of ``y`` on log(``predictor``), the residuals' variance beyond
    the noise, the noise: the median ``se`` squared)."""
    slope, icept = line(y, predictor)
    trend = slope * log_predictor(predictor) + icept
    noise = float(np.median(np.asarray(se, float))) ** 2
    return trend, max(float(np.var(y - trend, ddof=1)) - noise, 0.0), noise
