"""``--set`` and study files read ``off``/``on``/``yes``/``no`` as the words typed (YAML 1.2)."""

from __future__ import annotations

import pytest

from nas.commands.search import parse_sets
from nas.study.config import find_study, load_study
from nas.study.yaml_values import loads


@pytest.mark.parametrize("text, value", [
    ("off", "off"), ("on", "on"), ("yes", "yes"), ("no", "no"), ("Off", "Off"),
    ("true", True), ("False", False), ("2", 2), ("0.5", 0.5), ("null", None),
    ("[1, off]", [1, "off"]), ("{type: none}", {"type": "none"})])
def test_only_true_and_false_are_booleans(text: str, value: object) -> None:
    assert loads(text) == value


def test_the_documented_quick_try_override_reaches_the_config() -> None:
    sets = parse_sets(["pareto.shrink=off", "schedule={type: none}", "n_trials=4"])
    assert sets == {"pareto.shrink": "off", "schedule": {"type": "none"}, "n_trials": 4}
    cfg = load_study("quickstart", overrides=sets)
    assert cfg.pareto.shrink == "off" and cfg.schedule.type == "none"


def test_a_study_file_may_write_off_unquoted(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "q.yaml"
    raw = find_study("quickstart").read_text()
    path.write_text(raw.replace("pareto: {shrink: prior}", "pareto: {shrink: off}"))
    cfg = load_study(path)
    assert cfg.pareto.shrink == "off"
