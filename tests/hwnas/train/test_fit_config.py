"""One training config: FitConfig declares each field once, and the study file's TrainCfg is
built from those declarations (same types, defaults, bounds and descriptions)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest
from pydantic import ValidationError

from hwnas.common.errors import ConfigError
from hwnas.train.fit_config import FitConfig, setting, settings
from nas.study.config import TrainCfg, fit_model

STUDY_ONLY = {"threads"}  # the study's own: CPU threads of a trial, not a training setting


@dataclass
class WithDropout(FitConfig):
    dropout: float = setting(0.0, "drop rate before the classifier", ge=0, lt=1, example=0.1)


def test_a_field_added_to_fit_config_reaches_the_study_model() -> None:
    model = fit_model(WithDropout)
    field = model.model_fields["dropout"]
    assert (field.default, field.description) == (0.0, "drop rate before the classifier")
    assert model(dropout=0.2).dropout == 0.2
    with pytest.raises(ValidationError, match="less than 1"):
        model(dropout=1.0)
    with pytest.raises(ConfigError, match=r"WithDropout.dropout: must be a number in \[0, 1\)"):
        WithDropout(dropout=1.0)


def test_train_cfg_adds_only_the_study_fields() -> None:
    fit = {s.name: s for s in settings(FitConfig)}
    study = TrainCfg.model_fields
    assert set(study) == (set(fit) - {"seed"}) | STUDY_ONLY  # the seed is the study's
    for name, s in fit.items():
        if name in ("seed", "validation"):
            continue
        assert study[name].description == s.description, name
        assert (study[name].annotation, study[name].default) == (s.type, s.default), name
    # a study scores every candidate itself after training, so it skips fit's val passes
    assert (study["validation"].annotation, study["validation"].default) == (fit[
        "validation"].type, "off")


def _accepts_fit(name: str, value: object) -> bool:
    try:
        FitConfig(**{name: value})
        return True
    except ConfigError:
        return False


def _accepts_study(name: str, value: object) -> bool:
    try:
        TrainCfg(**{name: value})
        return True
    except ValidationError:
        return False


def _probes(s) -> list[object]:  # noqa: ANN001 - a Setting
    step = 1 if "int" in str(s.type) else 0.5
    near = [b + d for b in s.bounds.values() for d in (-step, 0, step)]
    return [*near, None, "many"]


@pytest.mark.parametrize("s", [s for s in settings(FitConfig) if s.bounds], ids=lambda s: s.name)
def test_the_library_and_the_study_agree_on_every_bound(s) -> None:  # noqa: ANN001
    verdicts = {v: (_accepts_fit(s.name, v), _accepts_study(s.name, v)) for v in _probes(s)}
    assert all(f == st for f, st in verdicts.values()), verdicts
    assert any(f for f, _ in verdicts.values()) and not all(f for f, _ in verdicts.values())


@pytest.mark.parametrize("kwargs, rule, fix", [
    ({"batch_size": 1.5}, "must be an int > 0", "batch_size=128"),
    ({"steps": 0}, "must be None or an int > 0", "steps=100"),
    ({"momentum": 1.0}, "must be a number in [0, 1)", "momentum=0.9"),
    ({"weight_decay": -1.0}, "must be a number >= 0", "weight_decay=0.0005"),
    ({"augment": "yes"}, "must be true or false", "augment=True"),
    ({"optimizer": "adam"}, "must be one of ['sgd', 'adamw']", "sgd, adamw"),
])
def test_a_bad_value_names_the_rule_the_value_and_the_fix(kwargs: dict, rule: str,
                                                          fix: str) -> None:
    with pytest.raises(ConfigError) as err:
        FitConfig(**kwargs)
    (problem,) = err.value.problems
    name, value = next(iter(kwargs.items()))
    assert (problem.where, problem.rule, problem.value) == (f"FitConfig.{name}", rule, value)
    assert fix in problem.fix


def test_epochs_are_not_checked_under_a_steps_budget() -> None:
    assert FitConfig(epochs=0, steps=3).steps == 3
    with pytest.raises(ConfigError, match="FitConfig.epochs"):
        FitConfig(epochs=0)


def test_a_field_declared_without_setting_is_refused() -> None:
    @dataclass
    class Bare(FitConfig):
        extra: int = 0

    with pytest.raises(TypeError, match=r"Bare.extra is not declared with setting\(\)"):
        fit_model(Bare)


def test_the_config_loads_without_torch() -> None:
    # study files validate before any trial, and a study's parent process need not load torch
    code = "import sys, hwnas.train.fit_config; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
