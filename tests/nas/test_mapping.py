"""Layer-wise mapping as a study variable: config parsing, the sampler's choice, the patterns."""

from __future__ import annotations

import optuna
import pytest
from torch import nn

from hwnas.common.errors import ConfigError
from nas.mapping import MappingCfg, choose, digital_patterns, parse_mapping


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
