"""The default driver: Optuna studies on an RDB storage, one or many worker processes.

Setup / run / cleanup, in that order:

* setup: resolved config saved to ``runs/<study>/config.yaml``; the study is created in the
  storage or, when it exists, reused (resume = rerun the same command);
* run: ``workers`` processes (spawned, each seeded ``seed + index``, each with its share of the
  CPU threads) call ``study.optimize`` on the same storage until ``n_trials`` trials are
  COMPLETE in total, counting earlier runs; other machines join by running the same command
  with the same storage URL. ``n_trials`` is exact with any number of workers: a worker starts
  a trial only while COMPLETE + RUNNING trials are fewer, and of two that start at once the
  later-numbered one yields (PRUNED, ``fail_reason`` says why). A trial that raises is stored
  FAIL with its reason and the study goes on; SIGTERM or SIGINT fails the running trial with the
  signal as its reason and stops the run (rerun to continue); a killed worker's trial is failed
  and queued again by the next run on its host (its process is gone), or on other hosts once it
  turns stale (heartbeat); a candidate evaluated before is answered from the storage, not
  trained again (``nas.search.repeats``);
* cleanup: the trials table (``trials.parquet``/``.csv``) is written next to the storage.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from hwnas.common.signals import STOP_SIGNALS, handling_signals
from nas.algorithms.samplers import make_sampler
from nas.scoring.continuation import RungStore
from nas.scoring.evaluate import Evaluator, Outcome
from nas.search import repeats, schedule
from nas.search.budget_filter import attach_sampler
from nas.search.progress import StudyProgress
from nas.search.rung_sampler import HighestRungSampler
from nas.search.sampling import sample_candidate
from nas.study import store
from nas.study.config import StudyConfig, validate_study


def run(cfg: StudyConfig, study_dir: Path, *, workers: int = 1, progress: bool | str = True
        ) -> optuna.Study:
    """Run (or resume) the study until ``cfg.n_trials`` trials are complete. ``progress``:
    ``auto``/``bar``/``lines``/``off`` (``True`` is ``auto``; ``nas.search.progress``)."""
    study = store.create_or_load(cfg, store.open_storage(cfg.storage_url(study_dir)))
    bar = StudyProgress(study, cfg.n_trials, mode=progress,
                        keys=[o.key for o in cfg.objectives_resolved()])
    try:
        with bar:
            if workers <= 1:
                with signals_interrupt():
                    _optimize(cfg, study_dir, index=0, threads=None, on_trial=bar.update)
            else:
                _run_processes(cfg, study_dir, workers, bar)
    finally:  # an interrupted run still leaves its trials table
        store.write_trials(study_dir, study)
    return study


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGINT: the running trial is stored FAIL with this reason, the run stops."""


def signals_interrupt() -> AbstractContextManager[bool]:
    """SIGTERM and SIGINT raise ``Interrupted`` in the trial (Optuna then stores it FAIL, with
    the reason the objective records); a second signal during that cleanup is ignored so the
    FAIL reaches the storage. Only the main thread can own signal handlers: elsewhere a no-op."""
    return handling_signals(_interrupt)


class _TrialGate:
    """Where a stop signal may raise in a process that runs trials. Raised inside Optuna's own
    bookkeeping (``study.ask`` after the trial's row exists), it would leave that trial RUNNING;
    so between trials it is held, and the next objective raises it at its start (the trial is
    stored FAIL with the reason) or the loop raises it when it ends."""

    def __init__(self) -> None:
        self.looping, self.inside, self.pending = False, False, None
        self.signalled: str | None = None  # the first stop signal's reason, once one came

    def hold(self) -> bool:
        return self.looping and not self.inside

    def check(self) -> None:
        if self.pending is not None:
            raise Interrupted(self.pending)

    @contextmanager
    def loop(self) -> Iterator[None]:
        self.looping, self.pending, self.signalled = True, None, None
        try:
            yield
            self.check()
        finally:
            self.looping = False

    @contextmanager
    def trial(self) -> Iterator[None]:
        self.check()
        self.inside = True
        try:
            yield
        finally:
            self.inside = False


_GATE = _TrialGate()


