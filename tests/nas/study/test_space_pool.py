"""A study restricted to a pool of archs (``space_pool``): it samples and scores only those."""

from __future__ import annotations

import random
from pathlib import Path

import optuna
import pytest

from hwnas.common.errors import ConfigError
from search_spaces import get_space
from search_spaces.pool import read_pool

POOL = ["rn:s16-d1r1c24", "rn:s24-d1r1c16", "rn:s32-d2r1c16", "rn:s16-d2r2c16"]


def _pool_file(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "pool.txt"
    path.write_text("# truth archs\n" + "\n".join(lines) + "\n\n")
    return path


def test_every_sampler_draw_and_mutation_stays_in_the_pool(tmp_path: Path) -> None:
    space = read_pool(get_space("resnet"), _pool_file(tmp_path, POOL))
    assert space.size() == 4 and space.name == "resnet"
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    drawn = {space.sample(study.ask()) for _ in range(40)}
    assert drawn == set(POOL)
    rng = random.Random(0)
    assert all(space.mutate(a, rng) in POOL for a in POOL for _ in range(10))
    assert all(space.encode(space.decode(a)) == a for a in POOL)  # one string per arch


def test_bad_pool_lines_are_reported_at_once(tmp_path: Path) -> None:
    path = _pool_file(tmp_path, [POOL[0], "rn:s17-d1r1c24", "mb:oops", POOL[1]])
    with pytest.raises(ConfigError) as err:
        read_pool(get_space("resnet"), path)
    text = str(err.value)
    assert "space_pool line 2" in text and "space_pool line 3" in text
    with pytest.raises(ConfigError, match="must be a file"):
        read_pool(get_space("resnet"), tmp_path / "missing.txt")


def test_an_arch_outside_the_pool_is_a_clear_error(tmp_path: Path) -> None:
    space = read_pool(get_space("resnet"), _pool_file(tmp_path, POOL))
    with pytest.raises(ConfigError, match="must be one of the pool's archs"):
        space.validate("rn:s32-d1r1c16")


def test_a_study_file_names_its_pool(tmp_path: Path) -> None:
    from nas.study.config import validate_study

    raw = {"name": "pool", "space": "resnet", "space_pool": str(_pool_file(tmp_path, POOL)),
           "objectives": [{"metric": "params"}, {"metric": "macs"}]}
    cfg = validate_study(raw)
    assert cfg.search_space().archs == POOL
    bad = {**raw, "space_pool": str(_pool_file(tmp_path, ["rn:nope"]))}
    with pytest.raises(ConfigError, match="space_pool line 1"):
        validate_study(bad)
