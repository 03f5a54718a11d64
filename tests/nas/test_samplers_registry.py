"""Every registered sampler: seeded reproducibility on the NB201 table, constraints honoured;
the default sampler never repeats an architecture; bad options are clear errors."""

from __future__ import annotations

import optuna
import pytest
from study_files import TABLE

from hwnas.common.errors import ConfigError
from nas.samplers import list_samplers, make_sampler
from nas.tabular import TabularEvaluator
from search_spaces import get_space

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def lookup() -> TabularEvaluator:
    return TabularEvaluator(TABLE)


def _run(name: str, lookup: TabularEvaluator, *, n: int, seed: int = 0,
         budget: float | None = None, options: dict | None = None) -> optuna.Study:
    space = get_space("nb201")

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = space.sample(trial)
        trial.set_user_attr("arch", arch)
        row = lookup.lookup(arch)
        if budget is not None:
            trial.set_constraint("latency_ms", row["latency_ms"] - budget)
        return row["acc_digital"], row["latency_ms"]

    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=make_sampler(name, seed=seed, options=options))
    study.optimize(objective, n_trials=n)
    return study


# GP fits take seconds per trial on CPU: one model-based step after a 3-trial start.
_SLOW = {"gp": {"n_startup_trials": 3}}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
                                  for n in list_samplers()])
def test_same_seed_same_trials(name: str, lookup: TabularEvaluator) -> None:
    opts = _SLOW.get(name)
    n = 4 if opts else 24  # past every sampler's random start
    a = [t.params for t in _run(name, lookup, n=n, options=opts).trials]
    b = [t.params for t in _run(name, lookup, n=n, options=opts).trials]
    c = [t.params for t in _run(name, lookup, n=n - 1, seed=1, options=opts).trials]
    assert a == b
    assert a[:n - 1] != c


def test_default_never_repeats_and_respects_budget(lookup: TabularEvaluator) -> None:
    study = _run("default", lookup, n=80, budget=6.0)
    archs = [t.user_attrs["arch"] for t in study.trials]
    assert len(set(archs)) == len(archs)
    moves = [study.sampler.moves.get(t.number) for t in study.trials]
    assert moves[:10] == ["random"] * 10 and {"mutate", "tpe"} <= set(moves[10:])
    front = study.best_trials  # Optuna excludes infeasible trials from the front
    assert front and all(t.values[1] <= 6.0 for t in front)


def test_bad_sampler_options() -> None:
    with pytest.raises(ConfigError, match="n_startup_trials"):
        make_sampler("default", seed=0, options={"startup": 3})
    with pytest.raises(ConfigError, match="sampler"):
        make_sampler("annealing", seed=0)
