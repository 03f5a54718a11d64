"""The tabular evaluator: look-ups, column mapping, bad tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from study_files import TABLE

from hwnas.common.errors import ConfigError
from nas.study.table import TabularEvaluator


def test_lookup_every_row(table: pd.DataFrame) -> None:
    ev = TabularEvaluator(TABLE)
    assert len(ev) == len(table) == 15625
    row = table.iloc[123]
    got = ev.lookup(row["arch"])
    assert got["acc_digital"] == pytest.approx(row["acc_digital"])
    assert got["latency_ms"] == pytest.approx(row["latency_ms"])
    assert {"acc_digital", "latency_ms"} <= set(ev.metric_keys())


def test_csv_with_mapped_columns(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    pd.DataFrame({"cell": ["a", "b"], "top1": [0.5, 0.7], "ms": [1.0, 2.0],
                  "note": ["x", "y"]}).to_csv(path, index=False)
    ev = TabularEvaluator(path, key="cell", columns={"acc_digital": "top1", "latency_ms": "ms"})
    assert ev.lookup("b") == {"acc_digital": 0.7, "latency_ms": 2.0}
    assert ev.has("acc_digital") and not ev.has("note")


@pytest.mark.parametrize("frame, kwargs, match", [
    (pd.DataFrame({"arch": ["a", "a"], "v": [1, 2]}), {}, "unique"),
    (pd.DataFrame({"arch": ["a"], "v": [1]}), {"key": "cell"}, "column"),
    (pd.DataFrame({"arch": ["a"], "v": [1]}), {"columns": {"acc_digital": "top1"}}, "top1"),
])
def test_bad_tables(tmp_path: Path, frame: pd.DataFrame, kwargs: dict, match: str) -> None:
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    with pytest.raises(ConfigError, match=match):
        TabularEvaluator(path, **kwargs)


def test_missing_file_and_arch(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="bench.search.nb201_table"):
        TabularEvaluator(tmp_path / "absent.parquet")
    with pytest.raises(ConfigError, match="CSV or Parquet"):
        TabularEvaluator(tmp_path / "table.xlsx")
    path = tmp_path / "t.csv"
    pd.DataFrame({"arch": ["a"], "v": [1.0]}).to_csv(path, index=False)
    with pytest.raises(ConfigError, match="'zzz'"):
        TabularEvaluator(path).lookup("zzz")
