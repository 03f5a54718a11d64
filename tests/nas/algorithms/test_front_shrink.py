"""``pareto.shrink: prior``: the front is picked on trained accuracies shrunk toward their trend
on the rung-0 prior (``nas.algorithms.shrink``), against brute force; the measured values and the
hypervolume stay; a study that cannot shrink says why; a study without a positive prior is a
config error."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import create_trial
from study_files import live_raw

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import pareto_mask
from nas.algorithms.shrink import shrunk
from nas.results import summary
from nas.study.config import validate_study

PRIOR = {"type": "sh", "prior": "synflow", "eta": 3, "min_budget": 100, "max_budget": 100,
         "resource": "images"}
ARCHS = [f"rn:s16-d1r1c{w}" for w in (16, 24, 32, 48)] + ["rn:s24-d1r1c16", "rn:s24-d1r1c24"]
DIST = {"a": CategoricalDistribution(ARCHS)}


def _cfg(shrink: str = "prior", **changes: Any):  # noqa: ANN202
    return validate_study(live_raw("shrink", schedule=PRIOR, pareto={"shrink": shrink},
                                   **changes))


def _add(study: optuna.Study, arch: str, values: list[float], **attrs: Any) -> None:
    study.add_trial(create_trial(values=values, params={"a": arch}, distributions=DIST,
                                 user_attrs={"arch": arch, **attrs}))


def _study(acc: list[float], lat: list[float], prior: list[float], se: float,
           skip_prior: int | None = None) -> optuna.Study:
    """Rung-0 SynFlow scores of every arch, then each arch trained at rung 1."""
    study = optuna.create_study(directions=["maximize", "minimize"])
    for i, arch in enumerate(ARCHS[: len(acc)]):
        if i != skip_prior:
            _add(study, arch, [prior[i], lat[i]], rung=0, prior="synflow", prior_score=prior[i])
    for i, arch in enumerate(ARCHS[: len(acc)]):
        _add(study, arch, [acc[i], lat[i]], rung=1, **{"acc_pcm@1d_se": se,
                                                      "acc_pcm@1d_repeats": 3})
    return study


def test_the_front_is_the_pareto_set_of_the_shrunk_accuracies() -> None:
    rng = np.random.default_rng(0)
    prior = np.exp(rng.uniform(0, 6, 6))
    acc = 0.7 + 0.02 * np.log(prior) + rng.normal(0, 0.02, 6)
    lat = rng.uniform(1, 5, 6)
    study = _study(list(acc), list(lat), list(prior), se=0.015)
    got = summary.front(_cfg(), study)
    want_acc = shrunk(acc, prior, np.full(6, 0.015))
    want = {ARCHS[i] for i in np.flatnonzero(pareto_mask(np.c_[want_acc, lat],
                                                         ["maximize", "minimize"]))}
    assert {t.user_attrs["arch"] for t in got.trials} == want
    assert got.shrink_note == "" and got.picked_on is not None
    for t in got.trials:  # each member's picked value is its shrunk accuracy; values stay
        i = ARCHS.index(t.user_attrs["arch"])
        assert got.picked_on[t.number] == pytest.approx([want_acc[i], lat[i]])
        assert t.values == pytest.approx([acc[i], lat[i]])
    plain = summary.front(_cfg("off"), study)
    assert plain.picked_on is None and got.hypervolume == plain.hypervolume


def test_a_noisy_lead_against_the_prior_gives_way() -> None:
    # Two archs at the same latency: A measures 0.5 pt higher, but its SynFlow sits far below
    # B's, and the SE (3 pt) dwarfs the gap. The other four set the trend: shrinking puts B first.
    acc = [0.800, 0.795, 0.70, 0.74, 0.78, 0.82]
    prior = [1.0, 1e4, 1.0, 10.0, 1e2, 1e5]
    lat = [2.0, 2.0, 1.0, 1.5, 3.0, 4.0]
    study = _study(acc, lat, prior, se=0.03)
    on = {t.user_attrs["arch"] for t in summary.front(_cfg(), study).trials}
    off = {t.user_attrs["arch"] for t in summary.front(_cfg("off"), study).trials}
    assert ARCHS[0] in off and ARCHS[1] not in off
    assert ARCHS[1] in on and ARCHS[0] not in on


def test_a_trained_arch_without_a_prior_score_leaves_the_measured_front_and_says_why() -> None:
    acc, lat, prior = [0.8, 0.79, 0.7, 0.74], [2.0, 2.0, 1.0, 1.5], [1.0, 1e4, 1.0, 10.0]
    study = _study(acc, lat, prior, se=0.03, skip_prior=2)
    got = summary.front(_cfg(), study)
    plain = summary.front(_cfg("off"), study)
    assert got.picked_on is None and [t.number for t in got.trials] == [
        t.number for t in plain.trials]
    assert "3 of 4 have one" in got.shrink_note


@pytest.mark.parametrize("schedule", [{**PRIOR, "prior": "naswot"}, None])
def test_shrink_without_a_positive_prior_is_a_config_error(schedule: dict | None) -> None:
    raw = live_raw("shrink", pareto={"shrink": "prior"})
    if schedule is not None:
        raw["schedule"] = schedule
    with pytest.raises(ConfigError) as err:
        validate_study(raw)
    assert "pareto.shrink" in [p.where for p in err.value.problems]
    assert "schedule.prior: synflow" in str(err.value) and "Fix:" in str(err.value)


def test_the_report_shows_measured_and_shrunk_accuracies_side_by_side(tmp_path) -> None:  # noqa: ANN001
    from nas.results.report import _front_frame, _shrink_line

    acc, lat, prior = [0.800, 0.795, 0.70, 0.74], [2.0, 2.0, 1.0, 1.5], [1.0, 1e4, 1.0, 10.0]
    cfg = _cfg()
    front = summary.front(cfg, _study(acc, lat, prior, se=0.03))
    frame = _front_frame(cfg, front, tmp_path)
    assert {"acc_pcm@1d", "acc_pcm@1d ±SE", "acc_pcm@1d shrunk"} <= set(frame.columns)
    for _, row in frame.iterrows():
        assert row["acc_pcm@1d shrunk"] == pytest.approx(front.picked_on[row["trial"]][0])
    assert "shrunk toward" in _shrink_line(cfg, front)["front (pareto.shrink)"]
    assert _shrink_line(_cfg("off"), front) == {}
