"""bench.startup.imports: the arms' environments, the table's arithmetic, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.startup import imports
from hwnas.common.errors import ConfigError


def test_the_no_bytecode_arm_points_python_at_an_empty_cache(tmp_path: Path) -> None:
    arms = imports.arms(tmp_path)
    assert arms["bare"] == ("pass", {})
    code, env = arms["no bytecode"]
    assert code == arms["bytecode"][0] and code.startswith("import torch, optuna, aihwkit")
    assert env == {"PYTHONPYCACHEPREFIX": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    assert arms["bytecode"][1] == {}


def test_a_child_in_the_cold_arm_finds_no_bytecode(tmp_path: Path) -> None:
    # the child reports where it would look for bytecode: the empty folder, and writes nothing
    probe = "import sys; assert sys.pycache_prefix and sys.dont_write_bytecode"
    assert imports.one(probe, imports.arms(tmp_path)["no bytecode"][1]) > 0
    assert not any(tmp_path.iterdir())


def test_table_medians_floor_and_ratio() -> None:
    rows = imports.table({"bare": [0.1, 0.1, 0.2], "bytecode": [4.0, 4.4, 5.0],
                          "no bytecode": [11.0, 8.8, 12.0]})
    by = {r["arm"]: r for r in rows}
    assert by["bytecode"]["median s"] == 4.4 and by["bytecode"]["x bytecode"] == 1.0
    assert by["no bytecode"]["x bytecode"] == 2.5  # 11.0 / 4.4
    assert by["no bytecode"]["imports s (median - bare)"] == 10.9
    assert (by["bare"]["min s"], by["bare"]["max s"]) == (0.1, 0.2)


def test_repeats_below_one_are_refused() -> None:
    with pytest.raises(ConfigError, match="repeats: must be at least 1"):
        imports.parse(["--repeats", "0"])
