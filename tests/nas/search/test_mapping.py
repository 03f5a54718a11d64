"""Layer-wise mapping as a study variable: config parsing, the sampler's choice, the patterns."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from study_files import live_raw, tabular_raw, write_study
from torch import nn

from hwnas.common.errors import ConfigError
from nas.cli import main
from nas.scoring.evaluate import Evaluator
from nas.search.sampling import choose
from nas.study import store
from nas.study.config import validate_study
from nas.study.mapping import MappingCfg, digital_patterns, parse_mapping


def _net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.Conv2d(4, 4, 3, groups=4), nn.Conv2d(4, 8, 3),
                         nn.Flatten(), nn.Linear(8, 6), nn.Linear(6, 3))


def test_fixed_mapping_keeps_first_and_last_mappable_layers_digital():
    cfg = parse_mapping({"first_k_digital": 1, "last_k_digital": 1, "digital_layers": ["2"]})
    choice = choose(None, cfg)
    assert choice == {"first_k_digital": 1, "last_k_digital": 1}
    # the grouped conv "1" is not mappable, so it does not count as a first layer
    assert digital_patterns(_net(), choice, cfg) == ["0", "5", "2"]
    assert digital_patterns(_net(), {"first_k_digital": 0, "last_k_digital": 0}) == []


def test_searched_mapping_is_a_trial_parameter():
    cfg = parse_mapping({"search": ["first_k_digital", "last_k_digital"], "max_k": 2})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(12):
        trial = study.ask()
        choice = choose(trial, cfg)
        assert set(trial.params) == {"mapping.first_k_digital", "mapping.last_k_digital"}
        assert all(0 <= k <= 2 for k in choice.values())
        seen.add(tuple(choice.values()))
        study.tell(trial, 0.0)
    assert len(seen) > 3  # the sampler really varies the assignment


@pytest.mark.parametrize(("raw", "needle"), [
    ({"search": ["middle_k"]}, "first_k_digital"),
    ({"max_k": -1}, "integer >= 0"),
    ({"first_k": 1}, "keys must be among"),
])
def test_bad_mapping_config(raw, needle):
    with pytest.raises(ConfigError, match=needle):
        parse_mapping(raw)


def test_defaults_map_everything():
    assert parse_mapping(None) == MappingCfg() and not MappingCfg().searched


# -- the mapping in a study ---------------------------------------------------------------------
ARCH = "rn:s16-d1r1c16-d1r2c32"


def _study(tmp_path: Path, name: str, mapping: dict | None = None, **changes):  # noqa: ANN202
    hw_eval = {"repeats": 2, "eval_limit": 100, "target_se": None, "adabs": 64,
               **({"mapping": mapping} if mapping is not None else {})}
    return live_raw(name, hw_eval=hw_eval, latency={"max_seconds": 0.2,
                                                    "cache": str(tmp_path / "costs.db")},
                    **changes)


def test_mapping_rules_are_checked_with_the_study(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"hw_eval\.mapping.*integer >= 0"):
        validate_study(_study(tmp_path, "m", {"first_k_digital": -1}))
    searched = {"search": ["first_k_digital"]}
    with pytest.raises(ConfigError, match="successive halving"):
        validate_study(_study(tmp_path, "m", searched, schedule={
            "type": "sh", "min_budget": 0.5, "max_budget": 1}))
    with pytest.raises(ConfigError, match="tabular"):
        validate_study(tabular_raw(hw_eval={"mapping": {"last_k_digital": 1}}))
    with pytest.raises(ConfigError, match="chosen per trial"):  # searched, but no choice given
        Evaluator(validate_study(_study(tmp_path, "m", searched))).evaluate(ARCH)


def test_fixed_mapping_moves_cost_and_accuracy_coverage_together(tmp_path: Path) -> None:
    plain = Evaluator(validate_study(_study(tmp_path, "all"))).evaluate(ARCH)
    mapped = Evaluator(validate_study(_study(
        tmp_path, "mixed", {"first_k_digital": 1, "last_k_digital": 1}))).evaluate(ARCH)
    m, p = mapped.metrics, plain.metrics
    assert m["analog_mac_fraction"] < p["analog_mac_fraction"]
    assert m["analog_tiles"] < p["analog_tiles"]
    # the cost model and the accuracy model see one assignment
    assert m["analog_mac_fraction"] == pytest.approx(m["pcm_analog_mac_fraction"], rel=1e-6)
    assert p["analog_mac_fraction"] == pytest.approx(p["pcm_analog_mac_fraction"], rel=1e-6)
    assert mapped.info["mapping"].endswith("digital: stem.0, fc")  # first and last layer
    assert "mapping" not in plain.info and m["mapping.first_k_digital"] == 1.0
    assert m["acc_digital"] == p["acc_digital"]  # same seed, same training: only hardware differs


@pytest.mark.slow
def test_searched_mapping_is_stored_with_each_trial(tmp_path: Path) -> None:
    raw = _study(tmp_path, "msearch", {"search": ["first_k_digital", "last_k_digital"],
                                       "max_k": 1}, n_trials=3)
    assert main(["search", str(write_study(tmp_path, raw)), "--out", str(tmp_path),
                 "--no-progress"]) == 0
    _, study, _ = store.load_dir(tmp_path / "msearch")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) >= 3
    for t in done:
        for knob in ("first_k_digital", "last_k_digital"):
            assert t.user_attrs[f"mapping.{knob}"] == t.params[f"mapping.{knob}"]
        assert t.user_attrs["analog_mac_fraction"] == pytest.approx(
            t.user_attrs["pcm_analog_mac_fraction"], rel=1e-6)
