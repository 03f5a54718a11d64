"""Running a study from Python: ``run(config_or_path, **overrides)`` for notebooks and scripts,
and ``result_of(study_dir)`` for a study that already ran (both also as ``hwnas.run`` and
``hwnas.result_of``).

An entry point beside the CLI: it runs the search (``nas.search.run.run_search``), then reads the
front, exports and reports (``nas.results``). ``run`` leaves the process as it found it: Optuna's
log level and handlers are restored on return, no matplotlib backend is chosen (figures use the
object-oriented API), no progress bar is drawn unless asked for, and no global random state is
seeded beyond what each trial seeds itself.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
import pandas as pd

from hwnas.common.errors import HwnasError
from nas.results import summary
from nas.results.export_study import export_study
from nas.results.report import write_report
from nas.search.run import failure_summary, optuna_logs, run_search
from nas.study import store
from nas.study.config import StudyConfig, validate_study
from nas.study.files import load_study, set_dotted


class StudyFailed(HwnasError):
    """Every trial of a run failed: the study produced nothing to rank."""


@dataclass
class RunResult:
    """What a run leaves behind: the Optuna study, its front as a table, and the files."""

    config: StudyConfig
    study: optuna.Study
    front: pd.DataFrame
    hypervolume: float
    reference: dict[str, float]
    study_dir: Path
    paths: dict[str, Path] = field(default_factory=dict)
    reopened: int = 0
    """Trials the study's storage already held when ``run`` reopened it (0: a new study)."""

    def __repr__(self) -> str:
        again = f", reopened with {self.reopened} trials" if self.reopened else ""
        return (f"RunResult({self.config.name!r}: {len(self.study.trials)} trials{again}, "
                f"{len(self.front)} on the front, hypervolume {self.hypervolume:.4g}, "
                f"dir {self.study_dir})")


def to_config(config_or_path: StudyConfig | Mapping[str, Any] | str | Path,
              overrides: Mapping[str, Any]) -> StudyConfig:
    """A validated config from a ``StudyConfig``, a mapping or a study name/path, with dotted
    overrides (``sampler__name`` in keyword form stands for ``sampler.name``)."""
    dotted = {k.replace("__", "."): v for k, v in overrides.items()}
    if isinstance(config_or_path, str | Path):
        return load_study(config_or_path, dotted)
    raw = (config_or_path.dump() if isinstance(config_or_path, StudyConfig)
           else dict(config_or_path))
    validate_study(raw)  # the given values on their own first, as load_study does
    for key, value in dotted.items():
        set_dotted(raw, key, value)
    return validate_study(raw)


def front_frame(front: Any) -> pd.DataFrame:
    """The feasible Pareto front (``nas.results.summary.Front``), one row per model."""
    rows = [{"trial": t.number, "arch": t.user_attrs.get("arch"),
             **dict(zip(front.keys, t.values, strict=True))} for t in front.trials]
    return pd.DataFrame(rows, columns=["trial", "arch", *front.keys])


class ReopenedStudy(UserWarning):
    """``run`` continued a study whose storage already held trials."""


def _stored_trials(study_dir: Path) -> int:
    """How many trials the study in ``study_dir`` holds (0 when there is none yet)."""
    if not (study_dir / "config.yaml").is_file():
        return 0
    try:
        return len(store.load_dir(study_dir)[1].trials)
    except HwnasError:  # a damaged folder: run_search reports it with its fix
        return 0


def result_of(study_dir: str | Path) -> RunResult:
    """The ``RunResult`` of a study folder that already ran (``runs/<study>``)."""
    cfg, study, study_dir = store.load_dir(study_dir)
    front = summary.front(cfg, study)
    names = {"config": "config.yaml", "trials": "trials.parquet", "pareto": "pareto",
             "report": "report.html", "storage": "study.db"}
    paths = {k: study_dir / v for k, v in names.items() if (study_dir / v).exists()}
    return RunResult(cfg, study, front_frame(front), front.hypervolume,
                     dict(zip(front.keys, front.reference, strict=True)), study_dir, paths)


def run(config_or_path: StudyConfig | Mapping[str, Any] | str | Path, *, out: str | Path = "runs",
        export: bool = False, report: bool = False, progress: bool = False,
        **overrides: Any) -> RunResult:
    """Run (or resume) a study and return its ``RunResult``.

    ``config_or_path``: a study name (``"quickstart"``), a YAML path, a mapping or a
    ``StudyConfig``. ``overrides`` set config fields, e.g. ``n_trials=10``,
    ``sampler__name="random"``. Raises ``StudyFailed`` when every trial failed, with the reasons.
    """
    cfg = to_config(config_or_path, overrides)
    before = _stored_trials(Path(out) / cfg.name)
    with optuna_logs(logging.WARNING):
        study_dir = run_search(cfg, out_root=out, progress=progress)
    result = result_of(study_dir)
    result.reopened = before
    if before:  # a finished study reopened runs nothing: say so rather than look like a run
        ran = len(result.study.trials) - before
        warnings.warn(f"study {cfg.name} reopened from {study_dir}: its storage held {before} "
                      f"trials, and this run added {ran} (n_trials={cfg.n_trials} counts them "
                      "all); pass out= a new folder for a fresh study, or a larger n_trials",
                      ReopenedStudy, stacklevel=2)
    why = failure_summary(result.study)
    if why:
        raise StudyFailed(f"study {cfg.name}: {why}\nstorage: {study_dir}")
    if export:
        export_study(study_dir, log=lambda _: None)
    if report:
        write_report(study_dir)
    return result_of(study_dir) if export or report else result
