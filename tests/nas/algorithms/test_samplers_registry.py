"""Every registered sampler: seeded reproducibility on the NB201 table, constraints honoured;
the default sampler never repeats an architecture; bad options are clear errors."""

from __future__ import annotations

import optuna
import pytest
from study_files import TABLE

from hwnas.common.errors import ConfigError
from nas.algorithms.samplers import list_samplers, make_sampler
from nas.study.table import TabularEvaluator
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
    with pytest.raises(ConfigError, match="hvc"):
        make_sampler("default", seed=0, options={"parent": "crowding"})


@pytest.mark.parametrize("reference", [None, [0.0, 20.0], [None, 12.0], [0.7, 5.0]])
def test_hvc_weights_follow_brute_force_contributions(reference: list | None) -> None:
    """Each front member's weight is its share of the exclusive hypervolume contributions (the
    hypervolume lost without it, computed one by one), against the study's reference where
    given (accuracy 0 is far past the evaluated range; a reference inside the range is moved
    to just past it), else just past the worst evaluated values."""
    import numpy as np

    from nas.algorithms.hybrid import HVC_REF, _hvc_weights
    from nas.algorithms.pareto import hypervolume, pareto_mask

    rng = np.random.default_rng(3)
    values = np.column_stack([rng.uniform(0.5, 0.9, 40), rng.uniform(1.0, 9.0, 40)])
    dirs = ["maximize", "minimize"]
    mask = pareto_mask(values, dirs)
    lo, hi = values.min(axis=0), values.max(axis=0)
    norm = (values - lo) / (hi - lo)
    norm[:, 0] = 1.0 - norm[:, 0]  # accuracy to a loss, as the sampler does
    front = norm[mask]
    given = reference or [None, None]
    ref = [HVC_REF if given[0] is None else max(HVC_REF, (hi[0] - given[0]) / (hi[0] - lo[0])),
           HVC_REF if given[1] is None else max(HVC_REF, (given[1] - lo[1]) / (hi[1] - lo[1]))]
    whole = hypervolume(front, ["minimize"] * 2, ref)
    lost = np.array([whole - hypervolume(np.delete(front, i, 0), ["minimize"] * 2, ref)
                     for i in range(len(front))])
    expected = lost / lost.sum()
    got = _hvc_weights(values, mask, dirs, reference)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    assert mask.sum() > 2 and lost.max() > 2 * lost.min()  # the weights do differ
    if reference == [0.0, 20.0]:  # far references: the ends weigh more than just past the worst
        ends = [int(np.argmax(values[mask][:, 0])), int(np.argmin(values[mask][:, 1]))]
        assert got[ends].sum() > _hvc_weights(values, mask, dirs)[ends].sum()


def test_a_reference_of_the_wrong_length_is_a_clear_error() -> None:
    import numpy as np

    from nas.algorithms.hybrid import _hvc_weights

    values = np.array([[0.9, 3.0], [0.8, 2.0], [0.7, 1.0]])
    with pytest.raises(ConfigError, match="one value per objective"):
        _hvc_weights(values, np.ones(3, bool), ["maximize", "minimize"], [0.0])


def test_a_single_objective_tie_on_the_front_picks_a_parent() -> None:
    """One objective: three trials tied at the best value are the front; the hypervolume rule
    has nothing to weigh (moocore needs two objectives), so each is a parent alike."""
    import numpy as np
    import optuna

    from nas.algorithms.hybrid import _pick_parent

    study = optuna.create_study(direction="maximize")
    for i, value in enumerate([0.9, 0.9, 0.9, 0.5]):
        study.add_trial(optuna.trial.create_trial(params={"x": i}, values=[value],
                                                  distributions={"x": optuna.distributions
                                                                 .IntDistribution(0, 9)}))
    rng = np.random.default_rng(0)
    picks = {_pick_parent(study, rng, "hvc").params["x"] for _ in range(60)}
    assert picks == {0, 1, 2}
