"""The default sampler weighs a mutation's parent against the hypervolume reference the study's
front is scored by: the study fixes it before any trial where it can (``fixed_reference``), and
the driver hands it over (``attach_sampler``)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from nas.algorithms.samplers import make_sampler
from nas.results.summary import reference
from nas.search.budget_filter import attach_sampler
from nas.study.files import load_study


def test_the_quickstart_fixes_accuracy_zero_and_its_latency_budget() -> None:
    cfg = load_study("quickstart")
    assert cfg.fixed_reference() == [0.0, 5.0]
    values = np.array([[0.7, 3.0], [0.6, 1.0]])
    assert reference(cfg, values) == [0.0, 5.0]  # the front is scored by the same point


def test_a_given_reference_wins_and_an_unbounded_cost_is_left_to_the_run() -> None:
    cfg = load_study("quickstart", {"pareto.reference": {"latency_ms": 8.0}})
    assert cfg.fixed_reference() == [0.0, 8.0]
    free = load_study("quickstart", {"constraints": []})
    assert free.fixed_reference() == [0.0, None]
    values = np.array([[0.7, 3.0], [0.6, 1.0]])
    assert reference(free, values) == [0.0, 3.0 + 0.1 * 2.0]  # this run's worst + 10%


def test_the_driver_hands_the_reference_to_the_sampler() -> None:
    cfg = load_study("quickstart")
    sampler = make_sampler("default", seed=0)
    # a table evaluator: no pre-filter to build, the space and the reference still go over
    evaluator = SimpleNamespace(cfg=cfg, budgets=cfg.budgets(), table=object(),
                                space=cfg.search_space())
    assert attach_sampler(sampler, evaluator) is None
    assert sampler.reference == [0.0, 5.0]
    mine = make_sampler("default", seed=0, options={"reference": [0.5, 4.0]})
    attach_sampler(mine, evaluator)
    assert mine.reference == [0.5, 4.0]  # an option the study file gave stays
