"""A bare ``postgresql://`` URL gets the driver hwnas installs (psycopg2): SQLAlchemy 2.1 reads it
as psycopg 3. (A storage that cannot be opened: the rows of tests/nas/cli/test_bad_inputs.py.)"""

from __future__ import annotations

import pytest

from nas.study.store import with_driver


@pytest.mark.parametrize("url, want", [
    ("postgresql://u@h/db", "postgresql+psycopg2://u@h/db"),
    ("postgresql+psycopg2://u@h/db", "postgresql+psycopg2://u@h/db"),
    ("sqlite:///x.db", "sqlite:///x.db")])
def test_a_bare_postgresql_url_gets_the_installed_driver(url: str, want: str) -> None:
    assert with_driver(url) == want
