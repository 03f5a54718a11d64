"""A full disk, for real: a small tmpfs mounted for the test (root only; skipped where mounting
is not allowed). Too little free space is refused before the work starts; a disk that fills up
mid-run is one error line naming where the trials went instead, and nothing computed is lost."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from nas.cli import main

SMALL = ["--set", "n_trials=2", "--set", "schedule={type: none}", "--set", "pareto.shrink=off",
         "--set", "train.epochs=1", "--set", "data.train_limit=300", "--set", "hw_eval.repeats=2",
         "--set", "hw_eval.max_repeats=2", "--set", "hw_eval.eval_limit=100", "--no-progress"]


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave_kb: int) -> None:
    free_kb = int(subprocess.run(["df", "-k", "--output=avail", str(disk)], capture_output=True,
                                 text=True, check=True).stdout.split()[-1])
    (disk / "fill").write_bytes(b"\0" * max(0, (free_kb - leave_kb) * 1024))


def test_too_little_free_space_is_refused_before_any_work(tiny_disk, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    rc = main(["search", "quickstart", "--out", str(tiny_disk), *SMALL])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "at least 100 MiB free" in err and str(tiny_disk) in err and "HWNAS_MIN_FREE_MB" in err
    assert not (tiny_disk / "quickstart" / "study.db").exists()


@pytest.mark.slow
def test_a_disk_that_fills_mid_run_loses_no_trial(tiny_disk, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    monkeypatch.setenv("HWNAS_MIN_FREE_MB", "0.5")
    fill(tiny_disk, leave_kb=1000)  # the config and database fit; the first checkpoint does not
    # no latency budget: on a loaded host the first candidate could time over it and never train
    rc = main(["search", "quickstart", "--out", str(tiny_disk), *SMALL, "--set", "constraints=[]"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and err.count("\n") == 1, err
    assert "is full (No space left on device)" in err and "run the same command again" in err
    safe = Path(re.search(r"written to (\S+)/trials\.csv", err).group(1))
    trials = pd.read_csv(safe / "trials.csv")
    assert len(trials) >= 1 and trials["arch"].str.startswith("rn:").all()
    assert trials["acc_digital"].notna().any()  # a trained, scored trial kept
    assert len(pd.read_parquet(safe / "trials.parquet")) == len(trials)
