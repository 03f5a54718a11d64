"""Pieces of the Ray Tune driver that touch Ray's and Optuna's objects (imported with Ray only).

* ``AskTellSearcher``: a Ray Tune searcher over an Optuna study (public ask and tell), which
  also tells the study about constraints and failed candidates;
* ``warm_study``: an in-memory Optuna study holding the study's complete trials, so a new
  Ray run's sampler knows everything found before;
* ``copy_trial`` / ``CopyToStudy``: a finished Ray trial, its metrics and weights, written into
  the study's storage and artifact store (once: the Ray trial id is kept as a user attribute),
  with the Ray node and host that ran it; never more than ``n_trials`` COMPLETE;
* ``stop_on_signals`` / ``StopOnSignal``: SIGTERM and SIGINT stop the Tune run the way Tune
  stops itself, and the trials it was running are stored FAIL with the signal as their reason;
* ``connect``: joins a cluster, with Ray 2.60's token authentication set up or explained.
"""

from __future__ import annotations

import contextlib
import math
import os
import pickle
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import ray
import torch
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState, create_trial
from ray import tune
from ray.tune.search import Searcher
from ray.tune.stopper import Stopper

from hwnas.common.errors import ConfigError
from hwnas.common.signals import handling_signals, on_main_thread
from nas.search.optuna_driver import Interrupted
from nas.search.ray_auth import token_source, use_token_if_present
from nas.search.sampling import sample_candidate
from nas.search.schedule_ray import KEYS as SCHEDULE_KEYS
from nas.study import store
from nas.study.config import StudyConfig, validate_study
from nas.study.mapping import MappingCfg
from search_spaces.base import SearchSpace

_C, _O = "constraint__", "objective__"


class AskTellSearcher(Searcher):
    """A Ray Tune searcher driving an Optuna study through its public ask-and-tell interface.

    Each suggestion is ``study.ask()`` plus the space's own ``sample(trial)``; results come back
    with ``study.tell``: the objectives, the constraints (so constrained samplers see them) and
    failures. Ray pickles the searcher into its experiment checkpoints; an in-memory Optuna study
    pickles with it, so a restored run samples with everything it had seen.
    """

    def __init__(self, space: SearchSpace, study: optuna.Study, metric: list[str],
                 mode: list[str], mapping: MappingCfg | None = None):
        super().__init__(metric=metric, mode=mode)
        self.space, self.study = space, study  # the study's space: a pool samples only its archs
        self.mapping = mapping or MappingCfg()
        self._live: dict[str, optuna.Trial] = {}

    def suggest(self, trial_id: str) -> dict[str, Any] | None:
        trial = self.study.ask()
        arch, choice = sample_candidate(trial, self.space, self.mapping)
        self._live[trial_id] = trial
        return {**trial.params, "arch": arch, "mapping": choice}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        trial = self._live.pop(trial_id, None)
        if trial is None:
            return
        values = [(result or {}).get(m) for m in self.metric]
        if error or not result or "fail_reason" in result or any(v is None for v in values):
            self.study.tell(trial, state=TrialState.FAIL)
            return
        for key, value in result.items():
            if key.startswith(_C):
                trial.set_constraint(key[len(_C):], float(value))
        self.study.tell(trial, [float(v) for v in values])

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__dict__, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))


class _Recorder:
    """Replays ``space.sample`` on fixed params and records the distributions it asked for."""

    def __init__(self, params: dict[str, Any]):
        self.params, self.distributions = params, {}

    def _take(self, name: str, dist: BaseDistribution) -> Any:
        self.distributions[name] = dist
        return self.params[name]

    def suggest_categorical(self, name: str, choices: Any) -> Any:
        return self._take(name, CategoricalDistribution(list(choices)))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        return self._take(name, IntDistribution(low, high, step=step, log=log))

    def suggest_float(self, name: str, low: float, high: float, step: float | None = None,
                      log: bool = False) -> float:
        return self._take(name, FloatDistribution(low, high, step=step, log=log))


def distributions(space: SearchSpace, params: dict[str, Any], mapping: MappingCfg | None = None,
                  ) -> tuple[str, dict[str, BaseDistribution]]:
    """The arch of stored ``params`` and the distributions they were drawn from (the space's
    and the searched mapping's)."""
    rec = _Recorder(params)
    arch, _ = sample_candidate(rec, space, mapping or MappingCfg())
    return arch, rec.distributions


def warm_study(cfg: StudyConfig, study: optuna.Study,
               sampler: optuna.samplers.BaseSampler) -> optuna.Study:
    """An in-memory copy of the study's complete trials for the searcher's sampler."""
    warm = optuna.create_study(storage=optuna.storages.InMemoryStorage(), sampler=sampler,
                               study_name=cfg.name, directions=study.directions)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        warm.add_trial(create_trial(params=t.params, distributions=t.distributions,
                                    values=t.values, constraints=t.constraints or None))
    return warm


