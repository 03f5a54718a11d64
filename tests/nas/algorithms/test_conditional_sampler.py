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


def _run(attach: bool, n: int, seed: int = 0, options: dict | None = None) -> optuna.Study:
    # mutations only: the default turns them off on conditional spaces, these tests check them
    sampler = make_sampler("default", seed=seed,
                           options={"conditional_mutation_prob": 1.0} if options is None
                           else options)
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
    moves = study.sampler.moves
    # only TPE's own proposals may repeat (they go through on a conditional space)
    assert all(a not in archs[:i] for i, a in enumerate(archs) if moves[i] != "tpe")
    g3 = [SPACE.decode(a) for a in set(archs) if SPACE.decode(a)["groups"] >= 3]
    rest = [tuple(sorted((k, v) for k, v in p.items() if not k.startswith("g3_"))) for p in g3]
    assert len(set(rest)) < len(rest)  # some pair shares everything but group 3


def test_on_a_conditional_space_the_default_asks_tpe_and_lets_its_repeats_through() -> None:
    study = _run(True, n=120, options={})
    moves = [study.sampler.moves[t.number] for t in study.trials]
    assert set(moves[10:]) == {"tpe"}  # after the random start: grouped TPE only
    archs = [t.user_attrs["arch"] for t in study.trials]
    assert len(set(archs[:10])) == 10  # the random start is novel
    assert len(set(archs)) < len(archs)  # TPE repeated its front members, and they went through


@pytest.mark.parametrize("attach", [True, False], ids=["space", "generic"])
def test_on_a_conditional_space_the_default_proposes_what_grouped_tpe_proposes(attach) -> None:
    """After the same start, every proposal equals Optuna's multivariate grouped TPE's, repeats
    included: the default adds nothing of its own there (the reference is Optuna's sampler)."""
    start = [SPACE.decode(SPACE.random_arch(random.Random(i))) for i in range(10)]

    def archs(name: str, attach: bool) -> list[str]:
        sampler = make_sampler(name, seed=3)
        if attach:
            sampler.attach(space=SPACE)
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
        for params in start:
            study.enqueue_trial(params)
        out: list[str] = []
        study.optimize(lambda t: _objectives(out.append(SPACE.sample(t)) or out[-1]),
                       n_trials=40)
        return out

    assert archs("default", attach) == archs("tpe_mv", False)


def test_on_a_fixed_space_the_default_mixes_moves_and_never_repeats() -> None:
    space = get_space("nb201")
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=make_sampler("default", seed=0))

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = space.sample(trial)
        trial.set_user_attr("arch", arch)
        return float(sum(map(ord, arch)) % 97), float(len(set(arch)))

    study.optimize(objective, n_trials=80)
    moves = {study.sampler.moves[t.number] for t in study.trials[10:]}
    assert moves == {"tpe", "mutate"}
    archs = [t.user_attrs["arch"] for t in study.trials]
    assert len(set(archs)) == len(archs)


@pytest.mark.parametrize("name", ["mutation_prob", "conditional_mutation_prob"])
def test_a_share_outside_0_1_is_refused(name: str) -> None:
    from hwnas.common.errors import ConfigError

    with pytest.raises(ConfigError, match=f"{name}.*share"):
        make_sampler("default", seed=0, options={name: 1.5})


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
