"""Study files for the search tests: the shipped NB201 table (tabular, fast) and tiny live
studies on scikit-learn's digits (real training, real latency, real aihwkit noise model).
Imported by this module's name, since every test folder has its own conftest."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import optuna
import yaml

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "hwnas" / "data" / "nb201_fmnist.parquet"


def tabular_raw(name: str = "tab", **changes: Any) -> dict[str, Any]:
    raw = {"name": name, "space": "nb201", "seed": 0, "n_trials": 12,
           "objectives": [{"metric": "accuracy"}, {"metric": "latency"}],
           "tabular": {"path": str(TABLE)}, "sampler": "default", "heartbeat_s": 1}
    raw.update(copy.deepcopy(changes))
    return raw


def live_raw(name: str = "live", **changes: Any) -> dict[str, Any]:
    """A real study small enough for a test: digits (8x8), a few SGD steps, 2 noise draws."""
    raw = {"name": name, "space": "resnet", "seed": 0, "n_trials": 2,
           "data": {"name": "digits"},
           "objectives": [{"metric": "accuracy", "hw": "pcm", "time": "1d"},
                          {"metric": "latency"}],
           "train": {"steps": 3, "batch_size": 64, "lr": 0.05},
           "hw_eval": {"repeats": 2, "eval_limit": 100, "target_se": None, "adabs": 64},
           "latency": {"max_seconds": 0.2}, "heartbeat_s": 1}
    raw.update(copy.deepcopy(changes))
    return raw


def write_study(folder: Path, raw: dict[str, Any]) -> Path:
    path = folder / f"{raw['name']}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def stored_study(out: Path, name: str) -> optuna.Study:
    """The study a run of ``name`` stored under ``out`` (its SQLite file)."""
    return optuna.load_study(study_name=name, storage=f"sqlite:///{out / name / 'study.db'}")


def state_counts(study: optuna.Study) -> dict[str, int]:
    """How many of the study's trials are in each state, by state name."""
    out: dict[str, int] = {}
    for t in study.get_trials(deepcopy=False):
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out
