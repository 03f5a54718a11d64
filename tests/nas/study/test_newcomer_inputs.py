"""What a new user types: `--set` and study files read `off`/`on`/`yes`/`no` as typed (YAML 1.2),
and `hwnas export --onnx` (the budgets no candidate can meet: tests/nas/test_bad_inputs.py)."""

from __future__ import annotations

import pytest

from nas.commands.search import parse_sets
from nas.study.files import find_study, load_study
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


@pytest.mark.parametrize("flags, onnx", [([], None), (["--onnx"], True), (["--no-onnx"], False)])
def test_export_can_turn_onnx_on_for_a_study_stored_without_it(flags: list, onnx: object) -> None:
    from nas.cli import build_parser

    assert build_parser().parse_args(["export", "runs/x", *flags]).onnx is onnx


def test_export_refuses_both_onnx_flags() -> None:
    from nas.cli import build_parser

    with pytest.raises(SystemExit) as err:
        build_parser().parse_args(["export", "runs/x", "--onnx", "--no-onnx"])
    assert err.value.code == 2
