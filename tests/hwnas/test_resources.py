"""Shipped files: studies and the NB201 table are found inside the installed package first (the
wheel's layout, ``hwnas/studies``, ``hwnas/data``), in the checkout second, from any folder."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hwnas import resources
from nas.study.checks import resolve_path
from nas.study.files import find_study


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package laid out as the wheel installs it, with one study and the table."""
    pkg = tmp_path / "site-packages" / "hwnas"
    (pkg / "studies").mkdir(parents=True)
    (pkg / "data").mkdir()
    shutil.copy(resources.CHECKOUT / "studies" / "nb201_table.yaml", pkg / "studies")
    (pkg / "data" / "nb201_fmnist.parquet").write_bytes(b"table")
    monkeypatch.setattr(resources.resources, "files", lambda _name: pkg)
    monkeypatch.chdir(tmp_path)
    return pkg


def test_installed_package_comes_first(installed: Path) -> None:
    assert resources.studies_dir() == installed / "studies"
    table = resources.shipped("hwnas/data/nb201_fmnist.parquet")
    assert table == installed / "data" / "nb201_fmnist.parquet"
    assert resolve_path("hwnas/data/nb201_fmnist.parquet") == table  # what a study names
    assert resolve_path("bench/data/nb201_fmnist.parquet") == table  # the older spelling


def test_checkout_is_the_fallback(installed: Path) -> None:
    (installed / "data" / "nb201_fmnist.parquet").unlink()
    assert resources.shipped("hwnas/data/nb201_fmnist.parquet") == (
        resources.CHECKOUT / "hwnas" / "data" / "nb201_fmnist.parquet")
    assert resources.shipped("hwnas/data/no_such_table.parquet") is None


def test_a_checkout_finds_its_own_studies() -> None:
    assert resources.studies_dir() == resources.CHECKOUT / "studies"  # editable: no copy inside
    assert find_study("nb201_table") == resources.CHECKOUT / "studies" / "nb201_table.yaml"


def test_the_wheel_maps_what_resources_looks_for() -> None:
    text = (resources.CHECKOUT / "pyproject.toml").read_text()
    for source, target in resources.FORCE_INCLUDED.items():
        assert f'"{source}" = "hwnas/{target}"' in text
    assert "bench/" not in text.split("force-include]", 1)[1]  # the wheel ships no bench file
