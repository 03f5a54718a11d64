"""Ray Tune driver: parallel trials on a local or remote Ray cluster, same storage as Optuna's.

``Tuner`` + ``OptunaSearch`` (every objective, with the study's seeded sampler) propose archs;
each trial runs the same ``Evaluator`` recipe in a Ray worker with its resources (fractional
GPUs share a device), at most ``max_concurrent`` at once, retried on worker loss
(``FailureConfig``). A callback copies every finished trial, its metrics, constraints and
weights into the study's Optuna storage and artifact store, so ``hwnas pareto/export/report``
work the same on either backend. Resume: an interrupted Ray run is continued with
``Tuner.restore``; a finished one is followed by a new run for the trials still missing, its
searcher warm-started with every complete trial in the storage.

``n_trials`` is exact: a run asks Tune for the complete trials still missing, failed ones are
made up by the next run, and a complete trial past ``n_trials`` (a restored run can re-create
one) is stored PRUNED. SIGTERM or SIGINT stops Tune as Tune stops itself (experiment state
saved, trials stopped), stores the running trials FAIL with the signal as their reason, shuts
Ray down and ends the command with ``Interrupted``; rerun it to continue.
"""

from __future__ import annotations

import logging
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.trial import TrialState

from nas.algorithms.samplers import make_sampler
from nas.scoring.continuation import RungStore
from nas.scoring.evaluate import Evaluator
from nas.search import schedule
from nas.search.progress import StudyProgress
from nas.search.ray_utils import (
    STOP,
    AskTellSearcher,
    CopyToStudy,
    StopOnSignal,
    connect,
    raise_if_signalled,
    stop_on_signals,
    warm_study,
)
from nas.study import store
from nas.study.config import StudyConfig, validate_study

_DONE = ".hwnas_done"
_EVALUATORS: dict[tuple[str, str], Evaluator] = {}


def _trainable(config: dict[str, Any], cfg_raw: dict[str, Any], study_dir: str) -> None:
    """One Ray trial: evaluate ``config['arch']`` and report every metric (and weights)."""
    import ray
    from ray import tune

    cfg = validate_study(cfg_raw)
    if ray.get_gpu_ids() and cfg.train.device == "cpu":  # a GPU share was granted: train on it
        cfg = cfg.model_copy(update={"train": cfg.train.model_copy(update={"device": "cuda"})})
    torch.set_num_threads(max(1, int(cfg.ray.cpus_per_trial)))
    evaluator = actor_evaluator(cfg, study_dir)
    budget = schedule.budget_of(schedule.make(cfg), config)
    where = {"ray_node_id": ray.get_runtime_context().get_node_id(),
             "hostname": socket.gethostname()}
    try:
        out = evaluator.evaluate(config["arch"], budget=budget, mapping=config.get("mapping"))
    except Exception as err:  # noqa: BLE001 - a failed candidate is a result, not a crash
        # NaN objectives: Tune ends the whole run on a result without the searcher's metrics
        nan = {f"objective__{o.key}": float("nan") for o in evaluator.objectives}
        tune.report({"fail_reason": f"{type(err).__name__}: {err}"[:4000], "arch": config["arch"],
                     **where, **nan})
        return
    result = {**out.metrics, "arch": out.arch, "feasible": out.feasible, "info": out.info, **where,
              **{k: config[k] for k in ("rung", "bracket", "parent") if k in config},
              **({"budget": budget} if budget is not None else {}),
              **{f"constraint__{k}": v for k, v in out.constraints.items()},
              **{f"objective__{k}": v for k, v in zip(
                  [o.key for o in evaluator.objectives], out.values, strict=True)}}
    if out.state_dict is None:
        tune.report(result)
        return
    with tempfile.TemporaryDirectory() as tmp:
        torch.save(out.state_dict, Path(tmp) / store.WEIGHTS)
        tune.report(result, checkpoint=tune.Checkpoint.from_directory(tmp))


def actor_evaluator(cfg: StudyConfig, study_dir: str | Path) -> Evaluator:
    """The Ray actor's ``Evaluator`` of this study, built once (the data set is loaded once per
    actor). Under a schedule, a promotion continues from the weights and optimiser state its rung
    saved in ``<study>/rungs``, as on the Optuna driver. That folder is on the driver's host:
    a node that cannot see it (no shared study folder) finds no state and trains the rung from
    step 0, to the same weights (every rung is seeded), only slower."""
    key = (cfg.name, str(study_dir))
    if key not in _EVALUATORS:
        evaluator = Evaluator(cfg)
        if cfg.schedule.type != "none":
            evaluator.rungs = RungStore(Path(study_dir) / "rungs")
        _EVALUATORS[key] = evaluator
    return _EVALUATORS[key]


class _Root:
    """Where Ray Tune keeps the study's experiments (``run-000``, ...): ``ray.storage`` (a shared
    path or a URI such as ``s3://bucket/hwnas``, plus the study name), else ``runs/<study>/ray``.
    Listed and marked through pyarrow's file systems, as Ray itself does."""

    def __init__(self, cfg: StudyConfig, study_dir: Path):
        import pyarrow.fs as pafs

        base = cfg.ray.storage
        self.base = f"{base.rstrip('/')}/{cfg.name}" if base else str((study_dir / "ray").resolve())
        if "://" not in self.base:
            self.base = str(Path(self.base).resolve())
        self.fs, self.path = pafs.FileSystem.from_uri(
            self.base if "://" in self.base else Path(self.base).as_uri())
        self.fs.create_dir(self.path, recursive=True)

    def runs(self) -> list[str]:
        import pyarrow.fs as pafs

        infos = self.fs.get_file_info(pafs.FileSelector(self.path, allow_not_found=True))
        return sorted(i.base_name for i in infos
                      if i.type == pafs.FileType.Directory and i.base_name.startswith("run-"))

    def uri(self, name: str) -> str:
        return f"{self.base}/{name}"

    def done(self, name: str) -> bool:
        import pyarrow.fs as pafs

        info = self.fs.get_file_info(f"{self.path}/{name}/{_DONE}")
        return info.type != pafs.FileType.NotFound

    def mark_done(self, name: str) -> None:
        with self.fs.open_output_stream(f"{self.path}/{name}/{_DONE}") as out:
            out.write(b"finished\n")


