"""A rich progress bar for a study: complete / target trials, failures and the front size.

It reads the storage rather than counting callbacks, so it is right with many workers, on
resume (earlier trials count) and when other machines add trials to the same study.
"""

from __future__ import annotations

import numpy as np
import optuna
from optuna.trial import TrialState
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from nas.algorithms.pareto import pareto_mask
from nas.study.store import feasible


def front_size(study: optuna.Study) -> int:
    done = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
            if feasible(t)]
    if not done:
        return 0
    dirs = [d.name.lower() for d in study.directions]
    return int(pareto_mask(np.array([t.values for t in done]), dirs).sum())


class StudyProgress:
    """``with StudyProgress(study, n): ... bar.update()``; a no-op when ``enabled`` is False."""

    def __init__(self, study: optuna.Study, total: int, *, enabled: bool = True):
        self.study, self.total, self.enabled = study, total, enabled
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("front {task.fields[front]}  failed {task.fields[failed]}"),
            TimeElapsedColumn(), disable=not enabled)
        self._task = None

    def __enter__(self) -> StudyProgress:
        self._progress.__enter__()
        self._task = self._progress.add_task(self.study.study_name, total=self.total, front=0,
                                             failed=0)
        self.update()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.__exit__(*exc)

    def update(self) -> None:
        if not self.enabled or self._task is None:
            return
        trials = self.study.get_trials(deepcopy=False)
        done = sum(t.state == TrialState.COMPLETE for t in trials)
        failed = sum(t.state == TrialState.FAIL for t in trials)
        self._progress.update(self._task, completed=min(done, self.total), front=front_size(
            self.study), failed=failed)
