"""A free prior as rung 0 of successive halving (``schedule.prior``): what rung 0 promotes, that
its trials stay off the front and out of the sampler, bad options, determinism under a seed.

The live tests run the real rung 0 (``nas.search.prior_rung``: seeded model, measured latency,
SynFlow) on scikit-learn's digits; rungs above it are whatever the study trains.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState, create_trial
from study_files import live_raw, tabular_raw
from test_schedule import _brute_order

from hwnas.common.errors import ConfigError
from nas.scoring.zero_cost import PRIORS
from nas.study.config import StudyConfig, validate_study

PRIOR = {"type": "sh", "prior": "synflow", "eta": 3, "min_budget": 100, "max_budget": 100,
         "resource": "images"}


def _cfg(name: str = "prior", n_trials: int = 20, **schedule: Any) -> StudyConfig:
    return validate_study(live_raw(name, n_trials=n_trials, schedule={**PRIOR, **schedule},
                                   train={"steps": 3, "batch_size": 32, "lr": 0.05}))


def _rung0_study(cfg: StudyConfig, n: int, seed: int = 0) -> tuple[Any, optuna.Study]:
    """``n`` rung-0 trials of ``cfg`` in memory, no promotion yet (no callback)."""
    from nas.search import schedule

    sh = schedule.make(cfg)
    assert sh is not None and sh.prior is not None

    def trained(trial: optuna.Trial, budget: float | None = None) -> tuple[float, ...]:
        raise AssertionError("rung 0 must not train")

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=sh.directions,
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    study.optimize(sh.wrap(trained), n_trials=n)
    return sh, study


def _recomputed(cfg: StudyConfig, trials: list) -> np.ndarray:
    """(SynFlow of the seeded model computed apart from the rung, the trial's measured latency)."""
    from nas.scoring.evaluate import Evaluator
    from nas.scoring.zero_cost import synflow

    ev = Evaluator(cfg)
    return np.array([(synflow(ev.build(t.user_attrs["arch"]), ev.data.input_shape),
                      t.user_attrs["latency_ms"]) for t in trials])


# -- what rung 0 promotes ----------------------------------------------------------------------
@pytest.mark.parametrize("share", [None, 0.5])
def test_promoted_set_is_the_brute_force_pick_on_prior_and_latency(share: float | None) -> None:
    cfg = _cfg(prior_share=share)
    sh, study = _rung0_study(cfg, 9)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 9 and all(t.user_attrs["prior"] == "synflow" for t in done)
    assert all(t.user_attrs["rung"] == 0 and t.user_attrs["budget"] == 0.0 for t in done)
    values = _recomputed(cfg, done)
    np.testing.assert_allclose([t.values for t in done], values, rtol=1e-12)
    k = math.floor(9 * share) if share else 3
    want = {done[i].number for i in _brute_order(values, ["maximize", "minimize"])[:k]}
    assert sh.promote(study) == k
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert {t.user_attrs["parent"] for t in queued} == want
    for t in queued:  # the promoted candidate is the same arch, one rung up, at the full budget
        parent = study.trials[t.user_attrs["parent"]]
        assert t.system_attrs["fixed_params"] == parent.params and t.user_attrs["rung"] == 1
        assert t.user_attrs["promotion"] == f"{parent.user_attrs['arch']}@1"


def test_rung_budgets_put_the_free_rung_below() -> None:
    from nas.study.schedule import ScheduleCfg, rung_budgets

    s = ScheduleCfg(type="sh", eta=3, min_budget=1, max_budget=9, prior="params")
    assert rung_budgets(s) == [0.0, 1, 3, 9]
    assert rung_budgets(ScheduleCfg(**PRIOR)) == [0.0, 100.0]


# -- the front and the sampler see trained rungs only -------------------------------------------
def _trial(number: int, values: list[float], rung: int, arch: str, prior: bool = False):  # noqa: ANN202
    attrs: dict[str, Any] = {"rung": rung, "arch": arch}
    if prior:
        attrs["prior"] = "synflow"
    t = create_trial(values=values, params={"a": arch},
                     distributions={"a": CategoricalDistribution(["x", "y", "z"])},
                     user_attrs=attrs)
    t.number = number
    return t


def test_prior_trials_never_enter_the_front_nor_the_sampler() -> None:
    from nas.search.schedule import front_pool, highest_rung, latest_rungs

    trials = [_trial(0, [40.0, 1.0], 0, "x", prior=True),  # a prior dominates any accuracy
              _trial(1, [35.0, 2.0], 0, "y", prior=True),
              _trial(2, [38.0, 3.0], 0, "z", prior=True),
              _trial(3, [0.8, 2.0], 1, "y")]
    pool, lower = front_pool(highest_rung(trials))
    assert [t.number for t in pool] == [3] and lower == []
    assert [t.number for t in latest_rungs(trials)] == [3]
    only_priors = trials[:3]  # no arch trained yet: the front is empty, not the priors
    assert front_pool(highest_rung(only_priors)) == ([], [])
    assert latest_rungs(only_priors) == []


@pytest.mark.slow
def test_live_study_trains_only_promoted_and_fronts_trained_results(
        tmp_path, monkeypatch) -> None:  # noqa: ANN001
    from nas.results import summary
    from nas.scoring import evaluate
    from nas.search.run import run_search
    from nas.study.store import load_dir

    loads: list[str] = []  # the real loader, counted: rung 0 scores with the driver's evaluator
    real = evaluate.load_data
    monkeypatch.setattr(evaluate, "load_data", lambda name, **kw: loads.append(name)
                        or real(name, **kw))
    study_dir = run_search(_cfg("prior_live", n_trials=5), out_root=tmp_path, progress=False)
    assert loads == ["digits"]  # one data set in memory, not one per evaluator
    cfg, study, _ = load_dir(study_dir)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    priors = [t for t in done if "prior" in t.user_attrs]
    trained = [t for t in done if "prior" not in t.user_attrs]
    assert len(priors) >= 3 and len(trained) >= 1  # 3 priors, then the first promotion
    assert all("acc_pcm@1d" not in t.user_attrs and "train_loss" not in t.user_attrs
               for t in priors)  # rung 0 never trains nor scores accuracy
    assert all(t.user_attrs["info"]["rung"] == "rung 0 (prior)" for t in priors)
    for t in trained:
        assert t.user_attrs["rung"] == 1 and t.user_attrs["budget"] == 100.0
        assert study.trials[t.user_attrs["parent"]].user_attrs["prior"] == "synflow"
        assert 0 <= t.values[0] <= 1  # an accuracy, not a prior
    front = summary.front(cfg, study)
    assert front.n_free == len({t.user_attrs["arch"] for t in priors}
                               - {t.user_attrs["arch"] for t in trained})
    assert {t.number for t in front.trials} <= {t.number for t in trained}
    assert not {t.number for t in front.lower} & {t.number for t in priors}
    # the trials table and the report never show a prior as an accuracy
    from nas.results.report import write_report
    from nas.study.store import trials_frame

    frame = trials_frame(study).set_index("number")
    free = frame.loc[[t.number for t in priors]]
    assert free["objective:acc_pcm@1d"].isna().all() and (free["prior"] == "synflow").all()
    assert free["prior_score"].notna().all() and free["objective:latency_ms"].notna().all()
    assert frame.loc[[t.number for t in trained], "objective:acc_pcm@1d"].between(0, 1).all()
    page = write_report(study_dir).read_text()
    assert f"{len(priors)} candidates scored by synflow without training" in page


# -- bad options: clear errors before the first trial --------------------------------------------
@pytest.mark.parametrize("raw,where,words", [
    (live_raw(schedule={**PRIOR, "prior": "grasp"}), "schedule.prior", "synflow"),
    (live_raw(schedule={**PRIOR, "type": "hyperband"}), "schedule.prior", "Hyperband"),
    (live_raw(schedule={**PRIOR, "type": "none"}), "schedule.prior", "type: sh"),
    (live_raw(schedule=PRIOR, backend="ray"), "schedule.prior", "backend: optuna"),
    (live_raw(schedule={**PRIOR, "resource": "steps"}, evaluator="supernet"),
     "schedule.prior", "inherited"),
    (live_raw(schedule={**PRIOR, "prior": "none", "prior_share": 0.2}),
     "schedule.prior_share", "needs schedule.prior"),
    (live_raw(schedule={**PRIOR, "prior_share": 1.5}), "schedule.prior_share", "(0, 1]"),
    (live_raw(schedule={**PRIOR, "prior_share": 0}), "schedule.prior_share", "(0, 1]"),
    (live_raw(schedule=PRIOR, objectives=[{"metric": "latency"}, {"metric": "params"}]),
     "schedule.prior", "only cost objectives"),
])
def test_bad_prior_options_are_config_errors(raw: dict, where: str, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate_study(raw)
    assert where in [p.where for p in err.value.problems]
    assert words in str(err.value) and "Fix:" in str(err.value)


def test_prior_on_a_tabular_study_is_a_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        validate_study(tabular_raw(schedule=PRIOR))
    mine = [p for p in err.value.problems if p.where == "schedule.prior"]
    assert len(mine) == 1 and "builds none" in mine[0].rule


def test_naswot_on_a_net_without_relu_fails_with_the_fix() -> None:
    from nas.scoring.evaluate import TrialFailed
    from nas.search.prior_rung import PriorRung

    cfg = validate_study(live_raw("vit_naswot", space="vit", schedule={**PRIOR,
                                                                         "prior": "naswot"}))
    with pytest.raises(TrialFailed, match="has none; use prior synflow or params"):
        PriorRung(cfg).score("vit:p4-e64-d2-h2-m1")  # GELU only: every ReLU code is missing


# -- determinism under a seed ------------------------------------------------------------------
def test_rung_zero_is_deterministic_under_a_seed() -> None:
    # MACs, not latency, beside the prior: a latency is a measurement, served again by the cost
    # cache only when it was stable, so on a loaded host two runs can rank it differently
    cfg = validate_study(live_raw("prior_macs", n_trials=20, schedule=PRIOR, objectives=[
        {"metric": "accuracy", "hw": "pcm", "time": "1d"}, {"metric": "macs"}]))
    runs = [_rung0_study(cfg, 6, seed=3) for _ in range(2)]
    (sh_a, a), (sh_b, b) = runs
    assert [t.user_attrs["arch"] for t in a.trials] == [t.user_attrs["arch"] for t in b.trials]
    assert [t.values for t in a.trials] == [t.values for t in b.trials]  # bit for bit
    sh_a.promote(a), sh_b.promote(b)
    assert ([t.user_attrs["parent"] for t in a.get_trials(states=(TrialState.WAITING,))]
            == [t.user_attrs["parent"] for t in b.get_trials(states=(TrialState.WAITING,))])


@pytest.mark.parametrize("prior", sorted(PRIORS))
def test_each_prior_is_a_finite_deterministic_score(prior: str) -> None:
    from nas.search.prior_rung import PriorRung

    cfg = _cfg(prior=prior)
    arch = "rn:s16-d1r1c16"
    first, second = PriorRung(cfg).score(arch)[0], PriorRung(cfg).score(arch)[0]
    assert math.isfinite(first["prior_score"])
    assert first["prior_score"] == second["prior_score"]
    if prior == "params":
        assert first["prior_score"] == pytest.approx(math.log(first["params"]))
