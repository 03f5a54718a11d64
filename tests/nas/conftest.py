"""Study files for the search tests: the shipped NB201 table (tabular, fast) and tiny live
studies on scikit-learn's digits (real training, real latency, real aihwkit noise model)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "bench" / "data" / "nb201_fmnist.parquet"


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
           "hw_eval": {"repeats": 2, "eval_limit": 100},
           "latency": {"max_seconds": 0.2}, "heartbeat_s": 1}
    raw.update(copy.deepcopy(changes))
    return raw


def write_study(folder: Path, raw: dict[str, Any]) -> Path:
    path = folder / f"{raw['name']}.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


@pytest.fixture(scope="session")
def table() -> pd.DataFrame:
    assert TABLE.is_file(), "bench/data/nb201_fmnist.parquet is missing: run bench/nb201_table.py"
    return pd.read_parquet(TABLE)


@pytest.fixture
def damaged_table(tmp_path: Path, table: pd.DataFrame) -> Path:
    """The NB201 table with every cell whose first edge is a 3x3 conv made unusable: half of
    them have NaN accuracy, half are missing. A search hits both kinds within a few trials."""
    first = table["arch"].str.startswith("|nor_conv_3x3~0|")
    out = table[~first | (table.index % 2 == 0)].copy()
    out.loc[out["arch"].str.startswith("|nor_conv_3x3~0|"), "acc_digital"] = float("nan")
    path = tmp_path / "damaged.parquet"
    out.to_parquet(path)
    return path
