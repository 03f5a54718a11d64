"""The Ray searcher over Optuna's ask and tell: suggestions are the space's arch strings,
results reach the study (values, constraints, failures), and a saved searcher restores with
everything it had seen (no Ray cluster needed: Tune calls these methods itself)."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from nas.search.ray_utils import AskTellSearcher, distributions
from nas.study.mapping import parse_mapping
from search_spaces import get_space
from search_spaces.pool import read_pool

optuna.logging.set_verbosity(optuna.logging.WARNING)
_M = ["objective__acc", "objective__latency_ms"]


def _searcher(seed: int = 0) -> AskTellSearcher:
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=seed))
    return AskTellSearcher(get_space("resnet"), study, metric=_M, mode=["max", "min"])


def test_suggestions_are_arch_strings_of_the_params() -> None:
    s = _searcher()
    config = s.suggest("t0")
    space = get_space("resnet")
    assert space.validate(config["arch"]) == config["arch"]
    assert {k: v for k, v in config.items() if k not in ("arch", "mapping")} == \
        s.study.trials[0].params
    assert config["mapping"] == {"first_k_digital": 0, "last_k_digital": 0}  # none searched


def test_searched_mapping_is_suggested_and_replays_from_params() -> None:
    mapping = parse_mapping({"search": ["first_k_digital", "last_k_digital"], "max_k": 2})
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    s = AskTellSearcher(get_space("resnet"), study, metric=_M, mode=["max", "min"],
                        mapping=mapping)
    configs = [s.suggest(f"t{i}") for i in range(8)]
    for config in configs:
        params = {k: v for k, v in config.items() if k not in ("arch", "mapping")}
        assert config["mapping"] == {k: params[f"mapping.{k}"] for k in config["mapping"]}
        arch, dists = distributions(get_space("resnet"), params, mapping)  # copy_trial's
        assert arch == config["arch"] and set(dists) == set(params)
    assert len({tuple(c["mapping"].values()) for c in configs}) > 2


def test_results_failures_and_constraints_reach_the_study() -> None:
    s = _searcher()
    for i in range(3):
        s.suggest(f"t{i}")
    s.on_trial_complete("t0", {"objective__acc": 0.9, "objective__latency_ms": 2.0,
                               "constraint__latency_ms": -1.0})
    s.on_trial_complete("t1", {"fail_reason": "NaN loss"})
    s.on_trial_complete("t2", error=True)
    s.on_trial_complete("unknown", {"objective__acc": 0.1})  # never suggested: ignored
    t0, t1, t2 = s.study.trials
    assert t0.state == TrialState.COMPLETE and t0.values == [0.9, 2.0]
    assert t0.constraints == {"latency_ms": -1.0}
    assert t1.state == TrialState.FAIL and t2.state == TrialState.FAIL


def test_missing_objective_is_a_failure_not_a_crash() -> None:
    s = _searcher()
    s.suggest("t0")
    s.on_trial_complete("t0", {"objective__acc": 0.5})
    assert s.study.trials[0].state == TrialState.FAIL


def test_save_restore_round_trip(tmp_path: Path) -> None:
    a = _searcher(seed=3)
    a.suggest("t0")
    a.on_trial_complete("t0", {"objective__acc": 0.8, "objective__latency_ms": 1.0})
    a.suggest("t1")  # still running when the experiment checkpoint is written
    a.save(str(tmp_path / "searcher.pkl"))
    b = _searcher(seed=99)
    b.restore(str(tmp_path / "searcher.pkl"))
    assert [t.values for t in b.study.trials] == [t.values for t in a.study.trials]
    b.on_trial_complete("t1", {"objective__acc": 0.7, "objective__latency_ms": 0.5})
    assert b.study.trials[1].state == TrialState.COMPLETE
    assert a.suggest("t2") == b.suggest("t2")  # the sampler's state travelled too


def test_a_pool_space_is_sampled_and_saved_with_the_searcher(tmp_path: Path) -> None:
    pool = ["rn:s16-d1r1c24", "rn:s24-d1r1c16", "rn:s32-d2r1c16"]
    (tmp_path / "pool.txt").write_text("\n".join(pool))
    space = read_pool(get_space("resnet"), tmp_path / "pool.txt")
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.RandomSampler(seed=0))
    s = AskTellSearcher(space, study, metric=_M, mode=["max", "min"])
    configs = [s.suggest(f"t{i}") for i in range(12)]
    assert {c["arch"] for c in configs} == set(pool)
    assert all(distributions(space, {"pool_index": c["pool_index"]})[0] == c["arch"]
               for c in configs)
    s.save(str(tmp_path / "searcher.pkl"))
    b = _searcher()
    b.restore(str(tmp_path / "searcher.pkl"))
    assert b.suggest("t12")["arch"] in pool
