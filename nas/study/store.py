"""The study folder and its Optuna storage, shared by both drivers and every later command.

``runs/<study>/`` holds ``config.yaml`` (the resolved study config), ``study.db`` (SQLite, unless
the config names another RDB URL), ``artifacts/`` (trained weights per trial, Optuna's artifact
store, so optuna-dashboard lists them), ``trials.parquet``/``trials.csv``, ``pareto/`` and
``report.html``. The resolved config is also kept in the storage (study user attribute ``config``)
so that a PostgreSQL study can be reopened from any machine.
"""

from __future__ import annotations

import datetime
import math
import os
import socket
import sqlite3
import tempfile
import time
import warnings
from contextlib import closing
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import torch
import yaml
from optuna.artifacts import FileSystemArtifactStore, get_all_artifact_meta, upload_artifact
from optuna.trial import FrozenTrial, TrialState
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError

from hwnas.common.errors import ConfigError
from hwnas.common.outdir import OutOfSpace, fallback_dir, out_of_space, writable_dir
from nas.study.config import StudyConfig, validate_study
from nas.study.files import save_config

WEIGHTS = "weights.pt"


def open_storage(url: str, *, heartbeat_s: int | None = None) -> optuna.storages.RDBStorage:
    """An RDB storage; SQLite waits on locks (several workers) instead of failing at once."""
    kwargs: dict[str, Any] = {}
    url = with_driver(url)
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 120}}
    if heartbeat_s:
        with _quiet():
            retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=1)
        # A killed worker's trial turns stale after 3 missed beats; it is then failed and its
        # parameters queued again, so the next run of the same command retries it.
        kwargs.update(heartbeat_interval=heartbeat_s, grace_period=3 * heartbeat_s,
                      heartbeat_stale_trial_callback=retry)
    try:
        storage = _rdb(url, kwargs)
    except DatabaseError as err:
        raise storage_error(url, err) from None
    except ImportError:  # SQLAlchemy's default driver for the dialect is not installed
        raise ConfigError.one("storage", "needs a database driver that is installed",
                              make_url(url).render_as_string(hide_password=True),
                              "name the driver in the URL, e.g. postgresql+psycopg2://user:"
                              "password@host:5432/db (psycopg2 ships with hwnas)") from None
    if url.startswith("sqlite"):
        _sqlite_wal(storage)
    return storage


def with_driver(url: str) -> str:
    """``url`` with the PostgreSQL driver hwnas installs (psycopg2) when it names none:
    SQLAlchemy 2.1 reads a bare ``postgresql://`` as psycopg 3, which hwnas does not ship."""
    return ("postgresql+psycopg2://" + url.removeprefix("postgresql://")
            if url.startswith("postgresql://") else url)


def storage_error(url: str, err: Exception) -> ConfigError:
    """One line for a storage that cannot be opened: the URL (password hidden), the database's
    own words, and where the results are still readable."""
    shown = make_url(url).render_as_string(hide_password=True)
    reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
    if url.startswith("sqlite"):
        db = Path(make_url(url).database or "")
        if not db.parent.is_dir():
            return ConfigError.one("storage", "needs a folder that exists and can be written",
                                   f"{shown} ({reason})", "pass the folder of a started study "
                                   "(runs/<study>) or a writable --out")
        if not db.is_file():
            return ConfigError.one("storage", "must be a file SQLite can create", f"{shown} "
                                   f"({reason})", "check the disk's free space and permissions")
        fix = (f"the results stay readable in {db.parent / 'trials.parquet'} and "
               f"{db.parent / 'trials.csv'} beside it; move the damaged file aside and re-run "
               "the search to start the storage anew")
    else:
        fix = ("check that the database server runs and is reachable from here, the user and "
               "password, and that the database exists (e.g. `pg_isready -h HOST`)")
    return ConfigError.one("storage", "must be an RDB URL Optuna can open", f"{shown} ({reason})",
                           fix)


