"""``HighestRungSampler``'s shadow study: one trial per arch at its highest completed rung, every
trial at its own number, and otherwise the wrapped sampler's answers unchanged."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from nas.algorithms.samplers import make_sampler
from nas.search.rung_sampler import ATTRS, HighestRungSampler
from nas.search.schedule import SuccessiveHalving, latest_rungs
from nas.study.schedule import ScheduleCfg

optuna.logging.set_verbosity(optuna.logging.WARNING)
DIST = {"x": IntDistribution(0, 99)}


def _random_study(seed: int) -> optuna.Study:
    """Archs that went up 0-2 rungs with random values, a failed candidate, a running new
    candidate and a queued promotion, in a shuffled order."""
    rng = np.random.default_rng(seed)
    rows = []
    for x in range(12):
        for rung in range(int(rng.integers(0, 3)) + 1):
            rows.append((x, rung, [float(rng.random()), float(rng.random())]))
    rng.shuffle(rows)
    study = optuna.create_study(directions=["maximize", "minimize"])
    for x, rung, values in sorted(rows, key=lambda r: r[1]):  # a rung after the one below it
        study.add_trial(create_trial(params={"x": x}, distributions=DIST, values=values,
                                     user_attrs={"arch": f"a{x}", "rung": rung}))
    study.add_trial(create_trial(state=TrialState.FAIL, params={"x": 50}, distributions=DIST,
                                 user_attrs={"arch": "a50", "rung": 0}))
    study.enqueue_trial({"x": 0}, user_attrs={"arch": "a0", "rung": 3, "promotion": "a0@3"})
    study.add_trial(create_trial(state=TrialState.RUNNING, params={"x": 60},
                                 distributions=DIST, user_attrs={"rung": 0}))
    return study


def _highest(study: optuna.Study) -> dict[str, tuple[int, list[float]]]:
    """Brute force: each arch's (highest completed rung, its values)."""
    best: dict[str, tuple[int, list[float]]] = {}
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        arch, rung = t.user_attrs["arch"], t.user_attrs["rung"]
        if rung > best.get(arch, (-1, []))[0]:
            best[arch] = (rung, t.values)
    return best


@pytest.mark.parametrize("seed", range(5))
def test_the_view_holds_one_trial_per_arch_with_its_highest_rungs_values(seed: int) -> None:
    study = _random_study(seed)
    real = study.get_trials()
    shadow, mine = HighestRungSampler(optuna.samplers.RandomSampler()).view(study, real[-1])
    view = shadow.get_trials()
    complete = [t for t in view if t.state == TrialState.COMPLETE]
    assert {t.user_attrs["arch"]: (t.user_attrs["rung"], t.values) for t in complete} == \
        _highest(study)
    assert len(complete) == len(_highest(study))  # one observation per arch
    assert [t.number for t in view] == [t.number for t in real]  # every trial at its number
    kept = {t.number for t in latest_rungs(real)} | {real[-1].number}
    for r, v in zip(real, view, strict=True):  # a kept trial is a copy; any other holds its
        if r.number in kept:                   # parameters and measured costs, as a FAIL trial
            assert (v.state, v.params, v.values, v.user_attrs) == (r.state, r.params, r.values,
                                                                    r.user_attrs)
        else:
            assert (v.state, v.params, v.values, v.user_attrs, v.system_attrs) == (
                TrialState.FAIL, r.params, None, r.user_attrs, {})
    states = [v.state for r, v in zip(real, view, strict=True) if r.state != TrialState.COMPLETE]
    assert states == [TrialState.FAIL, TrialState.FAIL, TrialState.RUNNING]  # failed, promotion
    assert mine.number == real[-1].number and mine.params == {"x": 60}


def _space(trial: optuna.Trial) -> float:
    x = trial.suggest_int("x", 0, 30)
    op = trial.suggest_categorical("op", ["a", "b", "c"])
    return (x - 17) ** 2 + {"a": 0, "b": 3, "c": 5}[op]


@pytest.mark.parametrize("name", ["default", "tpe", "tpe_mv", "random"])
def test_without_rungs_the_wrapped_sampler_proposes_what_it_would_alone(name: str) -> None:
    """Nothing to hide: the shadow is the whole study, so under one seed the wrapped sampler
    makes the same proposals as the bare one (and the default sampler the same moves)."""
    runs = []
    for wrap in (False, True):
        sampler = make_sampler(name, seed=3)
        study = optuna.create_study(sampler=HighestRungSampler(sampler) if wrap else sampler)
        study.optimize(_space, n_trials=25)
        runs.append(([t.params for t in study.trials], getattr(sampler, "moves", None)))
    assert runs[0] == runs[1]


