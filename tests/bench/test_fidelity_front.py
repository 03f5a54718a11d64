"""The front-regret bench's rung-0 arm (bench/fidelity/front.py): what it promotes and trains,
the archs its free baseline looks at, and the seed counts of its table, against brute force."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.fidelity import front


def _table(seed: int, n: int = 20) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    params = rng.integers(10_000, 1_000_000, size=n).astype(float)
    return pd.DataFrame({
        "params": params, "params_log": np.log(params),
        "synflow_s1": rng.integers(0, 6, size=n).astype(float),  # coarse: ties and shared ranks
        "latency_ms": rng.integers(1, 6, size=n).astype(float),
        "acc_pcm@1d": rng.uniform(0.7, 0.9, size=n), "score_s1": rng.uniform(0.6, 0.9, size=n),
        "se_s1": np.full(n, 0.01), "reps_s1": np.full(n, 10.0),
    }, index=[f"a{i}" for i in range(n)])


def _fronts(points: dict[str, tuple[float, float]]) -> list[set[str]]:
    """Non-dominated fronts of (up, down) points, peeled by the definition."""
    left, out = dict(points), []
    while left:
        front = {a for a, (u, d) in left.items()
                 if not any(u2 >= u and d2 <= d and (u2, d2) != (u, d) for u2, d2 in left.values())}
        out.append(front)
        left = {a: v for a, v in left.items() if a not in front}
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("col", ["synflow_s1", "params_log"])
def test_rung_zero_promotes_whole_fronts_first(seed: int, col: str) -> None:
    table = _table(seed)
    archs = front.looked_at(table, seed, 5)
    fronts = _fronts({a: (table.at[a, col], table.at[a, "latency_ms"]) for a in archs})
    taken: set[str] = set()
    for f in fronts:  # wherever a cut falls between two fronts the pick is known exactly
        taken |= f
        assert set(front.promoted(table, archs, col, len(taken))) == taken
    assert len(taken) == len(archs)


def test_only_the_promoted_are_trained_and_the_free_front_sees_the_same_archs() -> None:
    table = _table(0)
    for seed in range(5):
        archs = front.looked_at(table, seed, 4)
        assert len(archs) == 12 == len(set(archs)) and archs == front.looked_at(table, seed, 4)
        chosen = front.promoted(table, archs, "synflow_s1", 4)
        found = front.prior_search(table, archs, "synflow_s1", 4, "score_s1")
        noisy = front.prior_search(table, archs, "synflow_s1", 4, "score_s1", train_sd=0.01)
        assert set(found) <= set(chosen) and set(found) <= set(noisy) <= set(chosen)
        want = {a for a in chosen if not any(  # the Pareto set of the promoted's scores
            table.at[b, "score_s1"] >= table.at[a, "score_s1"]
            and table.at[b, "latency_ms"] <= table.at[a, "latency_ms"] and b != a
            and (table.at[b, "score_s1"], table.at[b, "latency_ms"])
            != (table.at[a, "score_s1"], table.at[a, "latency_ms"]) for b in chosen)}
        assert set(found) == want
    assert len(front.looked_at(table, 0, 10)) == 20  # M never exceeds the pool


def test_rows_count_seeds_strictly_above_each_free_front() -> None:
    rng = np.random.default_rng(0)
    hv = {name: rng.uniform(0.8, 1.0, size=10).round(2).tolist() for name in
          ("default", "params-greedy@N", "params-greedy@M", "synflow rung 0 @M -> N")}
    hv["synflow rung 0 @M -> N"][:3] = hv["params-greedy@M"][:3]  # ties do not count
    rows = {r["front from"]: r for r in front.rows({"hv": hv, "params_greedy_pool": 0.95})}
    for name in ("default", "synflow rung 0 @M -> N"):
        for at in ("N", "M"):
            n = sum(a > b for a, b in zip(hv[name], hv[f"params-greedy@{at}"], strict=True))
            assert rows[name][f"seeds above params-greedy@{at}"] == f"{n}/10"
    assert "seeds above params-greedy@M" not in rows["params-greedy@M"]
    old = front.rows({"hv": {k: hv[k] for k in ("default", "params-greedy@N")},
                      "params_greedy_pool": 0.95})  # a result from before the rung-0 arms
    assert all("seeds above params-greedy@M" not in r for r in old)


def test_shrunk_scores_use_only_the_trained_candidates() -> None:
    table = _table(3).assign(synflow_s1=lambda t: np.exp(np.linspace(0, 3, len(t))))
    chosen = list(table.index[:6])
    got = front.shrunk_scores(table, chosen, "score_s1")
    assert list(got.index) == chosen
    # the same as shrinking those six by hand; the other 14 archs play no part
    want = front.shrunk(table.loc[chosen, "score_s1"].values,
                           table.loc[chosen, "synflow_s1"].values, np.full(6, 0.01))
    assert np.allclose(got.shrunk.values, want)
    table.loc[table.index[6:], "score_s1"] = 0.0
    assert np.allclose(front.shrunk_scores(table, chosen, "score_s1").shrunk.values, want)
    # two candidates: no residual to weigh, the scores stand
    pair = front.shrunk_scores(table, chosen[:2], "score_s1")
    assert list(pair.shrunk) == list(pair.score_s1)


def test_the_pool_is_the_yardsticks_whatever_this_machine_measures(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The pool once came from the live cost cache: on a loaded or fresh machine archs near the
    # 5 ms budget fell out of it, and the front's figures moved with the host.
    from bench.fidelity import bands, report
    from bench.fidelity.baselines import BASELINES, stored_latency

    def slow(space: str, archs: list[str]) -> dict[str, dict[str, float]]:
        return {a: {"latency_ms": 99.0, "params": 1.0, "macs": 1.0} for a in archs}

    monkeypatch.setattr(bands, "measure", slow)
    pool = front.pool_table("default", [1, 2, 3, 4])
    ref = report.reference(pd.read_csv(front.DATA / "truth.csv"), pd.read_csv(BASELINES))
    assert len(pool) >= 25 and set(pool.index) <= set(ref.index)
    assert (pool.latency_ms == stored_latency().reindex(pool.index)).all()
    assert pool.latency_ms.max() <= front.BUDGET_MS
