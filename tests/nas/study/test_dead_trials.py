"""A RUNNING trial whose process is gone (``kill -9``) is failed and queued again on the next
run at once; a trial whose process lives, or runs on another host, is left alone."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import optuna
from optuna.trial import TrialState

from nas.study import store


def _running(study: optuna.Study, proc: dict) -> int:
    trial = study.ask()
    trial.suggest_int("depth", 1, 8)
    trial.set_user_attr(store.PROCESS, proc)
    return trial.number


def test_dead_process_trial_is_failed_and_queued(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    host = socket.gethostname()
    dead = _running(study, {"host": host, "pid": int(gone.stdout), "start": "1"})
    mine = _running(study, store.process_attr())
    reused = _running(study, {**store.process_attr(), "start": "0"})  # pid reused by another
    other = _running(study, {"host": host + "-elsewhere", "pid": int(gone.stdout)})
    lines: list[str] = []
    assert store.fail_dead_trials(study, log=lines.append) == [dead, reused]
    state = {t.number: t.state for t in study.get_trials()}
    assert state[dead] == state[reused] == TrialState.FAIL
    assert state[mine] == state[other] == TrialState.RUNNING
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert sorted(t.user_attrs["retry_of"] for t in queued) == [dead, reused]
    assert "gone" in lines[0] and str(dead) in lines[0]
    assert store.fail_dead_trials(study, log=lines.append) == []  # once only


def test_trial_killed_before_its_objective_is_failed_after_the_grace(tmp_path: Path) -> None:
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    orphan = study.ask().number  # RUNNING, no heartbeat, no process: killed right after ask
    promoted = study.ask()  # a promotion's schedule queues it again itself
    promoted.set_user_attr("promotion", "a@1")
    live = _running(study, store.process_attr())
    assert store.fail_dead_trials(study, log=print) == []  # no grace given: left alone
    assert store.fail_dead_trials(study, log=print, grace_s=3600) == []  # still young
    assert store.fail_dead_trials(study, log=print, grace_s=0) == [orphan, promoted.number]
    state = {t.number: t.state for t in study.get_trials()}
    assert state[orphan] == state[promoted.number] == TrialState.FAIL
    assert state[live] == TrialState.RUNNING
    queued = study.get_trials(states=(TrialState.WAITING,))
    assert [(t.params, t.user_attrs["retry_of"]) for t in queued] == [({}, orphan)]


def test_an_interrupted_process_fails_its_own_running_trials_on_a_fresh_connection(
        tmp_path: Path) -> None:
    """After a stop signal the driver stores FAIL, with the reason, every trial its process
    left RUNNING, even when Optuna's own FAIL did not reach the storage; others' are kept."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    study = optuna.create_study(storage=url, study_name="s")
    mine = _running(study, store.process_attr())
    other = _running(study, {**store.process_attr(), "pid": store.process_attr()["pid"] + 1})
    done = _running(study, store.process_attr())
    study.tell(done, 1.0)
    assert store.fail_own_running(url, "s", "interrupted by SIGTERM") == [mine]
    trials = {t.number: t for t in optuna.load_study(study_name="s", storage=url).get_trials()}
    assert trials[mine].state == TrialState.FAIL
    assert trials[mine].user_attrs["fail_reason"] == "interrupted by SIGTERM"
    assert trials[other].state == TrialState.RUNNING and trials[done].state == TrialState.COMPLETE
    assert store.fail_own_running(url, "s", "interrupted by SIGTERM") == []  # once only