def _copied(study: optuna.Study, trial_id: str, *, complete: bool) -> bool:
    """Whether this outcome of Ray trial ``trial_id`` is stored: a COMPLETE copy settles it; a
    FAIL copy settles only another failure, since ``Tuner.restore`` reruns a trial that was
    interrupted or errored under the same id, and its result then counts."""
    states = {t.state for t in study.get_trials(deepcopy=False)
              if t.user_attrs.get("ray_trial_id") == trial_id}
    return TrialState.COMPLETE in states or (not complete and bool(states))


def _full(cfg: StudyConfig, study: optuna.Study) -> bool:
    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) >= cfg.n_trials


def _numbers(result: dict) -> dict[str, float]:
    return {k: float(v) for k, v in result.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
            and not k.startswith((_C, _O)) and k not in _RAY_KEYS}


_RAY_KEYS = {"training_iteration", "time_this_iter_s", "time_total_s", "timestamp", "pid",
             "time_since_restore", "iterations_since_restore", "done", "node_ip"}
NODE_KEYS = ("ray_node_id", "hostname")
"""Where a trial ran: reported by the trainable, kept as the Optuna trial's user attributes."""


def copy_trial(cfg: StudyConfig, study: optuna.Study, study_dir: Path, trial: Any,
               *, errored: bool, reason: str | None = None) -> None:
    """Write one finished Ray trial into the Optuna study (skipped when already there); it
    fails with ``reason`` when given. A complete trial past ``n_trials`` (a restored run can
    re-create one already copied) is stored PRUNED, as the Optuna driver stores its surplus."""
    result = dict(trial.last_result or {})
    keys = [o.key for o in cfg.objectives_resolved()]
    values = [result.get(f"{_O}{k}") for k in keys]
    reason = reason or result.get("fail_reason") or (str(trial.error_file) if errored else None)
    complete = not reason and all(v is not None and math.isfinite(v) for v in values)
    if _copied(study, trial.trial_id, complete=complete):
        return
    params = {k: v for k, v in trial.config.items()
              if k not in ("arch", "mapping", *SCHEDULE_KEYS)}
    arch, dists = distributions(cfg.search_space(), params, cfg.hw_eval.mapping_cfg)
    attrs: dict[str, Any] = {"arch": arch, "ray_trial_id": trial.trial_id, "worker": "ray",
                             **{k: trial.config[k] for k in SCHEDULE_KEYS if k in trial.config},
                             **{k: result[k] for k in NODE_KEYS if k in result}}
    if isinstance(result.get("time_total_s"), int | float):  # a Ray trial has no Optuna clock
        attrs["duration_s"] = float(result["time_total_s"])
    if not complete or _full(cfg, study):
        state = TrialState.FAIL if not complete else TrialState.PRUNED
        attrs["fail_reason"] = reason or (
            f"surplus: n_trials={cfg.n_trials} were complete" if complete
            else "Ray trial reported no objective values")
        study.add_trial(create_trial(state=state, params=params, distributions=dists,
                                     user_attrs=attrs))
        return
    info = dict(result.get("info") or {})
    if "seeds" in info:  # every random stream of the trial, as the Optuna driver stores it
        attrs["seeds"] = info.pop("seeds")
    attrs.update(_numbers(result), feasible=bool(result.get("feasible", True)), info=info)
    constraints = {k[len(_C):]: float(v) for k, v in result.items() if k.startswith(_C)}
    study.add_trial(create_trial(params=params, distributions=dists, values=values,
                                 user_attrs=attrs, constraints=constraints or None))
    weights = Path(trial.checkpoint.path) / store.WEIGHTS if trial.checkpoint else None
    if weights is not None and weights.exists():
        added = next(t for t in reversed(study.get_trials(deepcopy=False))
                     if t.user_attrs.get("ray_trial_id") == trial.trial_id)
        store.upload_weights_to(study_dir, study, added,
                                torch.load(weights, weights_only=True))


