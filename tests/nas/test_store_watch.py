"""Watching a study from another process: state counts read from the SQLite file without
writing to it (no schema created, nothing changed)."""

from __future__ import annotations

from pathlib import Path

import optuna

from nas import store

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
