"""The SE the noise-aware front compares with: t quantile for few programmings, training noise."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import t as student

from nas.algorithms.pareto import comparison_se, unresolved


def test_many_repeats_and_no_training_noise_keep_the_se() -> None:
    se = np.array([0.01, 0.02])
    assert np.allclose(comparison_se(se), se)
    assert np.allclose(comparison_se(se, np.array([0, 0])), se)  # unknown repeats: normal
    big = comparison_se(se, np.array([10_000, 10_000]))
    assert np.allclose(big, se * 1.96 / 2, rtol=1e-3)


def test_few_programmings_widen_the_margin_to_the_t_quantile() -> None:
    got = comparison_se(np.array([0.01]), np.array([3]))
    assert got[0] == pytest.approx(0.01 * student.ppf(0.975, 4) / 2)
    assert got[0] > 0.013  # t(0.975, 4) = 2.78 (Welch: two scores of 3 programmings)


def test_training_noise_adds_in_quadrature() -> None:
    got = comparison_se(np.array([0.03]), None, 0.04)
    assert got[0] == pytest.approx(0.05)


def test_training_noise_unresolves_a_member_that_evaluation_noise_alone_resolves() -> None:
    values = np.array([[0.80, 1.1], [0.77, 1.0]])  # 3 pt better, 10% slower
    dirs = ["maximize", "minimize"]
    se = np.array([[0.005, 0.0], [0.005, 0.0]])
    assert not unresolved(values, dirs, se).any()
    wide = se.copy()
    wide[:, 0] = comparison_se(se[:, 0], None, 0.013)  # default's seed noise, about 1.3 pt
    assert unresolved(values, dirs, wide)[0]
