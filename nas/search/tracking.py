"""Experiment tracking: a study's finished trials logged to MLflow and to TensorBoard.

Trials are logged after each run from the study storage, so every backend (one process, Optuna
workers, Ray trials on other nodes) is tracked the same way, by the process that started the run,
and a worker needs no tracking set-up. MLflow: optuna-integration's ``MLflowCallback`` (one MLflow
run per trial in an experiment named after the study; params, objective values, user attributes
as tags), into a local file store (a folder) or a tracking server URI. TensorBoard: one
tensorboardX event folder per trial with its hyper-parameters and metrics (the HParams tab).
A trial is logged once: the numbers already logged are kept in the study's user attributes.
Needs the ``tracking`` extra (``pip install hwnas[tracking]``). optuna-integration 4.9 deprecates
``MLflowCallback`` (removal planned for 6.0, which the extra's bound excludes).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

_LOGGED = "tracking_logged"


def mlflow_uri(uri: str) -> str:
    """A plain folder becomes a ``file://`` URI (a local file store); URIs pass unchanged
    (``sqlite:///mlflow.db``, ``http://host:5000``, ``file:///abs/folder``)."""
    if "://" in uri:
        return uri
    return Path(uri).expanduser().resolve().as_uri()


def _allow_file_store(uri: str) -> None:
    # MLflow 3.17 keeps its file store in maintenance mode and refuses it unless this variable
    # opts in; a folder named in the study file is that opt-in. Database and server URIs are
    # left alone.
    if uri.startswith("file:"):
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")


def log_study(cfg: Any, study: optuna.Study, study_dir: Path) -> int:
    """Log every finished trial not logged before; returns how many were logged now."""
    t = cfg.tracking
    if not (t.mlflow_uri or t.tensorboard):
        return 0
    done = set(study.user_attrs.get(_LOGGED, []))
    new = [tr for tr in study.get_trials(deepcopy=False,
                                         states=(TrialState.COMPLETE, TrialState.FAIL))
           if tr.number not in done]
    keys = [o.key for o in cfg.objectives_resolved()]
    if t.mlflow_uri:
        _mlflow(study, new, keys, mlflow_uri(t.mlflow_uri))
    if t.tensorboard:
        _tensorboard(new, keys, Path(t.tensorboard))
    study.set_user_attr(_LOGGED, sorted(done | {tr.number for tr in new}))
    return len(new)


def _mlflow(study: optuna.Study, trials: list[FrozenTrial], keys: list[str], uri: str) -> None:
    from optuna_integration import MLflowCallback

    _allow_file_store(uri)
    callback = MLflowCallback(tracking_uri=uri, metric_name=keys, create_experiment=True)
    for trial in trials:
        callback(study, trial)


def _tensorboard(trials: list[FrozenTrial], keys: list[str], root: Path) -> None:
    from tensorboardX import SummaryWriter

    for trial in trials:
        if trial.values is None:
            continue
        params = {k: v if isinstance(v, int | float | str | bool) else str(v)
                  for k, v in trial.params.items()}
        params["arch"] = str(trial.user_attrs.get("arch", ""))
        with SummaryWriter(str(root / f"trial_{trial.number:05d}")) as writer:
            writer.add_hparams(params, dict(zip(keys, trial.values, strict=True)),
                               name=".", global_step=trial.number)
