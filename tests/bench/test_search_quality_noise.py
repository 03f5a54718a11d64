"""The NB201 bench's noisy observations behave as a study's storage does: a repeated arch is
answered with its first observation, so repeating a noise-lucky arch gains a sampler nothing."""

from __future__ import annotations

import numpy as np
import optuna
import pytest

from bench.search import quality


class _Repeater(optuna.samplers.RandomSampler):
    """Random search that proposes only three archs, over and over: every trial after the third
    is a repeat."""

    def __init__(self, seed: int):
        super().__init__(seed=seed)
        self._first: dict[int, dict] = {}

    def sample_independent(self, study, trial, name, dist):  # noqa: ANN001, ANN201
        slot = trial.number % 3
        plan = self._first.setdefault(slot, {})
        if name not in plan:
            plan[name] = super().sample_independent(study, trial, name, dist)
        return plan[name]


@pytest.fixture(scope="module")
def table() -> quality.Table:
    return quality.Table("cpu")


def test_a_repeated_arch_is_answered_with_its_first_noisy_observation(table, monkeypatch):
    monkeypatch.setattr(quality, "make_sampler", lambda name, seed, options: _Repeater(seed))
    rows, observed = quality.run_search("repeater", 0, 12, table, noise=0.03)
    assert len(set(rows.tolist())) == 3
    for i in set(rows.tolist()):
        seen = observed[rows == i]
        assert len(seen) == 4 and np.all(seen == seen[0])  # the same answer every time
        assert seen[0][0] != table.values[i][0]  # ... and it is noisy
        assert np.all(seen[0][1:] == table.values[i][1:])  # costs are exact


def test_without_noise_the_observations_are_the_table(table):
    rows, observed = quality.run_search("random", 3, 20, table, noise=0.0)
    assert np.array_equal(observed, table.values[rows])