def _interrupt(signum: int, _frame: object) -> None:
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    name = signal.Signals(signum).name
    message = (f"interrupted by {name}: the running trial is stored FAIL; run the same command "
               "again to continue the study")
    _GATE.signalled = message
    if _GATE.hold():
        _GATE.pending = message
        return
    raise Interrupted(message)


def _run_processes(cfg: StudyConfig, study_dir: Path, workers: int, bar: StudyProgress) -> None:
    ctx = mp.get_context("spawn")  # fresh interpreters: no forked torch/Optuna state
    threads = max(1, (os.cpu_count() or 1) // workers)
    procs = [ctx.Process(target=_worker_main, args=(cfg.dump(), str(study_dir), i, threads),
                         name=f"hwnas-worker-{i}") for i in range(workers)]
    for p in procs:
        p.start()
    try:
        with signals_interrupt():
            while any(p.is_alive() for p in procs):
                bar.update()
                time.sleep(1.0)
    except KeyboardInterrupt:  # a job limit's SIGTERM reaches only this process: pass it on
        for p in procs:
            if p.is_alive():
                p.terminate()
        raise
    finally:
        for p in procs:
            p.join()
    bar.update()
    bad = [p.exitcode for p in procs if p.exitcode]
    if bad:
        raise RuntimeError(f"{len(bad)} worker(s) exited with codes {bad}; see their output")


def _worker_main(cfg_raw: dict[str, Any], study_dir: str, index: int, threads: int) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        with signals_interrupt():
            _optimize(validate_study(cfg_raw), Path(study_dir), index=index, threads=threads)
    except KeyboardInterrupt:
        raise SystemExit(130) from None  # the trial is stored FAIL; no traceback per worker


def _optimize(cfg: StudyConfig, study_dir: Path, *, index: int, threads: int | None,
              on_trial: Any = None) -> None:
    if threads:
        import torch

        torch.set_num_threads(threads)
    sampler = make_sampler(cfg.sampler.name, seed=cfg.seed + index, options=cfg.sampler.options)
    if cfg.schedule.type != "none":  # the sampler learns from each arch's highest rung
        sampler = HighestRungSampler(sampler)
    storage = store.open_storage(cfg.storage_url(study_dir), heartbeat_s=cfg.heartbeat_s)
    study = store.create_or_load(cfg, storage, sampler)
    # a kill -9'd run's trial: failed and queued now, not stale later
    store.fail_dead_trials(study, grace_s=3 * cfg.heartbeat_s)
    if store.n_claimed(study) >= cfg.n_trials:  # complete or running elsewhere: nothing left here
        return
    evaluator = Evaluator(cfg)
    evaluator.prepare()  # a missing data set is one clear error, not n failed trials
    attach_sampler(sampler, evaluator)  # the space, and budgets known before training
    stop = _StopRule(cfg.n_trials, cfg.max_failed or cfg.n_trials, on_trial)
    objective, callbacks = make_objective(evaluator, study_dir, index), [stop]
    sh = schedule.make(cfg, evaluator)
    if sh is not None:  # rung per trial; promotions queued in the storage after every trial
        objective, callbacks = sh.wrap(objective), [sh, stop]
        evaluator.rungs = RungStore(study_dir / "rungs")  # a promotion continues its rung
        sh.promote(study)  # a resumed study queues what was due when it stopped
    started = time.monotonic()
    with _GATE.loop():
        try:
            study.optimize(objective, timeout=cfg.timeout, catch=(Exception,),
                           callbacks=callbacks, gc_after_trial=False)
        finally:
            if _GATE.signalled:  # Optuna's own FAIL may not have reached the storage
                store.fail_own_running(cfg.storage_url(study_dir), study.study_name,
                                       _GATE.signalled.split(":")[0])
        # the report says what ended the run: a time limit reads like a finished study otherwise
        study.set_user_attr(f"stopped_by:{index}", _stop_reason(cfg, study, stop, started))


def _stop_reason(cfg: StudyConfig, study: optuna.Study, stop: _StopRule,
                 started: float) -> str:
    """Why this worker's ``optimize`` returned: the first rule that holds, in the order
    ``_StopRule`` and Optuna check them."""
    if _GATE.pending is not None or _GATE.signalled:
        return "signal"
    if stop.failed >= stop.max_failed:
        return f"max_failed ({stop.failed} failed trials)"
    if store.n_claimed(study) >= cfg.n_trials:
        return f"n_trials ({cfg.n_trials})"
    if any(schedule.SCREEN_DONE in t.user_attrs for t in study.get_trials(deepcopy=False)):
        return f"screen done ({cfg.schedule.looks} looks, their promotions trained)"
    if cfg.timeout is not None and time.monotonic() - started >= cfg.timeout:
        return f"timeout ({cfg.timeout:g} s)"
    return "unknown"


def _n_complete(study: optuna.Study) -> int:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))


