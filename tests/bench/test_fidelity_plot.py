"""The yardstick plot's points: one per scorer from the same-archs table, the median of its
single runs on seeds disjoint from the truth's, rows on fewer archs left out."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.fidelity import report

CONC = f"concordance, latency {report.BAND_RATIO}x"


def _row(scorer: str, kind: str, residual: float, conc: float, archs: int = 25) -> dict:
    return {"scorer": scorer, "kind": kind, "archs": archs, "residual tau": residual,
            CONC: f"{conc:.2f} (52 pairs)", "s / candidate": 19.6, "s (its runs)": np.nan}


TABLE = [
    _row("params", "free", 0.0, 0.77),
    _row("default seed 0 (the truth's seed)", "one run", 0.9, 0.99),
    _row("default seed 1", "one run", 0.55, 0.75),
    _row("default seed 2", "one run", 0.35, 0.87),
    _row("default seed 3", "one run", 0.51, 0.88),
    _row("default mean of seeds 1,2,3", "seed mean", 0.65, 0.87),
    _row("eco seed 1", "one run", -1.0, 1.0, archs=3),
]


def test_one_point_per_scorer_from_its_single_runs_on_other_seeds() -> None:
    points = report._plot_points(TABLE)
    assert set(points) == {"params", "default", "default mean of seeds 1,2,3"}
    assert points["default"]["residual tau"] == [0.55, 0.35, 0.51]  # seed 0 left out
    assert points["default"][CONC] == [0.75, 0.87, 0.88]
    assert points["default mean of seeds 1,2,3"]["kind"] == "seed mean"


def test_the_plot_is_written(tmp_path: Path) -> None:
    out = tmp_path / "yard.png"
    report.plot(TABLE, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_a_count_row_the_plot_has_no_concordance_bar(tmp_path: Path) -> None:
    out = tmp_path / "yard.png"
    report.plot([r for r in TABLE if r["scorer"] != "params"], out)
    report.plot([], tmp_path / "empty.png")
    assert out.is_file() and (tmp_path / "empty.png").is_file()
