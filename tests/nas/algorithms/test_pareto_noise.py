"""Noise-aware fronts: which front members the stored standard errors can tell apart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from study_files import tabular_raw, write_study

from nas.algorithms.pareto import pareto_mask, unresolved
from nas.cli import main

DIRS = ["maximize", "minimize"]  # accuracy (noisy), latency (exact)


@pytest.mark.parametrize("seed", range(5))
def test_without_noise_resolved_members_are_the_front(seed):
    values = np.random.default_rng(seed).random((40, 2))
    flags = unresolved(values, DIRS, np.zeros_like(values))
    assert np.array_equal(~flags, pareto_mask(values, DIRS))


def test_a_slower_model_within_noise_is_unresolved():
    values = np.array([[0.80, 2.0], [0.81, 3.0], [0.90, 4.0]])
    se = np.array([[0.01, 0], [0.01, 0], [0.01, 0]])
    # 0.81 vs 0.80 is within 2 SE: the slower model is not shown to be more accurate
    assert unresolved(values, DIRS, se).tolist() == [False, True, False]
    # with a precise estimate every member of the front is resolved
    assert unresolved(values, DIRS, se / 100).tolist() == [False, False, False]


def test_more_noise_resolves_fewer_members():
    rng = np.random.default_rng(0)
    values = rng.random((60, 2))
    base = np.zeros_like(values)
    previous = unresolved(values, DIRS, base)
    for scale in (0.01, 0.05, 0.2):
        base[:, 0] = scale
        now = unresolved(values, DIRS, base)
        assert np.all(now >= previous)  # once unresolved, never resolved by more noise
        previous = now
    assert not previous.all()  # the fastest point can never be covered on latency


def test_robust_front_needs_stored_standard_errors(tmp_path: Path, capsys):
    path = write_study(tmp_path, tabular_raw("nose", n_trials=6))
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    assert main(["pareto", str(tmp_path / "nose")]) == 0  # the plain front still prints
    assert main(["pareto", str(tmp_path / "nose"), "--robust"]) != 0
    err = capsys.readouterr()
    assert "standard error" in err.out + err.err and "drop --robust" in err.out + err.err