def _rdb(url: str, kwargs: dict[str, Any], attempts: int = 5) -> optuna.storages.RDBStorage:
    """``RDBStorage(url)``, retried when another process created the schema at the same moment
    (workers started together on a new database: one wins the ``alembic_version`` insert, the
    others fail once, and find the schema there on the next try)."""
    for attempt in range(attempts):
        try:
            with _quiet():
                return optuna.storages.RDBStorage(url, **kwargs)
        except (IntegrityError, OperationalError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def sqlite_state_counts(db: str | Path) -> dict[str, int]:
    """Trial states in an SQLite study file, read without writing: for watching a running
    study from another process. Opening it through Optuna would create the schema if missing,
    and so race the search that is creating it. Empty until the schema exists."""
    try:
        with closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)) as con:
            rows = con.execute("SELECT state, COUNT(*) FROM trials GROUP BY state").fetchall()
    except sqlite3.Error:  # no file, no table yet, or locked past the timeout
        return {}
    return {str(state): int(n) for state, n in rows}


def _sqlite_wal(storage: optuna.storages.RDBStorage) -> None:
    """WAL journal + synchronous=NORMAL: readers stop blocking writers (several workers) and a
    commit costs no fsync (about 25 commits per trial). A crash loses at most the last commits,
    never the database (SQLite's documented WAL guarantee). Needs a local file system."""
    def on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    event.listen(storage.engine, "connect", on_connect)
    with storage.engine.connect() as conn:
        conn.execute(text("PRAGMA journal_mode=WAL"))
    storage.engine.dispose()  # pooled connections reopen with the pragma
    _sqlite_immediate(storage.engine)


def _sqlite_immediate(engine) -> None:  # noqa: ANN001 - a sqlalchemy Engine
    """Every transaction takes SQLite's write lock when it begins (``BEGIN IMMEDIATE``).

    Python's sqlite3 runs a SELECT outside any transaction, so Optuna's check-then-set updates
    (``set_trial_state_values``: a queued trial goes WAITING -> RUNNING only if still WAITING)
    are not atomic on SQLite: two workers can pop the same queued trial (seen with successive
    halving's queued promotions). SQLAlchemy's documented pysqlite recipe makes them atomic."""
    def on_connect(dbapi_conn, _record) -> None:  # noqa: ANN001
        dbapi_conn.isolation_level = None  # the driver stops issuing its own BEGIN

    def on_begin(conn) -> None:  # noqa: ANN001
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    event.listen(engine, "connect", on_connect)
    event.listen(engine, "begin", on_begin)
    engine.dispose()


class _quiet:
    """Silences Optuna's experimental-feature warnings (heartbeat, group) for our own calls."""

    def __enter__(self) -> None:
        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


def directions(cfg: StudyConfig) -> list[str]:
    return [o.direction for o in cfg.objectives_resolved()]


def objective_keys(cfg: StudyConfig) -> list[str]:
    return [o.key for o in cfg.objectives_resolved()]


