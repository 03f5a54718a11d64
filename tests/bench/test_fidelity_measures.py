"""Yardstick v2's measures (bench/fidelity/measures.py) against brute force and invariants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bench.fidelity import measures as fm


def _brute_concordance(s, t, c, ratio):  # noqa: ANN001, ANN202
    good = n = 0.0
    for i, j in itertools.combinations(range(len(s)), 2):
        if max(c[i], c[j]) / min(c[i], c[j]) > ratio or t[i] == t[j]:
            continue
        n += 1
        good += 1 if np.sign(s[i] - s[j]) == np.sign(t[i] - t[j]) else (
            0.5 if s[i] == s[j] else 0)
    return good / n, int(n)


@pytest.mark.parametrize("seed", range(5))
def test_band_concordance_matches_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    s, t = rng.normal(size=30).round(1), rng.normal(size=30)
    c = rng.uniform(1, 5, size=30)
    got, n = fm.band_concordance(s, t, c, 1.25)
    want, m = _brute_concordance(s, t, c, 1.25)
    assert n == m and got == pytest.approx(want)


def test_a_function_of_size_has_no_residual_ranking() -> None:
    rng = np.random.default_rng(0)
    params = rng.uniform(1e4, 1e6, size=20)
    truth = 0.05 * np.log(params) + rng.normal(0, 0.01, size=20)
    assert fm.residual_tau(np.log(params), truth, params) == 0.0
    assert fm.residual_tau(3 * np.log(params) + 1, truth, params) == 0.0
    # a score that knows the truth beyond size ranks its residuals perfectly
    assert fm.residual_tau(truth, truth, params) == pytest.approx(1.0)
    # while plain tau rewards size alone
    assert fm.tau(params, truth) > 0.5


def test_residuals_are_orthogonal_to_log_size() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=50)
    r = fm.residuals(2 * x + rng.normal(size=50), x)
    assert abs(np.dot(r, x - x.mean())) < 1e-9 and abs(r.mean()) < 1e-9


def test_within_band_tau_ignores_order_across_bands() -> None:
    truth = np.array([1, 2, 3, 10, 11, 12], float)
    band = np.array(["a", "a", "a", "b", "b", "b"])
    score = np.array([11, 12, 13, 1, 2, 3], float)  # bands swapped, order inside kept
    assert fm.within_band_tau(score, truth, band) == pytest.approx(1.0)
    assert fm.tau(score, truth) < 0.5


def test_seed_noise_and_ceiling() -> None:
    rng = np.random.default_rng(2)
    true = rng.normal(0, 1, size=4000)
    a, b = true + rng.normal(0, 0.3, 4000), true + rng.normal(0, 0.3, 4000)
    assert fm.seed_noise_sd(a, b) == pytest.approx(0.3, rel=0.05)
    med, low = fm.tau_ceiling(np.linspace(0, 1, 24), 0.0, n=50)
    assert med == 1.0 and low == 1.0
    noisy, low = fm.tau_ceiling(np.linspace(0, 1, 24), 0.1, n=400)
    assert low < noisy < 1.0


def test_top_overlap_and_degenerate_tau() -> None:
    assert fm.top_overlap(np.arange(10), np.arange(10)) == 5
    assert fm.top_overlap(np.arange(10), -np.arange(10)) == 0
    assert np.isnan(fm.tau([1, 1, 1], [1, 2, 3]))


def test_the_ceiling_of_the_equal_cost_measures_falls_below_taus() -> None:
    # A truth mostly set by size: noise the size of the within-size signal leaves raw tau high
    # and cuts the residual ranking; without noise either measure reaches 1.
    rng = np.random.default_rng(0)
    params = np.exp(np.linspace(10, 14, 24))
    truth = 0.02 * np.log(params) + rng.normal(0, 0.005, 24)

    def res(s, t):  # noqa: ANN001, ANN202
        return fm.residual_tau(s, t, params)

    assert fm.tau_ceiling(truth, 0.0, n=20, measure=res) == (1.0, 1.0)
    raw, _ = fm.tau_ceiling(truth, 0.005, n=300)
    residual, low = fm.tau_ceiling(truth, 0.005, n=300, measure=res)
    assert low < residual < raw - 0.2


def test_goal_rows_count_single_runs_on_seeds_disjoint_from_the_truth() -> None:
    from bench.fidelity.report import goal_rows

    conc = "concordance, latency 1.25x"
    rows = [("params", 0.0, 0.74), ("default seed 0 (the truth's seed)", 0.9, 0.95),
            ("default seed 1", 0.55, 0.84), ("default seed 2", 0.61, 0.83),
            ("default + synflow (rank mean) seed 2", 0.6, 0.84),
            ("default mean of seeds 1,2", 0.9, 0.99)]
    table = [{"scorer": name, "archs": 24, "residual tau": res, conc: f"{c:.2f} (46 pairs)"}
             for name, res, c in rows]
    # a scorer run on fewer archs is measured on other pairs: not held to the count's bar
    table.append({"scorer": "eco seed 1", "archs": 3, "residual tau": 1.0, conc: "1.00 (3 pairs)"})
    got = {r["scorer"]: r for r in goal_rows(table)}
    # no seed 0, no seed mean, no run on other archs
    assert set(got) == {"default", "default + synflow (rank mean)"}
    assert got["default"]["residual tau >= 0.6"] == "1/2 (2)"
    assert got["default"]["concordance >= 0.84"] == "1/2 (1)"  # the bar is params + 0.10
    assert got["default"]["both"] == "0/2"
    assert got["default + synflow (rank mean)"]["both"] == "1/1 (2)"
    assert goal_rows(table[1:]) == []  # no parameter count: no bar


def test_shrunk_keeps_a_noiseless_score_and_follows_the_trend_under_noise() -> None:
    from nas.algorithms.shrink import shrunk

    rng = np.random.default_rng(0)
    proxy = rng.uniform(1, 100, 20)
    score = 0.7 + 0.02 * np.log(proxy) + rng.normal(0, 0.01, 20)
    assert np.allclose(shrunk(score, proxy, np.zeros(20)), score)
    # noise far above the residual spread: nothing is left but the proxy's trend
    flat = shrunk(score, proxy, np.full(20, 1.0))
    trend = np.polyval(np.polyfit(np.log(proxy), score, 1), np.log(proxy))
    assert np.allclose(flat, trend)
    # in between: the residuals shrink by one common factor, so their order is kept
    mid = shrunk(score, proxy, np.full(20, 0.007))
    assert fm.tau(mid - trend, score - trend) == pytest.approx(1.0)
    assert 0 < np.std(mid - trend) < np.std(score - trend)
