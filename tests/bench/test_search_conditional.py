"""The conditional-space search bench: exact costs, a surrogate that follows its truth,
seeded searches, and hypervolume shares of the best known front."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from bench.search import conditional as bench
from search_spaces import get_space
from search_spaces.stats import reference_stats

ARCHS = ["rn:s16-d1r1c24", "rn:s24-d3r2c16-d1r1c96-d2r3c64-d1r2c160"]


@pytest.mark.parametrize("arch", ARCHS)
def test_layout_counts_agree_with_the_built_model(arch: str) -> None:
    space = get_space("resnet")
    for shape in [(1, 28, 28), (3, 32, 32)]:
        assert bench.counts(arch, shape) == reference_stats(space, arch, shape)


def test_the_surrogate_follows_the_truth() -> None:
    archs, acc = bench.truth()
    assert len(archs) >= 20 and all(0 < a < 1 for a in acc)
    truth = pd.read_csv(bench.DATA / "fidelity" / "truth.csv")
    assert set(archs) <= set(truth[truth.space == "resnet"].arch)  # pinned from the truth
    surrogate = bench.Surrogate.from_truth()
    assert kendalltau([surrogate(a) for a in archs], acc).statistic > 0.7  # in sample
    assert bench.loo_tau() > 0.5  # out of sample, each arch left out once


def test_a_search_is_reproducible_under_its_seed_and_reaches_every_group() -> None:
    surrogate = bench.Surrogate.from_truth()
    first = bench.run_search("random", 3, 40, surrogate)
    assert first == bench.run_search("random", 3, 40, surrogate)
    assert first != bench.run_search("random", 4, 40, surrogate)
    assert {get_space("resnet").decode(a)["groups"] for a in first} == {1, 2, 3, 4}


def test_hypervolume_shares_of_the_best_known_front() -> None:
    surrogate = bench.Surrogate.from_truth()
    runs = {name: {"30": {str(s): bench.run_search(name, s, 30, surrogate) for s in (0, 1)}}
            for name in ("random", "nsga2")}
    shares = bench.hv_shares(runs, surrogate)
    every = [v for by_budget in shares["hv"].values() for v in by_budget["30"]]
    assert all(0 < v <= 1 + 1e-9 for v in every)
    union = sorted({a for r in runs.values() for a in r["30"]["0"] + r["30"]["1"]})
    runs["all"] = {str(len(union)): {"0": union}}  # a search that saw every arch
    assert bench.hv_shares(runs, surrogate)["hv"]["all"][str(len(union))][0] == pytest.approx(1)


def test_merge_puts_the_processes_samplers_side_by_side() -> None:
    a = {"runs": {"default": {"100": {"0": ["x"]}}}, "seconds": {"default": [1.0]},
         "command": "a", "seeds": 10, "loo_tau": 0.8}
    b = {"runs": {"gp": {"100": {"0": ["y"]}}}, "seconds": {"gp": [9.0]}, "command": "b",
         "seeds": 3, "loo_tau": 0.8}
    merged = bench.merge([a, b])
    assert set(merged["runs"]) == {"default", "gp"} and merged["seeds"] == 10
    assert np.isclose(merged["seconds"]["gp"][0], 9.0)


def test_merge_joins_one_samplers_seeds_from_two_processes() -> None:
    a = {"runs": {"gp": {"300": {"0": ["x"], "1": ["y"]}}}, "seconds": {"gp": [1.0, 2.0]},
         "command": "a", "seeds": 2, "loo_tau": 0.8}
    b = {"runs": {"gp": {"300": {"2": ["z"]}}}, "seconds": {"gp": [3.0]}, "command": "b",
         "seeds": 1, "loo_tau": 0.8}
    merged = bench.merge([a, b])
    assert merged["runs"]["gp"]["300"] == {"0": ["x"], "1": ["y"], "2": ["z"]}
    assert merged["seconds"]["gp"] == [1.0, 2.0, 3.0]


def test_pin_writes_the_truths_means_and_the_surrogate_reads_them(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "PINNED", tmp_path / "pinned.csv")
    n = bench.pin()
    archs, acc = bench.truth()
    truth = pd.read_csv(bench.DATA / "fidelity" / "truth.csv")
    means = truth[truth.space == "resnet"].groupby("arch")["acc_pcm@1d"].mean()
    assert n == len(archs) == len(means)
    assert np.allclose(acc, means.reindex(archs).values, rtol=0, atol=1e-12)
