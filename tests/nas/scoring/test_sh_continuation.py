"""Successive halving done right: a promoted candidate continues from its rung (same weights as
training straight to the larger budget, only the extra steps paid), the sampler sees each arch at
its highest rung, and the front holds top-rung results only."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hwnas.common.threads import torch_threads
from hwnas.train.data import load_data
from hwnas.train.fit_config import FitConfig
from hwnas.train.loop import TrainRun
from nas.scoring.continuation import RungStore, fit_rung, rung_steps
from search_spaces import get_space

ARCH = "rn:s16-d1r1c16"
# rungs of 0.5, 1.5 and 4.5 epochs (eta 3): rung 0 ends mid-epoch, so the continued run must
# replay the rest of that epoch's batch order and augmentation draws
RUNGS = [0.5, 1.5, 4.5]


@pytest.fixture(scope="module")
def digits():  # noqa: ANN201 - DataSplits
    return load_data("digits", train_limit=640)


def _model(data):  # noqa: ANN001, ANN202
    torch.manual_seed(0)
    return get_space("resnet").build(ARCH, in_chans=data.in_chans, num_classes=data.num_classes,
                                     img_size=data.img_size)


def _cfg(**changes) -> FitConfig:  # noqa: ANN003
    return FitConfig(**{"batch_size": 64, "lr": 0.05, "warmup_epochs": 0.2, "seed": 3,
                        "augment": True, "label_smoothing": 0.1, **changes})


def _rung(data, rung: int, state=None, cfg: FitConfig | None = None):  # noqa: ANN001, ANN202
    model = _model(data)
    with torch_threads(1):
        result, end = fit_rung(model, data, cfg or _cfg(), epochs=RUNGS[rung],
                               top_epochs=RUNGS[-1], state=state)
    return model, result, end


def _assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), f"{k} differs"


@pytest.mark.parametrize("upto", [1, 2])
def test_continued_rungs_match_straight_training(digits, tmp_path: Path,  # noqa: ANN001
                                                 upto: int) -> None:
    store = RungStore(tmp_path)
    _, _, end = _rung(digits, 0)
    for rung in range(1, upto + 1):  # through the file, as a promoted trial reads it
        store.save(ARCH, 3, rung - 1, end)
        continued, result, end = _rung(digits, rung, store.load(ARCH, 3, rung - 1))
    straight, full, _ = _rung(digits, upto)
    _assert_same_weights(continued, straight)
    assert result.steps == full.steps and result.history == full.history  # one run, one story


def test_the_top_rung_trains_as_plain_search_does(digits) -> None:  # noqa: ANN001
    """Straight to the top rung is the study's own training (``fit`` at the full budget): a
    top-rung score is a full-budget score."""
    from hwnas.train.loop import fit

    continued, _, end = _rung(digits, 0)
    _, _, end = _rung(digits, 1, end)
    top, _, _ = _rung(digits, 2, end)
    plain = _model(digits)
    with torch_threads(1):
        fit(plain, digits, _cfg(epochs=RUNGS[-1]))
    _assert_same_weights(top, plain)


def test_a_continued_rung_trains_only_its_extra_steps(digits,  # noqa: ANN001
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _, first, end = _rung(digits, 0)
    calls: list[int] = []
    real = TrainRun.step
    monkeypatch.setattr(TrainRun, "step", lambda self, *a, **k: calls.append(1) or real(
        self, *a, **k))
    _, second, _ = _rung(digits, 1, end)
    per_epoch = len(digits.y_train) // 64  # full batches only
    assert per_epoch == 10 and first.steps == rung_steps(0.5, per_epoch) == 5
    assert len(calls) == second.steps_trained == rung_steps(1.5, per_epoch) - first.steps == 10
    assert second.resumed_from == first.steps


def test_the_schedule_spans_the_top_rung(digits) -> None:  # noqa: ANN001
    """Rung 0 stops mid-schedule: its last learning rate is the one a straight run to the top
    has at that step, not an annealed 0."""
    _, low, _ = _rung(digits, 0)
    _, mid, _ = _rung(digits, 1)
    _, top, _ = _rung(digits, 2)
    assert low.history[-1]["lr"] > 0.02 and mid.history[-1]["lr"] > 0.02  # not annealed
    assert mid.history[0] == top.history[0]  # epoch 1: the same step, lr and loss
    assert top.history[-1]["lr"] < 1e-6  # the cosine reaches 0 at the top rung only


def test_a_state_of_another_recipe_is_not_continued(digits) -> None:  # noqa: ANN001
    _, _, end = _rung(digits, 0, cfg=_cfg(lr=0.2))
    continued, result, _ = _rung(digits, 1, end)
    straight, _, _ = _rung(digits, 1)
    assert result.resumed_from == 0  # trained from step 0, to the right weights
    _assert_same_weights(continued, straight)


def test_rung_store_keys_by_arch_seed_and_rung(tmp_path: Path) -> None:
    store = RungStore(tmp_path)
    store.save(ARCH, 0, 1, {"step": 4})
    assert store.load(ARCH, 0, 1)["step"] == 4
    assert store.load(ARCH, 1, 1) is None and store.load(ARCH, 0, 0) is None
    assert store.load("rn:s16-d1r1c24", 0, 1) is None
    assert len({store.path(ARCH, 0, 1), store.path(ARCH, 1, 1), store.path(ARCH, 0, 0)}) == 3


# -- the evaluator: a promotion continues its parent's rung ------------------------------------
def _epochs_cfg(**changes):  # noqa: ANN003, ANN202
    from study_files import live_raw

    from nas.study.config import validate_study

    return validate_study(live_raw(
        "sh_epochs", train={"epochs": 1, "batch_size": 64, "lr": 0.05},
        schedule={"type": "sh", "eta": 3, "min_budget": 0.5, "max_budget": 4.5,
                  "resource": "epochs"}, **changes))


@pytest.mark.slow  # four scored evaluations end to end (cost, training, PCM): about 10-30 s
def test_the_evaluator_continues_a_promotion_from_its_rung(tmp_path: Path) -> None:
    from nas.scoring.evaluate import Evaluator

    with_store = Evaluator(_epochs_cfg())
    with_store.rungs = RungStore(tmp_path / "rungs")
    low = with_store.evaluate(ARCH, budget=0.5)
    up = with_store.evaluate(ARCH, budget=1.5)
    fresh = Evaluator(_epochs_cfg()).evaluate(ARCH, budget=1.5)  # no store: from step 0
    assert low.info["train_steps"] == up.info["resumed_from_step"] > 0
    assert fresh.info["resumed_from_step"] == 0 and fresh.info["train_steps"] == \
        up.info["train_steps"]
    for k, v in fresh.state_dict.items():
        assert torch.equal(v, up.state_dict[k]), k
    assert up.metrics["acc_digital"] == fresh.metrics["acc_digital"]
    assert up.metrics["train_loss_sum"] == fresh.metrics["train_loss_sum"]
    assert sorted(p.name[-9:] for p in (tmp_path / "rungs").iterdir()) == ["-s0-r0.pt",
                                                                             "-s0-r1.pt"]
    with_store.evaluate(ARCH, budget=4.5)  # the top rung: nothing to continue later
    assert len(list((tmp_path / "rungs").iterdir())) == 2


@pytest.mark.slow  # two scored evaluations (cost, training, PCM)
def test_a_ray_actor_continues_a_promotion_from_its_rung(tmp_path: Path) -> None:
    pytest.importorskip("ray.tune")
    from nas.search.ray_driver import actor_evaluator

    cfg = _epochs_cfg(objectives=[{"metric": "accuracy"}, {"metric": "latency"}])
    evaluator = actor_evaluator(cfg, tmp_path)
    assert actor_evaluator(cfg, tmp_path) is evaluator  # built once per actor and study
    low = evaluator.evaluate(ARCH, budget=0.5)
    up = evaluator.evaluate(ARCH, budget=1.5)  # the promotion continues from rung 0's state
    assert low.info["train_steps"] == up.info["resumed_from_step"] > 0
    assert len(list((tmp_path / "rungs").iterdir())) == 2
    from study_files import live_raw

    from nas.study.config import validate_study

    plain = actor_evaluator(validate_study(live_raw("plain")), tmp_path)
    assert plain.rungs is None  # no schedule: nothing to continue, no state written


# -- the sampler learns from each arch's highest rung -----------------------------------------
def _rung_trial(arch: str, rung: int, value: float, **attrs):  # noqa: ANN003, ANN202
    import optuna
    from optuna.distributions import CategoricalDistribution

    return optuna.trial.create_trial(
        params={"x": arch}, distributions={"x": CategoricalDistribution(["a", "b", "c"])},
        values=[value], user_attrs={"arch": arch, "rung": rung, "bracket": 0, **attrs})


class _Seen:
    """A sampler that records the (arch, rung, value) of every trial it is shown."""

    def __init__(self) -> None:
        import optuna

        self.inner = optuna.samplers.RandomSampler(seed=0)
        self.public: list[list[tuple]] = []
        self.internal: list[list[tuple]] = []
        self.hidden: list[list[tuple]] = []

    def infer_relative_search_space(self, study, trial):  # noqa: ANN001, ANN201
        from optuna.trial import TrialState

        def seen(trials):  # noqa: ANN001, ANN202 - FAIL: a trial hidden from the sampler
            return sorted((t.user_attrs.get("arch", "-"), t.user_attrs.get("rung", -1),
                           t.values[0] if t.values else t.state.name) for t in trials
                          if t.state != TrialState.FAIL)

        trials = study.get_trials(deepcopy=False)
        self.public.append(seen(trials))
        # Optuna's samplers read through the study's internal list: it must agree
        self.internal.append(seen(study._get_trials(deepcopy=False, states=(
            TrialState.COMPLETE, TrialState.WAITING, TrialState.RUNNING))))
        self.hidden.append([(t.number, t.params, t.values, t.user_attrs, t.system_attrs)
                            for t in trials if t.state == TrialState.FAIL])
        return {}

    def sample_independent(self, study, trial, name, dist):  # noqa: ANN001, ANN201
        self.infer_relative_search_space(study, trial)
        return self.inner.sample_independent(study, trial, name, dist)

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.inner, name)


def test_the_sampler_sees_each_arch_at_its_highest_rung() -> None:
    import optuna
    from optuna.samplers import BaseSampler

    from nas.search.rung_sampler import HighestRungSampler

    seen = _Seen()
    BaseSampler.register(_Seen)  # duck-typed: Optuna only calls its methods
    study = optuna.create_study(sampler=HighestRungSampler(seen), direction="maximize")
    study.add_trial(_rung_trial("a", 0, 0.50))
    study.add_trial(_rung_trial("b", 0, 0.60))
    study.add_trial(_rung_trial("c", 0, 0.40))
    study.add_trial(_rung_trial("a", 1, 0.90, parent=0, promotion="a@1"))
    study.add_trial(_rung_trial("a", 2, 0.95, parent=3, promotion="a@2"))
    study.enqueue_trial({"x": "b"}, user_attrs={"rung": 1, "bracket": 0, "parent": 1,
                                                "promotion": "b@1"})
    study.ask()  # the queued promotion of b runs: its parameters are fixed, b's own
    study.ask().suggest_categorical("x", ["a", "b", "c"])  # a new candidate asks the sampler
    want = [("-", -1, "RUNNING"), ("a", 2, 0.95), ("b", 0, 0.60), ("c", 0, 0.40)]
    assert seen.public[-1] == seen.internal[-1] == want
    # a's lower rungs and b's running promotion keep their numbers as FAIL trials that hold
    # their parameters (b's promotion has none yet: they are fixed, not asked) and their user
    # attributes (the costs measured before training), never their values
    real = study.get_trials(deepcopy=False)
    assert seen.hidden[-1] == [(n, p, None, real[n].user_attrs, {})
                               for n, p in ((0, {"x": "a"}), (3, {"x": "a"}), (5, {}))]
    # without the wrapper the sampler would see a three times and b's promotion as a new point
    raw = sorted((t.user_attrs.get("arch"), t.user_attrs.get("rung")) for t in study.trials
                 if t.user_attrs.get("arch"))
    assert raw == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0)]


def test_an_arch_that_stopped_at_the_free_rung_is_not_proposed_again() -> None:
    import optuna

    from nas.algorithms.samplers import make_sampler
    from nas.search.rung_sampler import HighestRungSampler

    study = optuna.create_study(direction="maximize",
                                sampler=HighestRungSampler(make_sampler("default", seed=0)))
    for arch in ("a", "b"):  # rung-0 prior scores: hidden from the sampler, not forgotten
        study.add_trial(_rung_trial(arch, 0, 9.0, prior="params"))
    proposed = []
    for _ in range(3):
        trial = study.ask()
        proposed.append(trial.suggest_categorical("x", ["a", "b", "c", "d", "e"]))
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    assert sorted(proposed) == ["c", "d", "e"]


def test_the_wrapped_default_sampler_keeps_its_hooks() -> None:
    from nas.algorithms.samplers import make_sampler
    from nas.search.rung_sampler import HighestRungSampler

    inner = make_sampler("default", seed=0)
    wrapped = HighestRungSampler(inner)
    assert wrapped.moves is inner.moves and hasattr(wrapped, "attach")


def test_a_scheduled_study_runs_with_the_wrapped_default_sampler() -> None:
    import optuna

    from nas.algorithms.samplers import make_sampler
    from nas.search.rung_sampler import HighestRungSampler
    from nas.search.schedule import SuccessiveHalving
    from nas.study.schedule import ScheduleCfg

    sh = SuccessiveHalving(ScheduleCfg(type="sh", eta=3, min_budget=1, max_budget=9), ["maximize"])
    study = optuna.create_study(direction="maximize",
                                sampler=HighestRungSampler(make_sampler("default", seed=0)))

    def objective(trial: optuna.Trial, budget: float) -> float:
        x = trial.suggest_int("x", 0, 40)
        trial.set_user_attr("arch", f"x{x}")
        return -abs(x - 17) * (1 - 0.5 / budget)

    study.optimize(sh.wrap(objective), n_trials=40, callbacks=[sh])
    rungs = [t.user_attrs["rung"] for t in study.trials]
    assert max(rungs) == 2 and len({t.user_attrs["arch"] for t in study.trials
                                    if t.user_attrs["rung"] == 0}) == rungs.count(0)


# -- the front holds top-rung results only ----------------------------------------------------
def _front_study():  # noqa: ANN202 - (cfg, study): acc (max) vs latency (min), rungs 0-2
    import optuna
    from optuna.distributions import CategoricalDistribution

    cfg = _epochs_cfg()
    study = optuna.create_study(directions=["maximize", "minimize"])
    dist = {"x": CategoricalDistribution(list("abcde"))}
    for arch, rung, acc, lat in [("a", 0, 0.60, 2.0), ("a", 1, 0.70, 2.0), ("a", 2, 0.80, 2.0),
                                 ("b", 0, 0.65, 1.0), ("b", 1, 0.72, 1.0), ("b", 2, 0.78, 1.0),
                                 ("c", 0, 0.90, 3.0),  # best rung-0 score: not comparable
                                 ("d", 0, 0.50, 0.5),  # cheapest: undominated, lower rung
                                 ("e", 1, 0.60, 2.5)]:  # dominated by the top rung's a
        study.add_trial(optuna.trial.create_trial(
            params={"x": arch}, distributions=dist, values=[acc, lat],
            user_attrs={"arch": arch, "rung": rung, "budget": [0.5, 1.5, 4.5][rung]}))
    return cfg, study


def test_the_front_holds_top_rung_results_only() -> None:
    from nas.results import summary

    cfg, study = _front_study()
    front = summary.front(cfg, study)
    assert [(t.user_attrs["arch"], t.user_attrs["rung"]) for t in front.trials] == [
        ("a", 2), ("b", 2)]
    assert sorted(t.user_attrs["arch"] for t in front.lower) == ["c", "d"]
    assert front.n_feasible == 2  # the hypervolume counts the top rung only
    numbers, hv = summary.history(cfg, study)
    assert numbers.tolist() == [2, 5] and hv[-1] == pytest.approx(front.hypervolume)


def test_the_report_marks_lower_rung_members(tmp_path: Path) -> None:
    from nas.results import summary
    from nas.results.report import _front_frame

    cfg, study = _front_study()
    frame = _front_frame(cfg, summary.front(cfg, study), tmp_path)
    rungs = dict(zip(frame["arch"], frame["rung"], strict=True))
    assert rungs["a"] == "rung 2 (top: 2), 4.5 epochs"
    assert rungs["c"] == "rung 0 (top: 2), 0.5 epochs: lower rung, not on the front"
    assert set(rungs) == {"a", "b", "c", "d"}


def test_before_any_arch_reaches_the_top_the_front_is_the_highest_rung_reached() -> None:
    import optuna

    from nas.results import summary

    cfg, study = _front_study()
    early = optuna.create_study(directions=["maximize", "minimize"])
    for t in study.trials:
        if t.user_attrs["rung"] < 2:
            early.add_trial(t)
    front = summary.front(cfg, early)
    assert [(t.user_attrs["arch"], t.user_attrs["rung"]) for t in front.trials] == [("b", 1)]
    assert sorted(t.user_attrs["arch"] for t in front.lower) == ["c", "d"]


@pytest.mark.slow
def test_a_live_study_promotes_by_continuing(tmp_path: Path) -> None:
    from optuna.trial import TrialState
    from study_files import live_raw

    from nas.search.run import run_search
    from nas.study.config import validate_study
    from nas.study.store import load_dir

    raw = live_raw("sh_cont", n_trials=4, train={"epochs": 1, "batch_size": 64, "lr": 0.05},
                   schedule={"type": "sh", "eta": 3, "min_budget": 0.5, "max_budget": 4.5})
    study_dir = run_search(validate_study(raw), out_root=tmp_path, progress=False)
    _, study, _ = load_dir(study_dir)
    done = [t for t in study.trials if t.state == TrialState.COMPLETE]
    up = [t for t in done if t.user_attrs["rung"] == 1]
    assert len(up) == 1, [t.user_attrs["rung"] for t in done]
    parent = study.trials[up[0].user_attrs["parent"]]
    assert up[0].user_attrs["info"]["resumed_from_step"] == \
        parent.user_attrs["info"]["train_steps"] > 0
    assert len(list((study_dir / "rungs").glob("*-r0.pt"))) == 3  # every rung-0 candidate
