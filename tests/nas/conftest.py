"""Fixtures of the search tests: the shipped NB201 table and a damaged copy of it."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_files import TABLE


@pytest.fixture(scope="session")
def table() -> pd.DataFrame:
    assert TABLE.is_file(), ("hwnas/data/nb201_fmnist.parquet is missing: run "
                             "python -m bench.search.nb201_table")
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
