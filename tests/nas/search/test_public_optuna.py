"""``nas`` uses Optuna through its public API only: no private name of an Optuna object.

Private names change without notice between Optuna releases (``Study._get_trials`` gained
``use_cache`` in 3.x); a wrapper built on them breaks silently on an upgrade."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import optuna
import pytest
from optuna.samplers import BaseSampler, NSGAIISampler, RandomSampler, TPESampler
from optuna.storages import BaseStorage, InMemoryStorage, RDBStorage
from optuna.trial import FrozenTrial

NAS = Path(__file__).resolve().parents[3] / "nas"
NEVER = ("_get_trials", "_storage", "_study_id")  # how a study's trials are reached privately


def _optuna_private_names() -> set[str]:
    """Private (single underscore) names of Optuna's studies, trials, storages and samplers,
    on the classes and on live instances (``__init__`` sets ``_storage``, ``_trial_id``, ...)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=InMemoryStorage())
    trial = study.ask()
    objects = [study, trial, study.get_trials()[0], TPESampler(), NSGAIISampler(),
               RandomSampler(), InMemoryStorage(), optuna.Study, optuna.Trial, FrozenTrial,
               BaseStorage, RDBStorage, BaseSampler, TPESampler, NSGAIISampler]
    names = {n for o in objects for n in dir(o)}
    return {n for n in names if n.startswith("_") and not n.startswith("__")} | set(NEVER)


def _sources() -> list[Path]:
    return sorted(NAS.rglob("*.py"))


def private_uses(source: str, names: set[str]) -> list[tuple[int, str]]:
    """``(line, name)`` of each ``x.<name>`` with ``name`` in ``names``, where ``x`` is not
    ``self`` or ``cls`` (a class's own private attributes are its business)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.append((node.lineno, node.attr))
    return sorted(out)


def test_the_private_names_are_found() -> None:
    names = _optuna_private_names()
    assert {"_get_trials", "_storage", "_study_id", "_trial_id", "_cached_frozen_trial"} <= names
    bad = "def f(study, trial):\n    return study._get_trials(), trial._trial_id, self._seed\n"
    assert private_uses(bad, names) == [(2, "_get_trials"), (2, "_trial_id")]


@pytest.mark.parametrize("name", NEVER)
def test_no_private_study_access_is_written_in_nas(name: str) -> None:
    pattern = re.compile(rf"\b{name}\b")
    hits = [f"{p.relative_to(NAS.parent)}:{i}" for p in _sources()
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, f"{name} is Optuna's private API; use public Study/Trial methods: {hits}"


def test_nas_reaches_no_private_attribute_of_an_optuna_object() -> None:
    names = _optuna_private_names()
    hits = [f"{p.relative_to(NAS.parent)}:{line} .{name}" for p in _sources()
            for line, name in private_uses(p.read_text(), names)]
    assert not hits, f"private Optuna names (public API only, see optuna's reference): {hits}"