def _generations(study: optuna.Study) -> list[int]:
    """Each trial's NSGA-II generation, where the bare sampler or the wrapper keeps it."""
    out = []
    for t in study.trials:
        attrs = {**t.system_attrs, **study.user_attrs.get(f"{ATTRS}{t.number}", {})}
        out += [v for k, v in attrs.items() if k.endswith(":generation")]
    return out


def test_without_rungs_nsga2_assigns_the_generations_it_would_alone() -> None:
    """NSGA-II caches each generation's parents on the study, which a shadow does not keep: it
    recomputes the same parents (in another order), so only the generations are compared."""
    studies = []
    for wrap in (False, True):
        sampler = make_sampler("nsga2", seed=3, options={"population_size": 6})
        studies.append(optuna.create_study(
            sampler=HighestRungSampler(sampler) if wrap else sampler))
        studies[-1].optimize(_space, n_trials=25)
    bare, wrapped = (_generations(s) for s in studies)
    assert bare == wrapped == sorted(bare) and len(bare) == 25 and bare[-1] == 4
    first = [[t.params for t in s.trials[:12]] for s in studies]  # random start, first offspring
    assert first[0] == first[1]


def _scheduled(sampler: optuna.samplers.BaseSampler, n_trials: int = 30) -> optuna.Study:
    sh = SuccessiveHalving(ScheduleCfg(type="sh", eta=3, min_budget=1, max_budget=9),
                           ["minimize"])
    study = optuna.create_study(sampler=HighestRungSampler(sampler))

    def objective(trial: optuna.Trial, budget: float) -> float:
        value = _space(trial)
        trial.set_user_attr("arch", f"{trial.params['x']}{trial.params['op']}")
        return value + 10 / budget

    study.optimize(sh.wrap(objective), n_trials=n_trials, callbacks=[sh])
    return study


def test_a_scheduled_study_is_reproducible_under_its_seed() -> None:
    def run(seed: int) -> list[tuple]:
        study = _scheduled(make_sampler("default", seed=seed))
        moves = study.sampler.moves
        return [(t.params, t.user_attrs["rung"], moves.get(t.number)) for t in study.trials]

    first = run(0)
    assert max(r for _, r, _ in first) == 2  # promotions happened
    assert run(0) == first and run(1) != first


def test_what_the_sampler_writes_on_a_trial_reaches_later_workers() -> None:
    """NSGA-II keeps each trial's generation on the trial: a second wrapper (another worker, a
    resumed run) sees the generations the first one's sampler wrote."""
    study = _scheduled(make_sampler("nsga2", seed=0, options={"population_size": 4}))
    key = "NSGAIISampler:generation"
    stored = {int(k[len(ATTRS):]): v for k, v in study.user_attrs.items() if k.startswith(ATTRS)}
    sampled = [t.number for t in study.trials if "promotion" not in t.user_attrs]
    assert set(sampled) <= set(stored) and max(v[key] for v in stored.values()) >= 2
    shadow, _ = HighestRungSampler(make_sampler("nsga2", seed=1)).view(study, study.trials[-1])
    seen = shadow.get_trials(states=(TrialState.COMPLETE,))
    for t in seen:  # a promotion's parameters were fixed: no sampler gave it a generation
        assert t.system_attrs.get(key) == stored.get(t.number, {}).get(key)
    assert sum(key in t.system_attrs for t in seen) >= len(seen) // 2


def test_the_wrapper_pickles_without_its_shadow() -> None:
    import pickle

    wrapped = HighestRungSampler(make_sampler("default", seed=0))
    study = _scheduled(wrapped, n_trials=3)
    assert wrapped._shadow is not None
    again = pickle.loads(pickle.dumps(wrapped))
    assert again._shadow is None and again.moves == wrapped.moves
    assert isinstance(study.sampler, HighestRungSampler)


def test_the_shadow_is_built_once_per_trial_when_nothing_else_changes() -> None:
    wrapped = HighestRungSampler(optuna.samplers.RandomSampler(seed=0))
    builds: list[int] = []
    real = wrapped._build
    wrapped._build = lambda *a: builds.append(a[2]) or real(*a)  # type: ignore[method-assign]
    study = optuna.create_study(sampler=wrapped)
    study.optimize(_space, n_trials=4)  # per trial: before, 2 suggests, after
    assert builds == [0, 1, 2, 3]
