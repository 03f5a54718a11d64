"""A study's progress: a rich bar on a terminal, one line per finished trial everywhere else.

Both read the storage rather than counting callbacks, so they are right with many workers, on
resume (earlier trials count) and when other machines add trials to the same study. A log file,
a cluster job or CI has no terminal to redraw a bar in, and a bar's final frame says nothing
about the trials; there each finished trial gets a line as it finishes:

    trial 7 COMPLETE mbv3:... acc_pcm@1d=0.812±0.011 latency_ms=3.41 | s: cost 0.4 train 12.1
    score 30.2 | elapsed 4m05s [7/30]

``--progress auto|bar|lines|off`` chooses (auto: a bar on a terminal, lines otherwise).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, Literal, TextIO

import numpy as np
import optuna
from optuna.trial import FrozenTrial, TrialState
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from hwnas.common.errors import ConfigError
from nas.algorithms.pareto import pareto_mask
from nas.search.repeats import REPEAT_OF
from nas.search.tracking import measured
from nas.study.store import feasible

Mode = Literal["auto", "bar", "lines", "off"]
MODES: tuple[str, ...] = ("auto", "bar", "lines", "off")
_FINISHED = (TrialState.COMPLETE, TrialState.FAIL, TrialState.PRUNED)


def resolve_mode(progress: bool | str, stream: TextIO | None = None) -> str:
    """``True``/``auto`` -> ``bar`` on a terminal, else ``lines``; ``False`` -> ``off``."""
    mode = {True: "auto", False: "off"}.get(progress, progress)  # type: ignore[call-overload]
    if mode not in MODES:
        raise ConfigError.one("progress", f"must be one of {list(MODES)}", progress,
                              "use --progress auto, bar, lines or off")
    if mode == "auto":
        return "bar" if (stream or sys.stdout).isatty() else "lines"
    return mode


def front_size(study: optuna.Study) -> int:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if feasible(t)]
    if not done:
        return 0
    dirs = [d.name.lower() for d in study.directions]
    return int(pareto_mask(np.array([t.values for t in done]), dirs).sum())


def seconds_split(trial: FrozenTrial) -> dict[str, float]:
    """Where a trial's time went: cost (measure or look up), training, scoring (the rest of
    train+evaluate: digital and hardware accuracy). Missing parts are left out; a repeated
    candidate answered from the store (``nas.search.repeats``) spent none."""
    if REPEAT_OF in trial.user_attrs:
        return {}
    info = trial.user_attrs.get("info") or {}
    out = {}
    if isinstance(info.get("seconds_cost"), int | float):
        out["cost"] = float(info["seconds_cost"])
    both = info.get("seconds_train_eval")
    train = trial.user_attrs.get("train_seconds")
    if isinstance(train, int | float):
        out["train"] = float(train)
    if isinstance(both, int | float):
        out["score"] = max(0.0, float(both) - out.get("train", 0.0))
    return out


def _value(trial: FrozenTrial, key: str, value: float) -> str:
    se = trial.user_attrs.get(f"{key}_se")
    if isinstance(se, int | float) and math.isfinite(se):
        return f"{key}={value:.4g}±{se:.2g}"
    return f"{key}={value:.4g}"


def _elapsed(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m{s:02d}s" if m >= 60 else f"{m}m{s:02d}s"


def trial_line(trial: FrozenTrial, keys: list[str], elapsed_s: float, done: int,
               total: int) -> str:
    """One finished trial in one line (see the module docstring)."""
    state = trial.state.name
    ok = feasible(trial) and trial.user_attrs.get("feasible", True) is not False
    if trial.state == TrialState.COMPLETE and not ok:  # a budget violated
        state += " infeasible"
    parts = [f"trial {trial.number}", state, str(trial.user_attrs.get("arch", "?"))]
    prior = trial.user_attrs.get("prior")
    if prior is not None:
        # a free rung-0 result: its trained objectives hold the prior, which is no accuracy
        score = trial.user_attrs.get("prior_score", float("nan"))
        parts.append(f"rung 0 prior {prior}={score:.4g}")
        keys = [k for k in keys if k in trial.user_attrs and k != "prior_score"]
    if trial.values is not None and len(keys) == len(trial.values):
        # an infeasible trial shows what it measured; a budget's placeholders are not values
        parts += [_value(trial, k, v) for k, v in measured(trial, keys).items()]
    elif prior is not None:
        parts += [_value(trial, k, trial.user_attrs[k]) for k in keys]
    if trial.state == TrialState.FAIL or "fail_reason" in trial.user_attrs:
        reason = str(trial.user_attrs.get("fail_reason") or "no reason recorded")
        parts.append(f"reason: {reason.splitlines()[0][:200]}")
    split = seconds_split(trial)
    if split:
        parts.append("| s: " + " ".join(f"{k} {v:.1f}" for k, v in split.items()))
    parts.append(f"| elapsed {_elapsed(elapsed_s)} [{done}/{total}]")
    return " ".join(parts)


class StudyProgress:
    """``with StudyProgress(study, n, mode="lines"): ... bar.update()``.

    ``enabled=False`` (or mode ``off``) makes it a no-op. In ``lines`` mode every trial that
    finished since the last ``update`` is printed, once; trials finished before this run (a
    resume) are not repeated."""

    def __init__(self, study: optuna.Study, total: int, *, enabled: bool = True,
                 mode: bool | str = "bar", keys: list[str] | None = None,
                 stream: TextIO | None = None):
        self.study, self.total = study, total
        self.mode = resolve_mode(mode if enabled else "off", stream)
        self.enabled = self.mode != "off"
        self.keys, self.stream = keys or [], stream
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("front {task.fields[front]}  failed {task.fields[failed]}"),
            TimeElapsedColumn(), disable=self.mode != "bar")
        self._task: Any = None
        self._seen: set[int] = set()
        self._start = time.monotonic()

    def __enter__(self) -> StudyProgress:
        self._start = time.monotonic()
        if self.mode == "lines":  # earlier runs' trials are history, not progress
            self._seen = {t.number for t in self.study.get_trials(deepcopy=False,
                                                                  states=_FINISHED)}
        self._progress.__enter__()
        self._task = self._progress.add_task(self.study.study_name, total=self.total, front=0,
                                             failed=0)
        self.update()
        return self

    def __exit__(self, *exc: object) -> None:
        self.update()
        self._progress.__exit__(*exc)

    def update(self) -> None:
        if not self.enabled or self._task is None:
            return
        trials = self.study.get_trials(deepcopy=False)
        done = sum(t.state == TrialState.COMPLETE for t in trials)
        if self.mode == "lines":
            self._print_new(trials, done)
            return
        failed = sum(t.state == TrialState.FAIL for t in trials)
        self._progress.update(self._task, completed=min(done, self.total), front=front_size(
            self.study), failed=failed)

    def _print_new(self, trials: list[FrozenTrial], done: int) -> None:
        new = sorted((t for t in trials if t.state in _FINISHED and t.number not in self._seen),
                     key=lambda t: (t.datetime_complete is None, t.datetime_complete, t.number))
        elapsed = time.monotonic() - self._start
        for t in new:
            self._seen.add(t.number)
            print(trial_line(t, self.keys, elapsed, done, self.total),
                  file=self.stream or sys.stdout, flush=True)
