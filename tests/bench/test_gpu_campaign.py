"""The GPU campaign's CPU dry run, so the campaign cannot rot between GPU windows: every part runs
on tiny settings, writes its record, and the records make a BENCHMARKS.md section. And
``--device cuda`` without a GPU is a clear error before any work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from bench import ROOT
from bench.collect import gpu_section
from bench.gpu.campaign import ORDER
from bench.gpu.context import Goal, bare_times_ms, cov

RECORD_KEYS = {"part", "device", "facts", "versions", "git", "command", "precision", "results",
               "goals", "seconds", "error", "smoke"}


def _campaign(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bench.gpu.campaign", *args], cwd=ROOT,
                          text=True, capture_output=True, timeout=timeout, check=False,
                          env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.slow
def test_the_cpu_dry_run_runs_every_part(tmp_path):
    proc = _campaign("--device", "cpu", "--smoke", "--all", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    records = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert set(records) == set(ORDER)
    for name, r in records.items():
        assert RECORD_KEYS <= set(r) and r["error"] is None, (name, r["error"])
        assert r["smoke"] and r["device"] == "cpu" and "--smoke" in r["command"]
        assert torch.__version__.startswith(r["versions"]["torch"]) and r["goals"]
    assert records["analog"]["results"]["failed"] == []
    assert records["study"]["results"]["returncode"] == 0
    assert records["ddp"]["results"]["backend"] == "gloo"
    section = gpu_section(tmp_path)
    assert section.startswith("## GPU campaign") and "SMOKE" in section
    assert all(f"### {name}" in section for name in ORDER)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_fails_before_any_work(tmp_path):
    proc = _campaign("--all", "--out", str(tmp_path), timeout=120)
    assert proc.returncode == 2
    assert "--device: CUDA asked on a CPU machine; got 'cuda'. Fix:" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_goals_compare_both_ways():
    assert Goal("cov ratio", 1.1, "<=", 1.2).met and not Goal("cov ratio", 1.3, "<=", 1.2).met
    assert Goal("fit ratio", 0.95, ">=", 0.9).met and not Goal("fit ratio", 0.8, ">=", 0.9).met
    assert Goal("not measured", None, "<=", 1.0).met is None


def test_bare_loop_times_each_call_on_the_cpu():
    times = bare_times_ms(lambda: sum(range(20000)), 5, "cpu")
    assert len(times) == 5 and all(t > 0 for t in times)
    assert cov([1.0, 1.0, 1.0]) == 0.0 and cov([1.0]) == 0.0
    assert cov([1.0, 3.0]) == pytest.approx(2**0.5 / 2)


def test_an_empty_results_folder_says_how_to_fill_it(tmp_path):
    assert "python -m bench.gpu.campaign --all" in gpu_section(tmp_path)
