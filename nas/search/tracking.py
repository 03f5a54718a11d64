"""Experiment tracking: a study's finished trials logged to MLflow and to TensorBoard.

Trials are logged after each run from the study storage, so every backend (one process, Optuna
workers, Ray trials on other nodes) is tracked the same way, by the process that started the run,
and a worker needs no tracking set-up. MLflow: through MLflow's own ``MlflowClient`` (one MLflow
run per trial in an experiment named after the study; params, objective values and their SEs as
metrics, user attributes as tags), into a local file store (a folder) or a tracking server URI;
the client rather than ``mlflow.start_run`` so that no active run or tracking URI is left set in
the caller's process. An infeasible trial is tagged ``feasible=false`` with metric ``feasible``
0 and only the objectives it measured: the worst-value placeholders of a trial skipped by a
budget are not accuracies. TensorBoard: one tensorboardX event folder per trial with its
hyper-parameters and metrics (the HParams tab). A trial is logged once: the numbers already
logged are kept in the study's user attributes. Needs the ``tracking`` extra
(``pip install hwnas[tracking]``).
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import optuna
from optuna.trial import FrozenTrial, TrialState

if TYPE_CHECKING:
    from nas.study.config import StudyConfig

_LOGGED = "tracking_logged"


def mlflow_uri(uri: str) -> str:
    """A plain folder becomes a ``file://`` URI (a local file store); URIs pass unchanged
    (``sqlite:///mlflow.db``, ``http://host:5000``, ``file:///abs/folder``)."""
    if "://" in uri:
        return uri
    return Path(uri).expanduser().resolve().as_uri()


@contextlib.contextmanager
def _allow_file_store(uri: str) -> Iterator[None]:
    """MLflow 3.17 keeps its file store in maintenance mode and refuses it unless
    ``MLFLOW_ALLOW_FILE_STORE=true``; a folder named in the study file is that opt-in, for the
    logging only (the caller's environment is restored). Other URIs are left alone."""
    key, before = "MLFLOW_ALLOW_FILE_STORE", os.environ.get("MLFLOW_ALLOW_FILE_STORE")
    if uri.startswith("file:"):
        os.environ[key] = "true"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def log_study(cfg: StudyConfig, study: optuna.Study, study_dir: Path) -> int:
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


def measured(trial: FrozenTrial, keys: list[str]) -> dict[str, float]:
    """The objective values a trial measured: all of them when it is feasible; when infeasible,
    only those it stored as metrics (a trial skipped by a cost budget has placeholders)."""
    if trial.values is None:
        return {}
    values = dict(zip(keys, trial.values, strict=True))
    if trial.user_attrs.get("feasible", True):
        return values
    return {k: v for k, v in values.items() if k in trial.user_attrs and math.isfinite(v)}


def _mlflow(study: optuna.Study, trials: list[FrozenTrial], keys: list[str], uri: str) -> None:
    from mlflow import MlflowClient  # the tracking extra: imported only when asked for

    with _allow_file_store(uri):
        client = MlflowClient(tracking_uri=uri)
        found = client.get_experiment_by_name(study.study_name)
        experiment = (found.experiment_id if found is not None
                      else client.create_experiment(study.study_name))
        for trial in trials:
            _mlflow_run(client, experiment, trial, keys)


def _mlflow_run(client: Any, experiment: str, trial: FrozenTrial, keys: list[str]) -> None:
    from mlflow.entities import Metric, Param, RunTag

    feasible = trial.state == TrialState.COMPLETE and bool(trial.user_attrs.get("feasible", True))
    stamp = _ms(trial.datetime_complete or trial.datetime_start)
    metrics = {**measured(trial, keys), "feasible": float(feasible)}
    metrics.update({f"{k}_se": float(trial.user_attrs[f"{k}_se"]) for k in keys
                    if k in metrics and isinstance(trial.user_attrs.get(f"{k}_se"), int | float)})
    tags = {k: _text(v) for k, v in trial.user_attrs.items()}
    tags.update(trial_number=str(trial.number), state=trial.state.name,
                feasible=str(feasible).lower())
    run = client.create_run(experiment, start_time=_ms(trial.datetime_start),
                            run_name=str(trial.number))
    client.log_batch(run.info.run_id,
                     metrics=[Metric(k, v, stamp, 0) for k, v in metrics.items()],
                     params=[Param(k, _text(v)[:6000]) for k, v in trial.params.items()],
                     tags=[RunTag(k, v) for k, v in tags.items()])
    client.set_terminated(run.info.run_id, "FINISHED" if trial.state == TrialState.COMPLETE
                          else "FAILED", end_time=stamp)


def _ms(when: Any) -> int | None:
    return int(when.timestamp() * 1000) if when is not None else None


def _text(value: Any) -> str:
    return str(value)[:5000]  # MLflow's tag value limit is 8000; a reason may be longer


def _tensorboard(trials: list[FrozenTrial], keys: list[str], root: Path) -> None:
    from tensorboardX import SummaryWriter

    for trial in trials:
        if trial.values is None:
            continue
        params = {k: v if isinstance(v, int | float | str | bool) else str(v)
                  for k, v in trial.params.items()}
        params["arch"] = str(trial.user_attrs.get("arch", ""))
        metrics = {**measured(trial, keys),
                   "feasible": float(bool(trial.user_attrs.get("feasible", True)))}
        with SummaryWriter(str(root / f"trial_{trial.number:05d}")) as writer:
            writer.add_hparams(params, metrics, name=".", global_step=trial.number)
