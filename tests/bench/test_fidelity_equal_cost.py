"""The equal-cost front bench (bench/fidelity/equal_cost.py): what the shipped screen's wall time
buys, its sign test against brute force, and determinism under the search seed."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import yaml

from bench.fidelity import equal_cost, front

LOOK = {"params": 1.3, "macs": 1.3, "synflow": 1.3 + 0.2, "naswot": 1.3 + 1.1}
TRAIN = 50.0 + 20.0  # a training and a scoring


def _table(seed: int, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        front.KEY: rng.uniform(0.7, 0.9, n), "latency_ms": rng.uniform(0.5, 5.0, n),
        "params": rng.integers(10_000, 10**6, n).astype(float),
        "macs": rng.integers(10**5, 10**8, n).astype(float),
        "score_s1": rng.uniform(0.6, 0.9, n), "se_s1": np.full(n, 0.02),
        "synflow_s1": rng.uniform(5, 30, n), "naswot_s1": rng.uniform(100, 900, n),
        "sec_train": np.full(n, 50.0), "sec_score": np.full(n, 20.0),
        "sec_synflow": np.full(n, 0.2), "sec_naswot": np.full(n, 1.1),
    }, index=[f"a{i}" for i in range(n)])


def _brute_bought(cost: float, wall: float) -> int:
    n, spent = 0, 0.0
    while spent + cost <= wall + 1e-9:
        n, spent = n + 1, spent + cost
    return n


def _rank0(points: dict[str, tuple[float, float]]) -> set[str]:
    return {a for a, (u, d) in points.items()
            if not any(u2 >= u and d2 <= d and (u2, d2) != (u, d) for u2, d2 in points.values())}


@pytest.mark.parametrize("latency_s", [1.3, 0.9])
def test_the_shipped_wall_time_buys_the_right_number_of_looks(latency_s: float) -> None:
    table = _table(0)
    look = {p: c - 1.3 + latency_s for p, c in LOOK.items()}
    screen = equal_cost.Screen(looks=20, most=3)
    for s in equal_cost.evaluate(table, 5, screen, latency_s=latency_s):
        assert s["wall_s"] == pytest.approx(20 * look["synflow"] + len(s["trained"]) * TRAIN)
        for proxy, cost in look.items():
            assert s["bought"][proxy] == _brute_bought(cost, s["wall_s"]) < len(table)
        assert s["random_trained"] == _brute_bought(latency_s + TRAIN, s["wall_s"])
    # a pool smaller than what the wall time buys is bought whole, never past its end
    small = equal_cost.evaluate(table.iloc[:40], 3, screen, latency_s=latency_s)
    assert all(s["bought"][p] == 40 for s in small for p in LOOK)


def test_bought_pays_costs_in_order() -> None:
    rng = np.random.default_rng(1)
    for _ in range(50):
        costs = rng.uniform(0.1, 3.0, 30)
        wall = float(rng.uniform(0, 50))
        want = max((n for n in range(31) if sum(costs[:n]) <= wall), default=0)
        assert equal_cost.bought(costs, wall) == want
    assert equal_cost.bought([], 10.0) == 0 and equal_cost.bought([2.0, 2.0], 4.0) == 2


def test_sign_test_agrees_with_brute_force() -> None:
    rng = np.random.default_rng(2)
    for _ in range(30):
        a = rng.integers(0, 4, 20) / 4
        b = rng.integers(0, 4, 20) / 4  # coarse: ties
        got = equal_cost.sign_test(a, b)
        above = sum(x > y for x, y in zip(a, b, strict=True))
        below = sum(x < y for x, y in zip(a, b, strict=True))
        assert (got["above"], got["equal"], got["below"]) == (above, 20 - above - below, below)
        n, k = above + below, min(above, below)
        p = min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0
        assert got["p"] == pytest.approx(p)
    assert equal_cost.sign_test([0.5] * 4, [0.5] * 4)["p"] == 1.0


def test_determinism_and_the_screen_trains_only_its_free_front() -> None:
    table = _table(3, n=60)
    screen = equal_cost.Screen(looks=20, most=3)
    one = equal_cost.evaluate(table, 6, screen)
    assert one == equal_cost.evaluate(table, 6, screen)  # the same seeds, the same result
    assert len({tuple(s["looked"]) for s in one}) == 6  # each seed draws its own looks
    for s in one:
        looked = s["looked"]
        free = _rank0({a: (table.at[a, "synflow_s1"], table.at[a, "latency_ms"]) for a in looked})
        assert set(s["trained"]) <= free and len(s["trained"]) == min(len(free), 3)
        # training can only drop members: the same looks' free front is never below
        assert s["hv"]["synflow free front, equal looks"] >= s["hv"]["shipped"] - 1e-12


def test_the_screen_is_the_quickstarts() -> None:
    sched = yaml.safe_load((front.DATA.parents[2] / "studies/quickstart.yaml").read_text())
    got = equal_cost.shipped_screen()
    assert (got.looks, got.most) == (sched["schedule"]["looks"], sched["schedule"]["promote_max"])


def test_another_screen_is_priced_on_the_same_order_at_its_own_time() -> None:
    table = _table(4, n=60)
    narrow = equal_cost.Screen(looks=10, most=2)
    name = equal_cost.screen_arm(narrow)
    for s in equal_cost.evaluate(table, 4, equal_cost.Screen(looks=20, most=3), also=(narrow,)):
        got = s["also"][name]
        assert got["looks"] == 10 and got["trained"] <= 2
        assert got["wall_s"] == pytest.approx(10 * LOOK["synflow"] + got["trained"] * TRAIN)
        # its looks are the first 10 of the shipped arm's 20: the same order, read from the start
        free = _rank0({a: (table.at[a, "synflow_s1"], table.at[a, "latency_ms"])
                       for a in s["looked"][:10]})
        assert got["trained"] == min(len(free), 2)


def test_stop_share_stops_at_three_when_scores_repeat_synflow() -> None:
    table = _table(5, n=12)
    archs = list(table.index)
    table["score_s1"] = 0.5 + 0.05 * np.log(table["synflow_s1"])  # no residual: all noise
    assert equal_cost.stopped_early(table, archs, "score_s1", 0.25) == archs[:3]
    assert equal_cost.stopped_early(table, archs, "score_s1", None) == archs
    table["se_s1"] = 1e-6  # residuals far above their noise: training moves ranks, never stops
    table["score_s1"] += np.resize([0.1, -0.1, 0.05], len(table))
    assert equal_cost.stopped_early(table, archs, "score_s1", 0.25) == archs
