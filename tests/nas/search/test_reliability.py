"""Reliability: kill -9 mid-study then rerun; two workers on a real PostgreSQL server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState
from pg_server import pg_server, unavailable
from study_files import REPO, live_raw, tabular_raw, write_study

from nas.cli import main
from nas.study import store

pytestmark = pytest.mark.slow


def _cmd(path: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "nas.cli", "search", str(path), "--out", str(out),
            "--no-progress"]


def _states(db: Path, name: str) -> dict[str, list]:
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{db}")
    out: dict[str, list] = {}
    for t in study.trials:
        out.setdefault(t.state.name, []).append(t)
    return out


def test_kill_9_then_rerun_resumes_without_losing_trials(tmp_path: Path) -> None:
    path = write_study(tmp_path, live_raw("killed", n_trials=5, space="resnet"))
    db = tmp_path / "killed" / "study.db"
    proc = subprocess.Popen(_cmd(path, tmp_path), cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    while time.time() < deadline:  # wait for two complete trials and a third one running
        time.sleep(0.5)
        counts = store.sqlite_state_counts(db)
        if counts.get("COMPLETE", 0) >= 2 and counts.get("RUNNING"):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = {t.number: (t.values, t.user_attrs["arch"]) for t in _states(db, "killed")["COMPLETE"]}
    killed = [t.params for t in _states(db, "killed").get("RUNNING", [])]
    assert len(before) >= 2 and killed
    rerun = subprocess.run(_cmd(path, tmp_path), cwd=REPO, check=True, timeout=900,
                           stdout=subprocess.PIPE, text=True)
    states = _states(db, "killed")
    done = {t.number: (t.values, t.user_attrs["arch"]) for t in states["COMPLETE"]}
    assert len(done) == 5
    assert {n: done[n] for n in before} == before  # every completed trial kept as it was
    assert not states.get("RUNNING")
    dead = states["FAIL"]  # the killed trial: its process is gone, so the rerun failed it at once
    assert [t.params for t in dead] == killed and "gone" in rerun.stdout
    # queued by the dead-process check (the heartbeat's retry would mark system attrs instead)
    retried = [t for t in states["COMPLETE"] if t.user_attrs.get("retry_of") == dead[0].number]
    # the retry keeps what the killed trial had sampled (it may have died mid-sampling)
    assert retried and killed[0].items() <= retried[0].params.items()


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_postgresql_two_workers(tmp_path: Path) -> None:
    with pg_server() as url:
        raw = tabular_raw("pg", n_trials=30, storage=url)
        assert main(["search", str(write_study(tmp_path, raw)), "--out", str(tmp_path),
                     "--workers", "2", "--no-progress"]) == 0
        study = optuna.load_study(study_name="pg", storage=url)
        trials = study.trials
        done = [t for t in trials if t.state == TrialState.COMPLETE]
        assert 30 <= len(done) <= 31
        assert sorted(t.number for t in trials) == list(range(len(trials)))
        assert len({t._trial_id for t in trials}) == len(trials)
        assert main(["pareto", str(tmp_path / "pg")]) == 0  # later commands find the storage
