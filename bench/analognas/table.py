"""AnalogNAS-Bench as a table, read without importing its module, and each cell as an arch string
of the project's ``nb201`` space.

The package ships its data as a pickle of its own ``Architecture`` objects (and imports
``pkg_resources`` at the top of its module, which new setuptools no longer has). The file is read
with an unpickler that admits only those two classes, each as a plain attribute holder.

Keys are NASLib's op indices: one op per edge in the order (1<-0, 2<-0, 3<-0, 2<-1, 3<-1, 3<-2),
op 0 skip_connect, 1 none, 2 nor_conv_3x3, 3 nor_conv_1x1, 4 avg_pool_3x3. Checked on the data:
all-``none`` scores 10.0% (chance), all-skip 60.8%, and the best cell, (2, 2, 0, 2, 2, 2), is
NAS-Bench-201's known best CIFAR-10 cell (3x3 convs everywhere but a skip from the input to the
output node), at 93.99%.
"""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from hwnas.common.errors import ConfigError
from search_spaces.nb201 import edge_name

OPS = {0: "skip_connect", 1: "none", 2: "nor_conv_3x3", 3: "nor_conv_1x1", 4: "avg_pool_3x3"}
EDGE_ORDER = ((1, 0), (2, 0), (3, 0), (2, 1), (3, 1), (3, 2))  # (into node j, from node i)
COLUMNS = {"digital": "baseline_accuracy", "hwa_t0": "analog_accuracy",
           "hwa_1d": "analog_drift_86400", "hwa_30d": "analog_drift_2592000"}
"""Truth columns (percent): digitally trained, and HWA-trained at t0, after 1 day, 30 days."""


class _Record:
    """Stand-in for the package's ``Architecture`` and ``DriftMeasurement``: attributes only."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if module == "analognasbench.data" and name in ("Architecture", "DriftMeasurement"):
            return _Record
        raise pickle.UnpicklingError(f"AnalogNAS-Bench data may hold no {module}.{name}")


def _value(v: Any) -> float:
    """A stored accuracy: a number, or a drift measurement's mean."""
    return float(v.value) if isinstance(v, _Record) else float(v)


def arch_of(key: tuple[int, ...]) -> str:
    """The ``nb201`` arch string of an AnalogNAS-Bench key."""
    spec = {edge_name(j, i): OPS[op] for (j, i), op in zip(EDGE_ORDER, key, strict=True)}
    nodes = ["|" + "".join(f"{spec[edge_name(j, i)]}~{i}|" for i in range(j))
             for j in range(1, 4)]
    return "+".join(nodes)


def data_path() -> Path:
    """The package's data file, found without running its ``__init__`` (which imports
    ``pkg_resources``); a missing package is a clear error."""
    spec = importlib.util.find_spec("analognasbench")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError.one("analog-nasbench", "must be installed (the dev dependency group "
                              "has it)", "not found", "run `uv sync` in the checkout")
    return Path(next(iter(spec.submodule_search_locations))) / "data.anb"


def load() -> pd.DataFrame:
    """One row per cell: ``key``, ``arch`` and the truth columns (percent)."""
    with data_path().open("rb") as f:
        data = _Unpickler(f).load()
    rows = [{"key": key, "arch": arch_of(key),
             **{col: _value(getattr(rec, attr)) for col, attr in COLUMNS.items()}}
            for key, rec in data.items()]
    return pd.DataFrame(rows)


def split(table: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(development half, held-out half): a seeded random half of the cells each."""
    order = np.random.default_rng(seed).permutation(len(table))
    half = len(table) // 2
    return table.iloc[order[:half]], table.iloc[order[half:]]
