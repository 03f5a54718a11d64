"""Pareto fronts and hypervolume: brute-force references, known values, invariants."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import (
    hypervolume,
    hypervolume_history,
    non_dominated_sort,
    pareto_mask,
    reference_point,
    to_loss,
)


def _brute_mask(values: np.ndarray, dirs: list[str]) -> np.ndarray:
    loss = to_loss(values, dirs)
    return np.array([not any(np.all(o <= p) and np.any(o < p) for o in loss) for p in loss])


@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("seed", range(5))
def test_mask_matches_brute_force(m: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5, size=(60, m)).astype(float)  # many ties and duplicates
    dirs = ["maximize", "minimize", "minimize", "maximize"][:m]
    np.testing.assert_array_equal(pareto_mask(values, dirs), _brute_mask(values, dirs))


def test_sort_layers_are_fronts() -> None:
    rng = np.random.default_rng(1)
    values = rng.random((80, 2))
    dirs = ["maximize", "minimize"]
    ranks = non_dominated_sort(values, dirs)
    np.testing.assert_array_equal(ranks == 0, pareto_mask(values, dirs))
    for r in range(1, ranks.max() + 1):  # each layer is the front once better layers are gone
        rest = ranks >= r
        np.testing.assert_array_equal(ranks[rest] == r, pareto_mask(values[rest], dirs))


def test_hypervolume_known_2d() -> None:
    values = np.array([[0.9, 1.0], [0.8, 0.5], [0.5, 0.2], [0.4, 0.9]])  # the last is dominated
    assert hypervolume(values, ["maximize", "minimize"], [0.0, 2.0]) == pytest.approx(1.45)
    np.testing.assert_allclose(hypervolume_history(values, ["maximize", "minimize"], [0, 2]),
                               [0.9, 1.3, 1.45, 1.45])


def test_hypervolume_3d_matches_inclusion_exclusion() -> None:
    pts = np.array([[1.0, 2.0, 3.0], [2.0, 1.0, 2.0], [3.0, 3.0, 1.0]])
    ref = np.array([4.0, 4.0, 4.0])
    total = 0.0  # exact union volume of the boxes [p, ref] by inclusion-exclusion
    for k in range(1, 4):
        for combo in itertools.combinations(pts, k):
            corner = np.max(combo, axis=0)
            total += (-1) ** (k + 1) * np.prod(ref - corner)
    assert hypervolume(pts, ["minimize"] * 3, ref) == pytest.approx(total)


def test_hypervolume_invariants() -> None:
    rng = np.random.default_rng(2)
    values = rng.random((40, 2))
    dirs, ref = ["minimize", "minimize"], [1.0, 1.0]
    hv = hypervolume(values, dirs, ref)
    assert hypervolume(values[pareto_mask(values, dirs)], dirs, ref) == pytest.approx(hv)
    assert hypervolume(values[::-1], dirs, ref) == pytest.approx(hv)
    assert np.all(np.diff(hypervolume_history(values, dirs, ref)) >= -1e-12)
    assert hypervolume(np.array([[2.0, 2.0]]), dirs, ref) == 0.0  # outside the reference box


def test_reference_point_rules() -> None:
    values = np.array([[0.9, 10.0], [0.5, 2.0]])
    dirs = ["maximize", "minimize"]
    ref = reference_point(values, dirs, worst=[0.0, None])
    assert ref[0] == 0.0 and ref[1] == pytest.approx(10.0 + 0.1 * 8.0)
    ref = reference_point(values, dirs, worst=[0.0, None], explicit=[0.3, 20.0])
    assert list(ref) == [0.3, 20.0]


def test_bad_input() -> None:
    with pytest.raises(ConfigError, match="maximize"):
        pareto_mask(np.zeros((3, 2)), ["minimise", "maximize"])
    with pytest.raises(ConfigError, match="n_objectives"):
        pareto_mask(np.zeros((3, 3)), ["minimize", "maximize"])