class _StopRule:
    """Stops a worker once the study's COMPLETE + RUNNING trials reach ``n_trials`` (all
    workers, all runs; a running trial that fails later is made up by the worker that ran it)
    or this worker saw ``max_failed`` failures (a systematic error must not loop forever)."""

    def __init__(self, n_trials: int, max_failed: int, on_trial: Any = None):
        self.n_trials, self.max_failed, self.failed, self.on_trial = n_trials, max_failed, 0, \
            on_trial

    def __call__(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self.failed += trial.state == TrialState.FAIL
        if self.on_trial:
            self.on_trial()
        if (store.n_claimed(study) >= self.n_trials or self.failed >= self.max_failed
                or _GATE.pending is not None):  # a held signal: no trial after this one
            study.stop()


def make_objective(evaluator: Evaluator, study_dir: Path, worker: int = 0):  # noqa: ANN201
    """The Optuna objective: sample an arch, evaluate it, store every metric on the trial."""

    def objective(trial: optuna.Trial, budget: float | None = None) -> tuple[float, ...]:
        try:
            with _GATE.trial():
                return _evaluate(evaluator, study_dir, worker, trial, budget)
        except Interrupted as err:  # Optuna stores the trial FAIL and re-raises
            trial.set_user_attr("fail_reason", str(err).split(":")[0])
            raise

    return objective


def _evaluate(evaluator: Evaluator, study_dir: Path, worker: int, trial: optuna.Trial,
              budget: float | None) -> tuple[float, ...]:
    trial.set_user_attr(store.PROCESS, store.process_attr())
    if store.surplus(trial, evaluator.cfg.n_trials):
        why = f"surplus: n_trials={evaluator.cfg.n_trials} were complete or running"
        trial.set_user_attr("fail_reason", why)
        raise optuna.TrialPruned(why)
    arch, choice = sample_candidate(trial, evaluator.space, evaluator.cfg.hw_eval.mapping_cfg)
    trial.set_user_attr("arch", arch)
    trial.set_user_attr("worker", worker)
    move = getattr(trial.study.sampler, "moves", {}).get(trial.number)
    if move is not None:  # the default sampler's choice: random, tpe or mutate
        trial.set_user_attr("move", move)
    twin = repeats.finished_twin(trial) if budget is None else None
    if twin is not None:  # the same candidate, already evaluated: its result, not a training
        return repeats.answer_from(trial, twin)
    try:
        out = evaluator.evaluate(arch, on_constraints=lambda c: _constrain(trial, c),
                                 budget=budget, mapping=choice)
    except Exception as err:
        trial.set_user_attr("fail_reason", f"{type(err).__name__}: {err}"[:4000])
        raise
    record(trial, out, study_dir)
    return tuple(out.values)


def _constrain(trial: optuna.Trial, constraints: dict[str, float]) -> None:
    for key, value in constraints.items():
        trial.set_constraint(key, value)


def record(trial: optuna.Trial, out: Outcome, study_dir: Path) -> None:
    """Every metric as a user attribute (optuna-dashboard shows them), weights as an artifact."""
    for key, value in out.metrics.items():
        trial.set_user_attr(key, value)
    trial.set_user_attr("feasible", out.feasible)
    trial.set_user_attr("info", {k: v for k, v in out.info.items()
                                 if isinstance(v, str | int | float | bool)})
    if "seeds" in out.info:  # every random stream of the trial, to redraw any of its numbers
        trial.set_user_attr("seeds", out.info["seeds"])
    if out.state_dict is not None:
        store.upload_weights(study_dir, trial, out.state_dict)
