"""``python -m bench.fidelity truth --workers N``: its spawned workers start, and a run whose
workers failed exits non-zero. Run on a copy of bench/, since the command rewrites truth.csv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench import BENCH


def _truth(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "bench.fidelity", "truth", *args], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_spawned_truth_workers_start_and_exit_cleanly(tmp_path: Path) -> None:
    shutil.copytree(BENCH, tmp_path / "bench", ignore=shutil.ignore_patterns("results"))
    before = (tmp_path / "bench/data/fidelity/truth.csv").read_text()
    # --hours 0: each worker plans its units, takes none and returns.
    run = _truth(tmp_path, "--workers", "2", "--hours", "0")
    assert run.returncode == 0, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    assert (tmp_path / "bench/data/fidelity/truth.csv").read_text() == before


def test_a_truth_run_whose_workers_fail_exits_non_zero(tmp_path: Path) -> None:
    shutil.copytree(BENCH, tmp_path / "bench", ignore=shutil.ignore_patterns("results"))
    # Every worker's plan fails.
    (tmp_path / "bench/data/fidelity/bands.json").write_text("not json")
    run = _truth(tmp_path, "--workers", "2", "--hours", "0")
    assert run.returncode != 0
    assert "2 of 2 workers failed" in run.stderr
