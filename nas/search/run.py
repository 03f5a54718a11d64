"""Running a study: ``run_search(cfg)`` runs or resumes it with its backend (the entry point the
CLI and ``nas.api.run`` share), ``optuna_logs`` scopes Optuna's logging to a run, and
``failure_summary`` says why a study produced nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from pathlib import Path

import optuna
import pandas as pd
from optuna.trial import TrialState

from nas.search.optuna_driver import run as run_optuna
from nas.search.ray_auth import use_token_if_present
from nas.search.tracking import log_study
from nas.study import store
from nas.study.config import StudyConfig


class _NoTraceback(logging.Filter):
    """Keeps Optuna's one-line 'Trial N failed ... because of ...' and drops its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


@contextlib.contextmanager
def optuna_logs(level: int = logging.WARNING, *, tracebacks: bool = False) -> Iterator[None]:
    """Optuna's messages at ``level`` through a handler of ours (failed trials in one line unless
    ``tracebacks``); the caller's verbosity and handlers come back on exit."""
    logger = logging.getLogger("optuna")
    before, propagate = optuna.logging.get_verbosity(), logger.propagate
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("[optuna %(levelname)s] %(message)s"))
    if not tracebacks:
        handler.addFilter(_NoTraceback())
    optuna.logging.disable_default_handler()
    logger.addHandler(handler)
    logger.propagate = False  # a root handler (logging.basicConfig) would print the traceback
    optuna.logging.set_verbosity(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        optuna.logging.enable_default_handler()
        optuna.logging.set_verbosity(before)


def run_search(cfg: StudyConfig, *, out_root: str | Path = "runs", progress: bool | str = True
               ) -> Path:
    """Run or resume ``cfg`` with its backend; returns ``runs/<study>``. ``progress``: ``auto``
    (``True``: a bar on a terminal, else a line per finished trial), ``bar``, ``lines``, ``off``
    (``False``)."""
    reopened = (Path(out_root) / cfg.name / "config.yaml").is_file()
    study_dir = store.prepare_dir(cfg, out_root)
    if reopened and (note := reopened_note(cfg, study_dir)):
        logging.getLogger("hwnas").warning(note)
    if cfg.backend == "ray":
        use_token_if_present(cfg.ray.address)  # before Ray is imported: Ray reads it at import
        # Deferred: the Ray driver imports ray (seconds), which an Optuna study never needs.
        from nas.search.ray_driver import run as run_ray

        run_ray(cfg, study_dir, progress=progress)
    else:
        run_optuna(cfg, study_dir, workers=cfg.workers, progress=progress)
    if cfg.tracking.mlflow_uri or cfg.tracking.tensorboard:
        log_study(cfg, store.load_dir(study_dir)[1], study_dir)
    return study_dir


def reopened_note(cfg: StudyConfig, study_dir: Path) -> str | None:
    """What running ``cfg`` again in a folder that holds it will do: ``n_trials`` counts the
    complete trials of earlier runs, so a finished study runs nothing, and says so."""
    try:
        study = optuna.load_study(study_name=cfg.name,
                                  storage=store.open_storage(cfg.storage_url(study_dir)))
    except KeyError:  # the folder has a config but its storage no study yet
        return None
    done = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if not done:
        return None
    where = f"reopened study {cfg.name} in {study_dir} with {done} complete trial(s)"
    if done >= cfg.n_trials:
        return (f"{where}: n_trials={cfg.n_trials} is reached, so this run trains nothing; "
                "raise n_trials (--n-trials N, or n_trials=N in Python) or pass a new out folder "
                "to start afresh")
    return f"{where}: continuing to n_trials={cfg.n_trials}"


def failure_summary(study: optuna.Study) -> str | None:
    """None when a trial completed; else why the trials failed (the commonest reasons first)."""
    trials = study.get_trials(deepcopy=False)
    if any(t.state == TrialState.COMPLETE for t in trials):
        return None
    failed = [t for t in trials if t.state == TrialState.FAIL]
    if not failed:
        return "no trial ran (n_trials reached, timeout, or every trial pruned)"
    reasons = pd.Series([t.user_attrs.get("fail_reason") or "no reason recorded (see the log)"
                         for t in failed]).value_counts()
    lines = [f"  {n} x {reason.splitlines()[0][:300]}" for reason, n in reasons.items()]
    return f"all {len(failed)} trial(s) failed:\n" + "\n".join(lines)
