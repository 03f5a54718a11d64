"""A storage that cannot be opened is one clear error, never a traceback, and nothing is lost:
a damaged ``study.db`` points to the ``trials.parquet``/``trials.csv`` beside it, an unreachable
server names its URL with the password hidden, and a bare ``postgresql://`` URL gets the driver
hwnas installs."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_files import tabular_raw, write_study

from hwnas.common.errors import ConfigError
from nas.cli import main
from nas.study.store import open_storage, with_driver


def test_a_damaged_study_db_names_the_tables_beside_it(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = write_study(tmp_path, tabular_raw("damaged", n_trials=6))
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    folder = tmp_path / "damaged"
    assert (folder / "trials.csv").is_file()
    kept = (folder / "trials.csv").read_bytes()
    (folder / "study.db").write_bytes(b"\x13not a database" * 400)
    capsys.readouterr()
    for command in ("pareto", "report", "export"):
        assert main([command, str(folder)]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and err.count("\n") == 1, err
        assert "storage that can be opened" in err and "study.db:" in err
        assert "trials.csv" in err and str(folder) in err
    assert (folder / "trials.csv").read_bytes() == kept  # nothing lost


def test_an_unreachable_server_is_one_line_with_the_password_hidden() -> None:
    with pytest.raises(ConfigError) as err:
        open_storage("postgresql://hwnas:s3cret@127.0.0.1:9/none")
    text = str(err.value)
    assert "s3cret" not in text and "hwnas:***@127.0.0.1:9/none" in text
    assert "Connection refused" in text and "pg_isready" in text


@pytest.mark.parametrize("url, want", [
    ("postgresql://u@h/db", "postgresql+psycopg2://u@h/db"),
    ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
    ("sqlite:///x.db", "sqlite:///x.db")])
def test_a_bare_postgresql_url_gets_the_installed_driver(url: str, want: str) -> None:
    assert with_driver(url) == want
