"""Watching a study from another process: state counts read from the SQLite file without
writing to it (no schema created, nothing changed)."""

from __future__ import annotations

from pathlib import Path

import optuna

from hwnas.common.errors import ConfigError
from nas.study import store

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_counts_of_a_missing_or_empty_file_are_empty(tmp_path: Path) -> None:
    assert store.sqlite_state_counts(tmp_path / "none.db") == {}
    assert not (tmp_path / "none.db").exists()  # read-only: the file was not created
    (tmp_path / "empty.db").touch()
    assert store.sqlite_state_counts(tmp_path / "empty.db") == {}


def test_counts_match_the_study(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    study = optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    study.ask()
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)
    before = db.read_bytes()
    assert store.sqlite_state_counts(db) == {"COMPLETE": 3, "RUNNING": 1, "FAIL": 1}
    assert db.read_bytes() == before


def test_storage_opens_when_another_process_just_created_the_schema(tmp_path: Path,
                                                                     monkeypatch) -> None:
    """Workers started together on a new database race over the schema: the loser's first
    ``RDBStorage`` fails on the ``alembic_version`` insert; opening retries and finds it."""
    from sqlalchemy.exc import IntegrityError

    real, calls = optuna.storages.RDBStorage, []

    def racing(url: str, **kwargs):  # noqa: ANN202
        calls.append(url)
        if len(calls) == 1:
            real(url)  # the other worker wins the schema ...
            raise IntegrityError("INSERT INTO alembic_version", {}, Exception("UNIQUE"))
        return real(url, **kwargs)  # ... and this one finds it on the retry

    monkeypatch.setattr(optuna.storages, "RDBStorage", racing)
    storage = store.open_storage(f"sqlite:///{tmp_path / 'new.db'}", heartbeat_s=1)
    assert len(calls) == 2
    monkeypatch.undo()  # Optuna checks storages with isinstance(RDBStorage)
    study = optuna.create_study(storage=storage, study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert store.sqlite_state_counts(tmp_path / "new.db") == {"COMPLETE": 1}


def test_storage_errors_that_persist_are_raised(tmp_path: Path, monkeypatch) -> None:
    from sqlalchemy.exc import OperationalError

    def broken(url: str, **kwargs):  # noqa: ANN202
        raise OperationalError("SELECT 1", {}, Exception("disk I/O error"))

    monkeypatch.setattr(optuna.storages, "RDBStorage", broken)
    monkeypatch.setattr(store.time, "sleep", lambda s: None)
    try:
        store.open_storage(f"sqlite:///{tmp_path / 'x.db'}")
    except ConfigError as err:  # one line naming the URL and the database's words
        assert "disk I/O error" in str(err) and "x.db" in str(err)
    else:
        raise AssertionError("a persistent storage error must be raised")
