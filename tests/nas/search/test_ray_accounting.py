"""Exact trial accounting on the Ray backend: ``n_trials`` complete trials in the Optuna storage,
no more, none RUNNING; a rerun of a finished study adds none; SIGTERM fails the running trials
with the signal as their reason, shuts Ray down and exits non-zero, and a rerun finishes exactly
the remainder; a ``space_pool`` study samples only its pool.

One local Ray (loopback, see tests/conftest.py) serves the in-process runs of this module; the
signal test starts its own in a ``hwnas search`` subprocess."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from study_files import REPO, TABLE, live_raw, state_counts, stored_study, tabular_raw, write_study

from nas.cli import main
from nas.search.optuna_driver import Interrupted
from nas.search.ray_utils import STOP, copy_trial, stop_on_signals
from nas.study import store
from nas.study.config import validate_study

optuna.logging.set_verbosity(optuna.logging.WARNING)
_RAY = {"cpus_per_trial": 1, "max_concurrent": 2}


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    """One Ray for the module's in-process runs (the driver leaves a Ray it did not start)."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _search(path: Path, out: Path) -> int:
    return main(["search", str(path), "--out", str(out), "--no-progress"])


# -- SIGTERM to a real `hwnas search` (first: its Ray is the only one on the host) -------
def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc: the Ray processes a driver started)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, todo = set(), [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found.update(kids)
        todo += kids
    return found


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_complete(db: Path, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if db.exists() and store.sqlite_state_counts(db).get("COMPLETE", 0) >= 1:
            return
        time.sleep(0.3)
    raise AssertionError(f"no trial completed (exit {proc.poll()})")


@pytest.mark.slow
def test_sigterm_fails_the_running_trials_and_a_rerun_finishes_the_rest(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    # Digital accuracy: the accounting is under test, not the analog scoring, which each Ray
    # worker would import and run on top (about a minute of the test's time). One trial at a
    # time on one reused worker: the first completes, the second runs when the signal comes,
    # and one worker process (not two) imports the library and trains on a 2-core host.
    raw = live_raw("stopped", n_trials=2, backend="ray", ray={**_RAY, "max_concurrent": 1},
                   objectives=[{"metric": "accuracy"}, {"metric": "latency"}],
                   train={"steps": 40, "batch_size": 64})
    path = write_study(tmp_path, raw)
    cmd = [sys.executable, "-m", "nas.cli", "search", str(path), "--out", str(tmp_path),
           "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _wait_complete(tmp_path / "stopped" / "study.db", proc)
    time.sleep(3)  # the next trial starts in a Ray worker
    ray_procs = _descendants(proc.pid)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode != 0
    deadline = time.time() + 30
    while time.time() < deadline and any(_alive(p) for p in ray_procs):
        time.sleep(0.5)
    assert ray_procs and not [p for p in ray_procs if _alive(p)]  # Ray was shut down
    study = stored_study(tmp_path, "stopped")
    failed = study.get_trials(states=(TrialState.FAIL,))
    reasons = {t.user_attrs.get("fail_reason") for t in failed}
    assert failed and reasons == {"interrupted by SIGTERM"}, err.decode()[-3000:]
    assert not study.get_trials(states=(TrialState.RUNNING,))
    request.getfixturevalue("local_ray")  # started now: two Ray heads on one host would race
    assert _search(path, tmp_path) == 0
    assert state_counts(stored_study(tmp_path, "stopped")) == {"COMPLETE": 2, "FAIL": len(failed)}


# -- in-process runs on the module's Ray ------------------------------------------------------
@pytest.mark.slow
def test_exactly_n_trials_and_a_rerun_adds_none(tmp_path: Path, local_ray: None) -> None:
    path = write_study(tmp_path, tabular_raw("exact", n_trials=20, backend="ray", ray=_RAY))
    assert _search(path, tmp_path) == 0
    assert state_counts(stored_study(tmp_path, "exact")) == {"COMPLETE": 20}
    assert _search(path, tmp_path) == 0  # finished: nothing to add, nothing copied twice
    study = stored_study(tmp_path, "exact")
    assert state_counts(study) == {"COMPLETE": 20}
    ids = [t.user_attrs["ray_trial_id"] for t in study.trials]
    assert len(set(ids)) == 20


@pytest.mark.slow
def test_a_pool_study_samples_only_its_pool_and_failures_are_made_up(
        tmp_path: Path, local_ray: None) -> None:
    table = pd.read_parquet(TABLE)
    pool = table["arch"].iloc[100:104].tolist()
    table.drop(index=table.index[103]).to_parquet(tmp_path / "table.parquet")  # pool[3] fails
    (tmp_path / "pool.txt").write_text("\n".join(pool) + "\n")
    raw = tabular_raw("pooled", n_trials=3, backend="ray", ray=_RAY, sampler="random",
                      space_pool=str(tmp_path / "pool.txt"),
                      tabular={"path": str(tmp_path / "table.parquet")})
    assert _search(write_study(tmp_path, raw), tmp_path) == 0
    study = stored_study(tmp_path, "pooled")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 3 and not study.get_trials(states=(TrialState.RUNNING,))
    assert all(t.user_attrs["arch"] in pool and set(t.params) == {"pool_index"}
               and pool[t.params["pool_index"]] == t.user_attrs["arch"] for t in study.trials)
    failed = study.get_trials(states=(TrialState.FAIL,))
    assert failed and all(t.user_attrs["arch"] == pool[3]
                          and "tabular lookup" in t.user_attrs["fail_reason"] for t in failed)


# -- copying Ray trials into the storage: once, and never past n_trials -----------------------
def _ray_trial(trial_id: str, config: dict, result: dict | None) -> SimpleNamespace:
    """What ``copy_trial`` reads of a Ray ``Trial`` (its public attributes)."""
    return SimpleNamespace(trial_id=trial_id, config=config, last_result=result or {},
                           checkpoint=None, error_file=None)


def _copy_setup(tmp_path: Path, n_trials: int) -> tuple:
    cfg = validate_study(tabular_raw("copies", n_trials=n_trials, backend="ray"))
    study = store.create_or_load(cfg, store.open_storage(cfg.storage_url(tmp_path)))
    config = {"arch": "", **cfg.search_space().decode(
        "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|")}
    ok = {f"objective__{o.key}": 0.5 for o in cfg.objectives_resolved()}
    return cfg, study, config, ok


def test_an_interrupted_trial_rerun_by_restore_is_stored_complete(tmp_path: Path) -> None:
    cfg, study, config, ok = _copy_setup(tmp_path, n_trials=2)
    copy_trial(cfg, study, tmp_path, _ray_trial("a", config, None), errored=False,
               reason="interrupted by SIGTERM")
    copy_trial(cfg, study, tmp_path, _ray_trial("a", config, None), errored=False,
               reason="interrupted by SIGTERM")  # the same failure twice: stored once
    copy_trial(cfg, study, tmp_path, _ray_trial("a", config, ok), errored=False)
    copy_trial(cfg, study, tmp_path, _ray_trial("a", config, ok), errored=False)
    assert state_counts(study) == {"FAIL": 1, "COMPLETE": 1}
    fail = study.get_trials(states=(TrialState.FAIL,))[0]
    assert fail.user_attrs["fail_reason"] == "interrupted by SIGTERM"


def test_a_complete_trial_past_n_trials_is_stored_pruned(tmp_path: Path) -> None:
    cfg, study, config, ok = _copy_setup(tmp_path, n_trials=2)
    for tid in ("a", "b", "c"):  # a restored run re-created a trial already copied
        copy_trial(cfg, study, tmp_path, _ray_trial(tid, config, ok), errored=False)
    assert state_counts(study) == {"COMPLETE": 2, "PRUNED": 1}
    extra = study.get_trials(states=(TrialState.PRUNED,))[0]
    assert extra.user_attrs["ray_trial_id"] == "c"
    assert extra.user_attrs["fail_reason"].startswith("surplus: n_trials=2")


# -- signals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_asks_tune_to_stop_and_a_second_one_raises(sig: signal.Signals) -> None:
    with stop_on_signals():
        assert STOP.name is None
        os.kill(os.getpid(), sig)
        assert STOP.name == sig.name
        with pytest.raises(Interrupted, match=f"interrupted by {sig.name}"):
            os.kill(os.getpid(), sig)
    assert signal.getsignal(sig) is not None and STOP.name is None
