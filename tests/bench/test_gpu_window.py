"""``bench/gpu/window.sh``, the one prepared call for a short GPU window: its CPU dry run leaves
the parts' records in $OUT, and asked for CUDA where there is none it fails with the rule named."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bench import ROOT


def _window(out: Path, **env: str) -> subprocess.CompletedProcess[str]:
    # KIT: no aihwkit kit, whatever this checkout holds (its wheel is for the device image)
    full = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "KIT": str(out / "none"),
            **env}
    return subprocess.run(["bash", "bench/gpu/window.sh"], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=300)


def test_the_dry_run_returns_each_part_and_the_log(tmp_path: Path) -> None:
    run = _window(tmp_path, DEVICE="cpu", TRUTH_MIN="0", SMOKE="1", PARTS="fit",
                  PART_BUDGET="20")
    log = (tmp_path / "window.log").read_text()
    assert run.returncode == 0, log[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fit.json", "window.log"]
    assert "fit:" in log and "cuda False" in log


def test_no_parts_leaves_the_window_to_the_truth(tmp_path: Path) -> None:
    run = _window(tmp_path, DEVICE="cpu", TRUTH_MIN="0", PARTS="")
    assert run.returncode == 0, (tmp_path / "window.log").read_text()[-2000:]
    assert [p.name for p in tmp_path.iterdir()] == ["window.log"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where CUDA is missing")
def test_cuda_without_a_gpu_fails_naming_the_rule(tmp_path: Path) -> None:
    run = _window(tmp_path, TRUTH_MIN="1", PARTS="fit", PART_BUDGET="20")
    log = (tmp_path / "window.log").read_text()
    assert run.returncode != 0
    assert log.count("CUDA asked on a CPU machine") == 2  # the truth run and the campaign
    assert not (tmp_path / "truth_units.tar").exists()