class CopyToStudy(tune.Callback):
    """Copies each finished Ray trial into the study and refreshes the progress bar; when a
    signal stopped the run, the trials it was running are stored FAIL with the signal's name.

    Ray pickles its callbacks with the experiment state: the storage connection, the progress
    bar and the running trials are process-local, so they are dropped when pickled.
    """

    def __init__(self, cfg: StudyConfig, study_dir: Path, on_copy: Any = None):
        self.cfg_raw, self.study_dir, self._on_copy = cfg.dump(), str(study_dir), on_copy
        self._study: optuna.Study | None = None
        self._live: dict[str, Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_study": None, "_on_copy": None, "_live": {}}

    def _copy(self, trial: Any, errored: bool, reason: str | None = None) -> None:
        self._live.pop(trial.trial_id, None)
        cfg = validate_study(self.cfg_raw)
        if self._study is None:
            self._study = optuna.load_study(
                study_name=cfg.name,
                storage=store.open_storage(cfg.storage_url(Path(self.study_dir))))
        copy_trial(cfg, self._study, Path(self.study_dir), trial, errored=errored,
                   reason=reason)
        if self._on_copy is not None:
            self._on_copy()

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._live[trial.trial_id] = trial

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._copy(trial, errored=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._copy(trial, errored=True)

    def on_experiment_end(self, trials: list, **info: Any) -> None:
        # Tune stops running trials without a completion event: they are failed here, once.
        if STOP.name is not None:
            for trial in list(self._live.values()):
                self._copy(trial, errored=False, reason=f"interrupted by {STOP.name}")


# -- signals -----------------------------------------------------------------------------------
class _Signalled:
    """The first SIGTERM or SIGINT this process received during a Ray study, by name."""

    name: str | None = None


STOP = _Signalled()


class StopOnSignal(Stopper):
    """Ends the Tune run once a signal arrived: Tune then stops every trial, saves its
    experiment state and returns from ``fit``, as it does on its own SIGINT. Module state, not
    instance state: a restored run's stopper is unpickled, and signals belong to the process."""

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return STOP.name is not None


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGINT set ``STOP`` (Tune stops at its next step, through ``StopOnSignal``);
    a second one raises ``Interrupted`` at once. Tune's own SIGINT handler must be off
    (``TUNE_DISABLE_SIGINT_HANDLER=1``), or it would replace this one during ``fit``. Only the
    main thread can own signal handlers: elsewhere a no-op."""
    owner = on_main_thread()  # STOP belongs to the run that handles the process's signals
    if owner:
        STOP.name = None
    try:
        with handling_signals(_stop):
            yield
    finally:
        if owner:
            STOP.name = None


def _stop(signum: int, _frame: object) -> None:
    name = signal.Signals(signum).name
    if STOP.name is not None:
        raise Interrupted(f"interrupted by {name} (a second signal): running trials may be "
                          "unrecorded; run the same command again to continue the study")
    STOP.name = name


def raise_if_signalled() -> None:
    """``Interrupted`` (a ``KeyboardInterrupt``: the command exits non-zero) after a signal."""
    if STOP.name is not None:
        raise Interrupted(f"interrupted by {STOP.name}: the running trials are stored FAIL; "
                          "run the same command again to continue the study")


# -- joining a cluster -------------------------------------------------------------------------
_AUTH_STEPS = ("on the head: `ray get-auth-token --generate` (writes ~/.ray/auth_token), then "
               "`RAY_AUTH_MODE=token ray start --head`; copy that file to every node and to this "
               "machine's ~/.ray/auth_token (or set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH); hwnas "
               "turns token mode on itself when it finds one; see docs/multi_node.md")


def gcs_listening(address: str, timeout: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``: a cluster that refuses this
    client is then running, and the refusal is its token's (Ray reports both as one
    ``ConnectionError`` after its retries)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _held_stderr() -> Iterator[Callable[[], str]]:
    """File descriptor 2 goes to a temporary file inside the block; the callable returns what was
    written there once the block has ended. Python's ``sys.stderr`` is flushed on both sides."""
    sys.stderr.flush()
    saved, text = os.dup(2), []
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield lambda: "".join(text)
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            text.append(held.read().decode(errors="replace"))


def _refused(address: str, said: str) -> ConfigError:
    return ConfigError.one(
        "ray.address", "the cluster refused this client's authentication token (missing or "
        f"wrong; token from: {token_source()})", address, _AUTH_STEPS + f" (Ray said: {said})")


def connect(address: str | None, **kwargs: Any) -> None:
    """``ray.init(address)``; a refused token is one clear error. Token authentication is
    switched on before Ray is imported (``nas.search.ray_auth``, called by ``run_search``); here
    only for a caller that imported Ray first and has no other way in. Ray's C++ client writes
    a warning per retry straight to file descriptor 2 (20 for a refused token): they are held
    back while joining, replayed if it succeeds, and replaced by one message if it fails."""
    use_token_if_present(address)
    try:
        with _held_stderr() as held:
            ray.init(address=address, **kwargs)
        sys.stderr.write(held())
    except ray.exceptions.AuthenticationError as err:
        raise _refused(str(address), err.message) from None
    except ConnectionError as err:
        if address and gcs_listening(address):
            raise _refused(address, str(err)) from None
        raise ConfigError.one("ray.address", "must name a running Ray cluster (GCS host:port)",
                              address, f"start one with `ray start --head` ({err})") from None