def create_or_load(cfg: StudyConfig, storage: optuna.storages.BaseStorage,
                   sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study:
    """The study named ``cfg.name`` in ``storage``; created on first use, reused on resume."""
    keys = objective_keys(cfg)
    existing = _stored(cfg, storage, sampler)
    if existing is not None:
        return existing
    study = optuna.create_study(study_name=cfg.name, storage=storage, sampler=sampler,
                                directions=directions(cfg), load_if_exists=True)
    study.set_user_attr("objectives", keys)
    study.set_user_attr("labels", [o.label for o in cfg.objectives_resolved()])
    study.set_user_attr("config", cfg.dump())
    with _quiet():
        study.set_metric_names(keys)
    return study


def _stored(cfg: StudyConfig, storage: optuna.storages.BaseStorage,
            sampler: optuna.samplers.BaseSampler | None = None) -> optuna.Study | None:
    """The study ``cfg.name`` already in ``storage`` (None: not there); one stored with other
    objectives (e.g. ``acc_pcm@1d`` where the config now scores ``acc_pcm_static@1d``) is
    refused, since its trials were scored on them."""
    try:
        existing = optuna.load_study(study_name=cfg.name, storage=storage, sampler=sampler)
    except KeyError:
        return None
    keys, stored = objective_keys(cfg), existing.user_attrs.get("objectives")
    if stored is not None and stored != keys:
        raise ConfigError.one(
            f"study {cfg.name}", "a stored study keeps its objectives", keys,
            f"use the stored objectives {stored}, or a new study name / storage (--out)")
    return existing


def prepare_dir(cfg: StudyConfig, out_root: str | Path) -> Path:
    study_dir = writable_dir(Path(out_root) / cfg.name)
    if (study_dir / "config.yaml").is_file():
        # refused before the folder's config.yaml, which pareto/report/export read, is replaced
        _stored(cfg, open_storage(cfg.storage_url(study_dir)))
    save_config(cfg, study_dir / "config.yaml")
    return study_dir


def load_dir(study_dir: str | Path) -> tuple[StudyConfig, optuna.Study, Path]:
    """Reopen a finished or running study from its folder (``hwnas pareto runs/<study>``)."""
    study_dir = Path(study_dir)
    cfg_path = study_dir / "config.yaml"
    if not cfg_path.is_file():
        raise ConfigError.one("study folder", "must contain config.yaml (written by hwnas search)",
                              str(study_dir), "pass runs/<study> of a study that was started")
    cfg = validate_study(yaml.safe_load(cfg_path.read_text()))
    study = optuna.load_study(study_name=cfg.name, storage=open_storage(cfg.storage_url(study_dir)))
    return cfg, study, study_dir


# -- artifacts (trained weights) -----------------------------------------------------------------
def artifact_store(study_dir: Path) -> FileSystemArtifactStore:
    path = Path(study_dir) / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return FileSystemArtifactStore(str(path))


def upload_weights(study_dir: Path, trial: optuna.Trial, state_dict: dict[str, Any]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / WEIGHTS
        torch.save(state_dict, path)
        return upload_artifact(artifact_store=artifact_store(study_dir), file_path=str(path),
                               study_or_trial=trial)


def upload_weights_to(study_dir: Path, study: optuna.Study, trial: FrozenTrial,
                      state_dict: dict[str, Any]) -> str:
    """Store weights for a trial created after the fact (a Ray result copied into the storage).

    Optuna refuses new artifacts on a finished trial, so these hang on the study under the
    trial's own name (``trial<N>_weights.pt``), where ``load_weights`` looks next."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / _study_level_name(trial.number)
        torch.save(state_dict, path)
        return upload_artifact(artifact_store=artifact_store(study_dir), file_path=str(path),
                               study_or_trial=study)


def _study_level_name(number: int) -> str:
    return f"trial{number}_{WEIGHTS}"


_STORAGES: dict[str, optuna.storages.BaseStorage] = {}


def storage_of(study_dir: Path) -> optuna.storages.BaseStorage:
    """The storage of the study in ``study_dir`` (its config names the URL), opened once."""
    key = str(Path(study_dir).resolve())
    if key not in _STORAGES:
        cfg = validate_study(yaml.safe_load((Path(study_dir) / "config.yaml").read_text()))
        _STORAGES[key] = open_storage(cfg.storage_url(Path(study_dir)))
    return _STORAGES[key]


def load_weights(study_dir: Path, study: optuna.Study, trial: FrozenTrial) -> dict | None:
    """Trained weights of ``trial`` (or of an earlier trial of the same arch), None if absent."""
    arch = trial.user_attrs.get("arch")
    storage = storage_of(study_dir)
    on_study = None
    for t in [trial, *[u for u in study.get_trials(deepcopy=False)
                       if u.user_attrs.get("arch") == arch and u.number != trial.number]]:
        metas = [m for m in get_all_artifact_meta(t, storage=storage) if m.filename == WEIGHTS]
        if not metas:  # a copied Ray result keeps its weights on the study
            on_study = on_study if on_study is not None else get_all_artifact_meta(study)
            metas = [m for m in on_study if m.filename == _study_level_name(t.number)]
        if metas:
            with artifact_store(study_dir).open_reader(metas[-1].artifact_id) as f:
                return torch.load(f, map_location="cpu", weights_only=True)
    return None


# -- tables ------------------------------------------------------------------------------------
def feasible(trial: FrozenTrial) -> bool:
    return all(v <= 0 for v in trial.constraints.values())


def trials_frame(study: optuna.Study) -> pd.DataFrame:
    """One row per trial: number, state, arch, objective values, every metric, feasibility."""
    keys = study.user_attrs.get("objectives") or [f"value_{i}" for i in
                                                   range(len(study.directions))]
    rows = []
    for t in study.get_trials(deepcopy=False):
        row: dict[str, Any] = {"number": t.number, "state": t.state.name,
                               "arch": t.user_attrs.get("arch", ""),
                               "feasible": feasible(t) if t.state == TrialState.COMPLETE else None,
                               "duration_s": t.duration.total_seconds() if t.duration else None,
                               "fail_reason": t.user_attrs.get("fail_reason")}
        free = "prior" in t.user_attrs  # a free rung-0 result (nas.search.prior_rung)
        for key, value in zip(keys, t.values or [math.nan] * len(keys), strict=True):
            # its trained objectives hold the prior, which is no accuracy: left empty here,
            # the prior goes to its own columns
            row[f"objective:{key}"] = math.nan if free and key not in t.user_attrs else value
        if free:
            row["prior"] = t.user_attrs["prior"]
        hardware = (t.user_attrs.get("info") or {}).get("hardware")
        if hardware:  # the sampled chip's string (nas.study.hardware), beside the arch's
            row["hardware"] = hardware
        row.update({k: v for k, v in t.user_attrs.items()
                    if isinstance(v, int | float) and not isinstance(v, bool)})
        # where a Ray trial ran (nas.search.ray_utils.NODE_KEYS): text, so named here
        row.update({k: t.user_attrs[k] for k in ("ray_node_id", "hostname") if k in t.user_attrs})
        rows.append(row)
    return pd.DataFrame(rows)


def write_trials(study_dir: Path, study: optuna.Study) -> pd.DataFrame:
    """trials.csv and trials.parquet in ``study_dir``; when its disk is full, in a fresh
    temporary folder instead, named by the ``OutOfSpace`` error raised after."""
    frame = trials_frame(study)
    try:
        _write_frame(frame, study_dir)
    except OSError as err:
        if not out_of_space(err):
            raise
        safe = fallback_dir("trials")
        _write_frame(frame, safe)
        raise OutOfSpace(
            f"the disk of {study_dir} is full ({err.strerror}): {len(frame)} trials were "
            f"written to {safe}/trials.csv instead (what study.db could store stays there); "
            "free space on that disk and run the same command again to continue the study"
        ) from None
    return frame


def _write_frame(frame: pd.DataFrame, folder: Path) -> None:
    frame.to_csv(folder / "trials.csv", index=False)
    frame.to_parquet(folder / "trials.parquet", index=False)


# -- dead trials -------------------------------------------------------------------------------
PROCESS = "process"
"""User attribute of a running trial: ``{"host", "pid", "start"}`` of the process evaluating it."""


def _start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22), which tells a reused
    pid from the original process; None where there is no ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def process_attr() -> dict[str, Any]:
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start": _start_time(pid)}


def _alive(proc: dict[str, Any]) -> bool:
    try:
        os.kill(int(proc["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError, KeyError):
        return True  # cannot tell: leave it to the heartbeat
    start = _start_time(int(proc["pid"]))
    return start is None or proc.get("start") in (None, start)


def _orphan(trial: FrozenTrial, grace_s: float | None) -> bool:
    """A RUNNING trial that never reached its objective: Optuna stores it RUNNING before the
    heartbeat's first beat and before the objective records its process, so a ``kill -9`` in
    that window leaves it with neither, and the heartbeat can never find it stale. Our objective
    records its process first thing, so one still without it after the grace period is dead."""
    if grace_s is None or PROCESS in trial.user_attrs or trial.datetime_start is None:
        return False
    return (datetime.datetime.now() - trial.datetime_start).total_seconds() > grace_s


def fail_dead_trials(study: optuna.Study, log: Any = print, *,
                     grace_s: float | None = None) -> list[int]:
    """Mark FAIL every RUNNING trial whose process on this host is gone (a ``kill -9``), and
    queue its parameters again; trials of other hosts are left to the heartbeat. With
    ``grace_s``, a trial killed before its objective started (see ``_orphan``) is failed too."""
    host, dead = socket.gethostname(), []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        proc = t.user_attrs.get(PROCESS)
        gone = isinstance(proc, dict) and proc.get("host") == host and not _alive(proc)
        if not (gone or _orphan(t, grace_s)):
            continue
        try:
            study.tell(t.number, state=TrialState.FAIL)
        except (ValueError, RuntimeError):  # another worker got there first
            continue
        # A promotion is queued again by its schedule (``nas.search.schedule``: a FAIL trial holds
        # no promotion key), so it is not queued here; a trial that sampled nothing yet is.
        if "promotion" not in t.user_attrs:
            study.enqueue_trial(t.params, user_attrs={"retry_of": t.number})
        dead.append(t.number)
    if dead:
        log(f"trials {dead} were RUNNING in processes that are gone (killed): marked FAIL and "
            "their parameters queued again")
    return dead


def fail_own_running(url: str, study_name: str, reason: str) -> list[int]:
    """Store FAIL, with ``reason`` as its ``fail_reason``, every trial this process left
    RUNNING (by its ``PROCESS`` attribute), on a fresh connection; returns their numbers.

    A stop signal raises inside the running trial, and Optuna then stores it FAIL. If the signal
    lands in the middle of a storage write, or Optuna's FAIL meets SQLite's lock held by the
    heartbeat, that FAIL may never reach the storage, and the trial would stay RUNNING until a
    later run found its process gone."""
    storage = open_storage(url)
    sid = storage.get_study_id_from_name(study_name)
    me, done = process_attr(), []
    for t in storage.get_all_trials(sid, deepcopy=False, states=(TrialState.RUNNING,)):
        proc = t.user_attrs.get(PROCESS)
        if not (isinstance(proc, dict) and proc.get("host") == me["host"]
                and proc.get("pid") == me["pid"]):
            continue
        tid = storage.get_trial_id_from_study_id_trial_number(sid, t.number)
        try:
            storage.set_trial_user_attr(tid, "fail_reason", reason)
            storage.set_trial_state_values(tid, TrialState.FAIL)
        except optuna.exceptions.UpdateFinishedTrialError:  # stored meanwhile
            continue
        done.append(t.number)
    return done


def n_claimed(study: optuna.Study, *, before: int | None = None) -> int:
    """COMPLETE trials plus RUNNING ones (those numbered below ``before``, when given): the
    trials that will count once the running ones finish, unless they fail."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    return sum(t.state == TrialState.COMPLETE or before is None or t.number < before
               for t in trials)


def surplus(trial: optuna.Trial, n_trials: int) -> bool:
    """Whether ``trial`` would make more than ``n_trials``: two workers that asked at the same
    moment both saw room for one; the running trials numbered below it are ahead of it."""
    return n_claimed(trial.study, before=trial.number) + 1 > n_trials