def run(cfg: StudyConfig, study_dir: Path, *, progress: bool | str = True) -> optuna.Study:
    import ray

    study = store.create_or_load(cfg, store.open_storage(cfg.storage_url(study_dir)))
    root = _Root(cfg, study_dir)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # ours stops Tune, and fails its trials
    for name in ("ray", "ray.tune", "ray.train"):  # our progress bar replaces Ray's log lines
        logging.getLogger(name).setLevel(logging.WARNING)
    started = not ray.is_initialized()
    if started:
        connect(cfg.ray.address, include_dashboard=False, log_to_driver=False)
    try:  # after connect: ray.init installs its own SIGTERM handler
        with stop_on_signals(), StudyProgress(
                study, cfg.n_trials, mode=progress,
                keys=[o.key for o in cfg.objectives_resolved()]) as bar:
            _run_rounds(cfg, study, study_dir, root, bar)
            raise_if_signalled()
    finally:  # an interrupted run still leaves its trials table and no Ray behind
        if started:
            ray.shutdown()
        store.write_trials(study_dir, study)
    return study


def _run_rounds(cfg: StudyConfig, study: optuna.Study, study_dir: Path, root: _Root,
                bar: StudyProgress) -> None:
    """The unfinished run restored (unless the study is complete), then new runs for the
    complete trials still missing; a signal ends the rounds."""
    runs = root.runs()
    if (runs and not root.done(runs[-1]) and _n_complete(study) < cfg.n_trials
            and _can_restore(root.uri(runs[-1]))):
        _fit(cfg, study, study_dir, root, runs[-1], bar, restore=True)
    for _ in range(3):  # failed trials do not count: top up a few times at most
        remaining = cfg.n_trials - _n_complete(study)
        if remaining <= 0 or STOP.name is not None:
            break
        name = f"run-{len(root.runs()):03d}"
        _fit(cfg, study, study_dir, root, name, bar, restore=False, num_samples=remaining)


def _n_complete(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


def _can_restore(uri: str) -> bool:
    from ray import tune

    return tune.Tuner.can_restore(uri)


def _fit(cfg: StudyConfig, study: optuna.Study, study_dir: Path, root: _Root, name: str,
         bar: StudyProgress, *, restore: bool, num_samples: int = 0) -> None:
    from ray import tune

    # Workers score the arch they are given: a pool only restricts sampling, which happens
    # here, so they need neither the pool file (absent on other nodes) nor its path.
    worker_raw = cfg.model_copy(update={"space_pool": None}).dump()
    trainable = tune.with_resources(
        tune.with_parameters(_trainable, cfg_raw=worker_raw, study_dir=str(study_dir)),
        {"cpu": cfg.ray.cpus_per_trial, "gpu": cfg.ray.gpus_per_trial})
    if restore:
        tuner = tune.Tuner.restore(root.uri(name), trainable=trainable, resume_errored=True)
    else:
        tuner = tune.Tuner(trainable, tune_config=_tune_config(cfg, study, num_samples, name),
                           run_config=_run_config(cfg, study_dir, root, name, bar))
    tuner.fit()
    root.mark_done(name)


def _tune_config(cfg: StudyConfig, study: optuna.Study, num_samples: int, name: str) -> Any:
    from ray import tune

    objs = cfg.objectives_resolved()
    # seed + run index (run-000 keeps the seed): a top-up run must not redraw the candidates,
    # failed ones included, that the run before it drew first
    seed = cfg.seed + int(name.removeprefix("run-"))
    sampler = make_sampler(cfg.sampler.name, seed=seed, options=cfg.sampler.options)
    searcher = AskTellSearcher(
        cfg.search_space(), warm_study(cfg, study, sampler),
        metric=[f"objective__{o.key}" for o in objs],
        mode=["max" if o.direction == "maximize" else "min" for o in objs],
        mapping=cfg.hw_eval.mapping_cfg)
    sh = schedule.make(cfg)
    if sh is not None:  # promotions first, then the searcher's new candidates
        from nas.search.schedule_ray import PromotingSearcher

        searcher = PromotingSearcher(searcher, sh, [f"objective__{o.key}" for o in objs])
    return tune.TuneConfig(search_alg=searcher, num_samples=num_samples,
                           max_concurrent_trials=cfg.ray.max_concurrent, reuse_actors=True)


def _run_config(cfg: StudyConfig, study_dir: Path, root: _Root, name: str,
                bar: StudyProgress) -> Any:
    from ray import tune

    return tune.RunConfig(
        name=name, storage_path=root.base, stop=StopOnSignal(),
        failure_config=tune.FailureConfig(max_failures=cfg.ray.max_failures),
        callbacks=[CopyToStudy(cfg, study_dir, bar.update)], verbose=0,
        checkpoint_config=tune.CheckpointConfig(num_to_keep=1))
