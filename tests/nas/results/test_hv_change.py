"""The hypervolume training bought (``nas.results.hv_change``): the trained front's and the free
front's as predicted from the trained candidates' line on log prior, against a hand computation."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import create_trial
from study_files import live_raw

from nas.algorithms.pareto import hypervolume
from nas.results.hv_change import hv_change
from nas.study.config import validate_study

CFG = validate_study(live_raw("hv"))
KEY = CFG.objectives_resolved()[0].key
DIRS = ["maximize", "minimize"]
REF = [0.0, 5.0]
LOOKS = {"a": (40.0, 4.0), "b": (20.0, 2.0), "c": (10.0, 1.0), "d": (30.0, 3.0), "e": (5.0, 0.5)}


def _trial(number: int, arch: str, values: list[float], **attrs: Any) -> Any:
    t = create_trial(values=values, params={"a": arch}, user_attrs={"arch": arch, **attrs},
                     distributions={"a": CategoricalDistribution(list(LOOKS))})
    t.number = number
    return t


def _study(acc: dict[str, float], se: float) -> tuple[optuna.Study, list[Any]]:
    looks = [_trial(i, a, [p, lat], rung=0, prior="synflow", prior_score=p)
             for i, (a, (p, lat)) in enumerate(LOOKS.items())]
    trained = [_trial(10 + i, a, [v, LOOKS[a][1]], rung=1, **{f"{KEY}_se": se})
               for i, (a, v) in enumerate(acc.items())]
    study = optuna.create_study(directions=DIRS)
    study.add_trials([*looks, *trained])
    return study, trained


def test_predicted_front_is_the_line_on_log_prior_and_the_trained_hv_is_measured() -> None:
    acc = {"a": 0.80, "b": 0.72, "c": 0.65, "e": 0.50}  # d never trained
    study, trained = _study(acc, se=0.02)
    got = hv_change(CFG, study, trained, list(LOOKS), REF, draws=50)
    assert got is not None and (got.n_trained, got.n_free, got.draws) == (4, 5, 50)
    values = np.array([[v, LOOKS[a][1]] for a, v in acc.items()])
    assert got.trained == pytest.approx(hypervolume(values, DIRS, REF))
    x = np.log([LOOKS[a][0] for a in acc])
    slope, icept = np.polyfit(x, list(acc.values()), 1)
    want = np.array([[slope * np.log(p) + icept, lat] for p, lat in LOOKS.values()])
    assert got.predicted == pytest.approx(hypervolume(want, DIRS, REF))
    assert got.trained_se > 0 and got.predicted_se > 0
    # the SE is the scoring noise's: a tenth of the SE gives about a tenth of the spread
    quiet = hv_change(CFG, study_quiet := _study(acc, se=0.002)[0],
                      [t for t in study_quiet.trials if t.user_attrs.get("rung") == 1],
                      list(LOOKS), REF, draws=50)
    assert quiet is not None and quiet.trained_se < got.trained_se / 5
    assert hv_change(CFG, study, trained, list(LOOKS), REF, draws=50) == got  # seeded


def test_nothing_to_fit_or_no_se_gives_none() -> None:
    study, trained = _study({"a": 0.8, "b": 0.7}, se=0.02)
    assert hv_change(CFG, study, trained, list(LOOKS), REF) is None  # two points: no line
    plain = optuna.create_study(directions=DIRS)
    bare = [_trial(10 + i, a, [0.7, 1.0], rung=1) for i, a in enumerate("abc")]
    plain.add_trials(bare)
    assert hv_change(CFG, plain, bare, list(LOOKS), REF) is None  # no rung 0, no SE


def test_the_report_states_both_hypervolumes_beside_what_training_changed() -> None:
    from nas.results import report, summary

    study, _ = _study({"a": 0.80, "b": 0.72, "c": 0.65, "e": 0.50}, se=0.02)
    page = report._change_section(CFG, study, summary.front(CFG, study))
    assert "<h2>What training changed</h2>" in page
    assert "the 4 trained candidates" in page and "the free front&#x27;s 5 members" in page
    assert "not trained" in page  # d, the member never trained
