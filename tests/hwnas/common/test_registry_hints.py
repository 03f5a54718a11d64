"""Every hint a registry miss can print names a command that exists: the fix of each registry's
``get`` and of a study file's unknown names is parsed, and each `hwnas ...` command in it must be
a path of subcommands (and flags) in the parser behind `hwnas --help`."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

import nas.algorithms.samplers  # noqa: F401 - each module below creates one registry
import nas.study.objectives  # noqa: F401
import search_spaces.supernet.registry  # noqa: F401
from hwnas.common import registry
from hwnas.common.errors import ConfigError
from nas.cli import build_parser
from nas.study.config import validate_study

import hw_cost.backends  # noqa: F401  isort: skip
import hw_cost.forms  # noqa: F401  isort: skip
import hw_cost.regressor  # noqa: F401  isort: skip
import hwnas.compress.prune  # noqa: F401  isort: skip

COMMAND = re.compile(r"`(hwnas [^`]+)`")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def command_exists(command: str) -> bool:
    """``hwnas data list`` or ``hwnas search X --workers 2``: each word a subcommand in turn,
    then positional values, and every ``--flag`` known to the last subcommand."""
    words = shlex.split(command)[1:]
    parser, found = build_parser(), False
    while words and words[0] in _subparsers(parser):
        parser, found = _subparsers(parser)[words.pop(0)], True
    flags = {s for a in parser._actions for s in a.option_strings}
    return found and all(w.split("=")[0] in flags for w in words if w.startswith("-"))


def hints(err: ConfigError) -> list[str]:
    return [cmd for p in err.problems for cmd in COMMAND.findall(p.fix)]


def test_the_checker_rejects_commands_that_do_not_exist() -> None:
    assert command_exists("hwnas spaces list") and command_exists("hwnas run x --workers 2")
    assert not command_exists("hwnas supernets list")
    assert not command_exists("hwnas search x --data-root /d")


def test_registries_are_all_known() -> None:
    kinds = {r.kind for r in registry.ALL}
    assert {"space", "data set", "hardware model", "sampler", "metric", "supernet"} <= kinds


@pytest.mark.parametrize("reg", registry.ALL, ids=lambda r: r.kind)
def test_registry_miss_names_only_existing_commands(reg: registry.Registry) -> None:
    with pytest.raises(ConfigError) as info:
        reg.get("no-such-name")
    named = hints(info.value)
    assert all(command_exists(c) for c in named), named
    if reg.kind in registry.LIST_COMMANDS:  # a kind the CLI lists is pointed at
        assert named == [registry.LIST_COMMANDS[reg.kind]]


def test_study_name_misses_name_only_existing_commands() -> None:
    raw = {"name": "bad", "space": "no-space", "n_trials": 1, "data": {"name": "no-data"},
           "objectives": [{"metric": "accuracy", "hw": "no-hw"}, {"metric": "latency"}],
           "sampler": "no-sampler", "hw_eval": {"options": {"pcm": {"adc_bits": 8}}}}
    with pytest.raises(ConfigError) as info:
        validate_study(raw)
    named = hints(info.value)
    assert {"hwnas spaces list", "hwnas data list"} <= set(named)
    assert all(command_exists(c) for c in named), named
