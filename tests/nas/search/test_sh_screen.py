"""The screen (``schedule.looks`` with ``prior_promote: front``): look at many candidates for free,
train only the free front of all of them, then stop.

The rung-0 trials run the real prior rung (seeded model, measured latency, SynFlow) on
scikit-learn's digits; the trained rung is a stand-in that records which candidates it was asked
to train (what promotion decides is the subject here, not the training).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
import pytest
from optuna.trial import TrialState
from study_files import live_raw

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import non_dominated_sort
from nas.search.schedule import SCREEN_DONE, FirstRung, Record, pending
from nas.study.config import StudyConfig, validate_study

SCREEN = {"type": "sh", "prior": "synflow", "prior_promote": "front", "eta": 3,
          "min_budget": 100, "max_budget": 100, "resource": "images"}
DIRS = ["maximize", "minimize"]


def _cfg(n_trials: int = 20, **schedule: Any) -> StudyConfig:
    return validate_study(live_raw("screen", n_trials=n_trials, schedule={**SCREEN, **schedule},
                                   train={"steps": 3, "batch_size": 32, "lr": 0.05}))


def _records(values: list[tuple[float, float]], feasible: list[bool] | None = None) -> list[Record]:
    feasible = feasible or [True] * len(values)
    pairs = enumerate(zip(values, feasible, strict=True))
    return [Record(number=i, arch=f"a{i}", params={}, rung=0, bracket=0, done=True,
                   feasible=ok, values=v) for i, (v, ok) in pairs]


# -- the rule ------------------------------------------------------------------------------------
def test_front_rule_promotes_exactly_the_free_front_brute_force() -> None:
    rng = np.random.default_rng(0)
    for _ in range(20):
        values = [tuple(map(float, p)) for p in rng.normal(size=(int(rng.integers(1, 15)), 2))]
        due = pending(_records(values), DIRS, 3, 1, FirstRung(front=True))
        dominated = {i for i, (a, b) in enumerate(values)
                     if any(c >= a and d <= b and (c, d) != (a, b) for c, d in values)}
        assert {r.number for r, rung in due} == set(range(len(values))) - dominated
        assert all(rung == 1 for _, rung in due)
        assert len(due) == int(np.sum(non_dominated_sort(np.array(values), DIRS) == 0))


def test_no_promotion_before_the_last_look_and_infeasible_looks_count() -> None:
    values = [(1.0, 1.0), (2.0, 2.0), (0.5, 3.0), (3.0, 0.5)]
    rule = FirstRung(front=True, looks=4)
    assert pending(_records(values[:3]), DIRS, 3, 1, rule) == []
    # the fourth look is over a budget: it is a look all the same, and never promoted
    due = pending(_records(values, [True, True, True, False]), DIRS, 3, 1, rule)
    assert {r.arch for r, _ in due} == {"a0", "a1"}


def test_share_rule_is_unchanged() -> None:
    values = [(float(i), float(i)) for i in range(9)]  # one front of 9 points
    assert len(pending(_records(values), DIRS, 3, 1, FirstRung())) == 3
    assert len(pending(_records(values), DIRS, 3, 1, FirstRung(share=0.5))) == 4
    assert len(pending(_records(values), DIRS, 3, 1, FirstRung(front=True))) == 9


def test_capped_front_keeps_its_extremes_and_spreads_the_rest() -> None:
    values = [(float(i), float(i)) for i in range(9)]  # one front of 9 evenly spaced points
    values[4] = (4.4, 4.4)  # crowding: the isolated ones go first after the two extremes
    due = pending(_records(values), DIRS, 3, 1, FirstRung(front=True, most=3))
    assert len(due) == 3 and {"a0", "a8"} <= {r.arch for r, _ in due}
    values.append((0.5, 7.0))  # dominated: never promoted, whatever the cap
    due = pending(_records(values), DIRS, 3, 1, FirstRung(front=True, most=20))
    assert {r.arch for r, _ in due} == {f"a{i}" for i in range(9)}


# -- a live screen ---------------------------------------------------------------------------------
ENERGY = [{"metric": "accuracy", "hw": "pcm", "time": "1d"}, {"metric": "latency"},
          {"metric": "energy"}]


@pytest.mark.slow
@pytest.mark.parametrize("objectives", [None, ENERGY], ids=["acc-latency", "acc-latency-energy"])
def test_screen_looks_then_trains_its_free_front_then_stops(objectives: list | None) -> None:
    from nas.search import schedule

    cfg = _cfg(looks=6) if objectives is None else validate_study(live_raw(
        "screen", n_trials=20, schedule={**SCREEN, "looks": 6}, objectives=objectives,
        train={"steps": 3, "batch_size": 32, "lr": 0.05}))
    sh = schedule.make(cfg)
    assert sh is not None and sh.prior is not None
    trained: list[str] = []

    def train(trial: optuna.Trial, budget: float | None = None) -> tuple[float, ...]:
        parent = trial.study.trials[trial.user_attrs["parent"]]
        trained.append(parent.user_attrs["arch"])
        return (0.5, *parent.values[1:])  # the look's measured costs, every cost objective

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=sh.directions,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(sh.wrap(train), n_trials=cfg.n_trials, callbacks=[sh])
    looks = [t for t in study.trials if t.user_attrs.get("rung") == 0]
    assert len(looks) == 6 and all(t.state == TrialState.COMPLETE for t in looks)
    feasible = [t for t in looks if all(v <= 0 for v in t.constraints.values())]
    assert len(feasible[0].values) == len(cfg.objectives_resolved())
    ranks = non_dominated_sort(np.array([t.values for t in feasible]), sh.directions)
    front = {t.user_attrs["arch"] for t, r in zip(feasible, ranks, strict=True) if r == 0}
    assert sorted(trained) == sorted(front)  # every free-front member trained, nothing else
    last = study.trials[-1]  # the first new candidate after the screen ends the worker
    assert last.state == TrialState.PRUNED and SCREEN_DONE in last.user_attrs
    assert len(study.trials) == 6 + len(front) + 1 < cfg.n_trials


def _screen_with_scores(score: Any, **schedule: Any) -> tuple[optuna.Study, list[str]]:
    """A live screen of 10 looks whose stand-in training scores a promotion ``score(prior,
    arch)`` -> (accuracy, its SE); returns the study and the archs trained, in order."""
    from nas.search import schedule as sched

    cfg = _cfg(n_trials=40, looks=10, **schedule)
    sh = sched.make(cfg)
    assert sh is not None
    trained: list[str] = []

    def train(trial: optuna.Trial, budget: float | None = None) -> tuple[float, ...]:
        parent = trial.study.trials[trial.user_attrs["parent"]]
        acc, se = score(parent.user_attrs["prior_score"], parent.user_attrs["arch"])
        trial.set_user_attr("arch", parent.user_attrs["arch"])  # as the study's objective does
        trial.set_user_attr(f"{sh.keys[0]}_se", se)
        trained.append(parent.user_attrs["arch"])
        return (acc, parent.user_attrs["latency_ms"])

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=sh.directions,
                                sampler=optuna.samplers.RandomSampler(seed=1))
    study.optimize(sh.wrap(train), n_trials=cfg.n_trials, callbacks=[sh])
    return study, trained


@pytest.mark.slow
def test_stop_share_ends_training_once_scores_only_repeat_the_prior() -> None:
    from nas.search.stop_share import STOPPED_BY_SHARE

    def on_the_line(prior: float, arch: str) -> tuple[float, float]:
        return 0.5 + 0.05 * float(np.log(prior)), 0.02  # no residual: all noise

    study, trained = _screen_with_scores(on_the_line, stop_share=0.25)
    promoted = [t for t in study.trials if "promotion" in t.user_attrs]
    assert len(promoted) > 3, "the screen's free front must be larger than 3 for this test"
    assert len(trained) == 3  # the share is known from three on, and it is 0
    stopped = [t for t in promoted if STOPPED_BY_SHARE in t.user_attrs]
    assert len(stopped) == len(promoted) - 3
    assert all(t.state == TrialState.PRUNED and "0.00" in t.user_attrs[STOPPED_BY_SHARE]
               for t in stopped)

    def beyond(prior: float, arch: str) -> tuple[float, float]:  # residuals 10x the SE
        return 0.5 + 0.05 * float(np.log(prior)) + 0.2 * (sum(map(ord, arch)) % 7 - 3) / 3, 0.001

    study, trained = _screen_with_scores(beyond, stop_share=0.25)
    promoted = [t for t in study.trials if "promotion" in t.user_attrs]
    assert len(trained) == len(promoted) > 3  # training moves ranks: every member trained


def test_signal_share_agrees_with_a_hand_fit() -> None:
    from nas.algorithms.shrink import shrunk, signal_share

    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(3, 12))
        prior, se = rng.uniform(1, 50, n), rng.uniform(0.005, 0.05, n)
        y = 0.1 * np.log(prior) + rng.normal(0, rng.uniform(0.001, 0.1), n)
        design = np.column_stack([np.log(prior), np.ones(n)])
        resid = y - design @ np.linalg.lstsq(design, y, rcond=None)[0]
        noise = float(np.median(se)) ** 2
        signal = max(float(resid.var(ddof=1)) - noise, 0.0)
        want = signal / (signal + noise)
        assert signal_share(y, prior, se) == pytest.approx(want, abs=1e-9)
        # the share is the weight shrunk() keeps of each residual
        assert np.allclose(shrunk(y, prior, se), y - resid * (1 - want))
    assert signal_share([0.5, 0.6], [1.0, 2.0], [0.01, 0.01]) is None


# -- bad options -----------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule, where", [
    ({"looks": 20}, "schedule.looks"),
    ({"looks": 0}, "schedule.looks"),
    ({"prior_share": 0.5}, "schedule.prior_share"),
    ({"prior": "none"}, "schedule.prior_promote"),
    ({"promote_max": 0}, "schedule.promote_max"),
    ({"prior_promote": "share", "promote_max": 3}, "schedule.promote_max"),
    ({"looks": 5, "stop_share": 1.5}, "schedule.stop_share"),
    ({"stop_share": 0.25}, "schedule.stop_share"),  # no looks: no screen to stop
    ({"prior": "none", "prior_promote": "share", "stop_share": 0.25}, "schedule.stop_share"),
])
def test_bad_screen_options_are_config_errors(schedule: dict, where: str) -> None:
    with pytest.raises(ConfigError) as err:
        _cfg(**schedule)
    assert where in str(err.value)


# -- what training changed ------------------------------------------------------------------
def test_front_change_sorts_the_free_front_by_what_training_did() -> None:
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    from nas.results.free_front import front_change

    def trial(number: int, values: list[float], arch: str, prior: bool) -> Any:
        attrs: dict[str, Any] = {"rung": 0 if prior else 1, "arch": arch}
        if prior:
            attrs["prior"] = "synflow"
        t = create_trial(values=values, params={"a": arch}, user_attrs=attrs,
                         distributions={"a": CategoricalDistribution(list("abcde"))})
        t.number = number
        return t

    looks = [trial(0, [30.0, 3.0], "a", True), trial(1, [20.0, 2.0], "b", True),
             trial(2, [10.0, 1.0], "c", True), trial(3, [5.0, 2.5], "d", True)]  # d: dominated
    trained = [trial(4, [0.80, 3.0], "a", False), trial(5, [0.70, 2.0], "b", False),
               trial(6, [0.75, 2.6], "d", False)]
    study = optuna.create_study(directions=DIRS)
    study.add_trials([*looks, *trained])
    change = front_change(_cfg(), study, [trained[0], trained[2]])  # b lost to d once trained
    assert change is not None and change.n_looks == 4
    assert change.free == ["a", "b", "c"]
    assert (change.kept, change.dropped, change.untrained, change.added) == (
        ["a"], ["b"], ["c"], ["d"])
    plain = optuna.create_study(directions=DIRS)
    plain.add_trials(trained)
    assert front_change(_cfg(), plain, trained) is None  # no rung 0: nothing to compare
