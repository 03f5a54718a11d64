"""The default sampler on a conditional (define-by-run) space: the ``resnet`` space asks
``g2_*``-``g4_*`` only when ``groups`` is large enough. Mutations must reach those choices, the
duplicate check must see them, and a planned trial must rebuild the planned arch."""

from __future__ import annotations

import math
import random

import numpy as np
import optuna
import pytest

from nas.algorithms import plans
from nas.algorithms.samplers import make_sampler
from search_spaces import get_space, list_spaces

optuna.logging.set_verbosity(optuna.logging.WARNING)
SPACE = get_space("resnet")
LATE = ("g2_", "g3_", "g4_")


def _objectives(arch: str) -> tuple[float, float]:
    """A cheap trade-off from the decoded arch: capacity up, a cost that grows with it down."""
    p = SPACE.decode(arch)
    gs = range(1, p["groups"] + 1)
    size = sum(p[f"g{g}_width"] * p[f"g{g}_blocks"] * p[f"g{g}_branches"] for g in gs)
    score = math.log(size) + 0.01 * p["stem"] - 0.05 * p["groups"]
    cost = size * (1 + 0.1 * p["groups"]) + p.get("g3_width", 0) * 3
    return score, cost


def _run(attach: bool, n: int, seed: int = 0) -> optuna.Study:
    sampler = make_sampler("default", seed=seed)
    if attach:
        sampler.attach(space=SPACE)

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = SPACE.sample(trial)
        trial.set_user_attr("arch", arch)
        return _objectives(arch)

    study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
    study.optimize(objective, n_trials=n)
    return study


@pytest.fixture(scope="module", params=[True, False], ids=["space", "generic"])
def study(request: pytest.FixtureRequest) -> optuna.Study:
    return _run(request.param, n=90)


def _changed(a: dict, b: dict) -> set[str]:
    """Names both trials asked with different values (a group added or dropped not counted)."""
    return {k for k in a.keys() & b.keys() if a[k] != b[k]} | (
        {"groups"} if a["groups"] != b["groups"] else set())


def test_mutations_change_conditional_choices(study: optuna.Study) -> None:
    by_number = {t.number: t for t in study.trials}
    changes = [_changed(by_number[p].params, by_number[c].params)
               for c, p in study.sampler.parents.items() if study.sampler.moves[c] == "mutate"]
    assert len(changes) >= 15
    assert all(changes)  # a child never equals its parent
    late = [c for c in changes if any(k.startswith(LATE) for k in c)]
    assert len(late) >= 3, changes  # the old sampler kept every g2-g4 value of the parent


def test_archs_that_differ_only_in_group_3_are_both_evaluated(study: optuna.Study) -> None:
    archs = [t.user_attrs["arch"] for t in study.trials]
    assert len(set(archs)) == len(archs)
    g3 = [SPACE.decode(a) for a in archs if SPACE.decode(a)["groups"] >= 3]
    rest = [tuple(sorted((k, v) for k, v in p.items() if not k.startswith("g3_"))) for p in g3]
    assert len(set(rest)) < len(rest)  # some pair shares everything but group 3


def test_same_seed_same_archs_with_a_space() -> None:
    a = [t.user_attrs["arch"] for t in _run(True, n=25).trials]
    b = [t.user_attrs["arch"] for t in _run(True, n=25).trials]
    c = [t.user_attrs["arch"] for t in _run(True, n=25, seed=1).trials]
    assert a == b and a != c


@pytest.mark.parametrize("name", list_spaces())
def test_plan_of_an_arch_rebuilds_it(name: str) -> None:
    space, rng = get_space(name), np.random.default_rng(0)
    for arch in [space.example] + [space.random_arch(random.Random(i)) for i in range(5)]:
        params = plans.params_of(space, arch, rng)
        assert plans.record(space, params, np.random.default_rng(1))[0] == arch


def test_repeat_is_judged_on_every_asked_parameter() -> None:
    a = SPACE.decode("rn:s32-d2r1c32-d2r2c64-d1r3c128")
    b = {**a, "g3_width": 96}
    assert plans.is_repeat(a, [plans.items(a)]) is not None
    assert plans.is_repeat(b, [plans.items(a)]) is None
    shorter = SPACE.decode("rn:s32-d2r1c32")
    assert plans.is_repeat(a, [plans.items(shorter)]) is None  # groups differs


def test_a_space_whose_decode_is_not_its_parameters_is_named() -> None:
    class Broken:
        name = "broken"

        def decode(self, arch: str) -> dict:
            return {}

        def sample(self, trial) -> str:  # noqa: ANN001
            return f"x{trial.suggest_int('a', 0, 9)}"

    with pytest.raises(ValueError, match="broken.*decode"):
        plans.params_of(Broken(), "x100", np.random.default_rng(3))
