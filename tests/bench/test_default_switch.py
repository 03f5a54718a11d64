"""The pure parts of bench.analog.default_switch: the baseline's objectives, time and load logs,
paired archs and the rendered comparison, on hand-made runs (no training)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.analog import default_switch as ds

TIME_LOG = """\tCommand being timed: "/venv/bin/python -m nas.cli run quickstart --set a={b: c}"
\tUser time (seconds): 400.50
\tSystem time (seconds): 9.50
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:02:03.5
\tExit status: 0
"""


def _trial(n: int, arch: str, acc: float | None, se: float | None, digital: float | None,
           start: str, end: str) -> dict:
    return {"trial": n, "state": "COMPLETE", "arch": arch, "trained": acc is not None,
            "feasible": acc is not None, "cached_cost": False, "acc": acc, "se": se,
            "programmings": 3.0, "images": 1000.0, "acc_digital": digital, "latency_ms": 2.0,
            "energy_uj": 10.0, "tile": 256.0, "cost_hw": "pcm_static", "cost": 1.0,
            "train": 50.0, "score": 20.0, "start": start, "end": end}


def _run(key: str, trials: list[dict], front: list[int]) -> dict:
    return {"key": key, "trials": trials, "front": [{"trial": n, "resolved": True} for n in front],
            "wall_s": 600.0, "cpu_s": 900.0, "rc": 0, "command": "hwnas run quickstart",
            "load_start": [1.0], "load_end": [2.0]}


def test_the_baseline_moves_only_the_analog_accuracy() -> None:
    objs = ds.baseline_objectives("quickstart", "pcm")
    assert [(o["metric"], o.get("hw")) for o in objs] == [("accuracy", "pcm"), ("latency", None)]
    assert objs[0]["time"] == "1d"


def test_time_log_reads_wall_cpu_and_exit_status(tmp_path: Path) -> None:
    path = tmp_path / "run.err"
    path.write_text("trial lines first\n" + TIME_LOG)
    got = ds.time_log(path)
    assert got == {"wall_s": pytest.approx(3723.5), "cpu_s": pytest.approx(410.0), "rc": 0,
                   "command": "hwnas run quickstart --set a={b: c}"}


def test_load_is_read_between_the_first_start_and_the_last_end(tmp_path: Path) -> None:
    path = tmp_path / "load.log"
    path.write_text("10:00:00 9.0 1 1\n10:01:00 2.0 1 1\n10:02:00 4.0 1 1\n10:03:00 8.0 1 1\n")
    trials = [_trial(0, "a", 0.7, 0.01, 0.7, "10:00:30", "10:01:30"),
              _trial(1, "b", None, None, None, "10:01:40", "10:02:10")]
    got = ds.load_during(path, trials)
    assert got["load_start"] == [2.0] and got["load_end"] == [4.0] and got["load_max"] == 4.0
    assert got["load_samples"] == 2


def test_paired_archs_carry_the_difference_and_its_se() -> None:
    base = _run("acc_pcm@1d", [_trial(0, "a", 0.70, 0.03, 0.72, "", ""),
                               _trial(1, "b", None, None, None, "", "")], [0])
    new = _run("acc_pcm_static@1d", [_trial(0, "a", 0.66, 0.04, 0.72, "", ""),
                                     _trial(1, "b", 0.60, 0.02, 0.65, "", "")], [0, 1])
    rows = ds.paired(base, new)
    assert [r["arch"] for r in rows] == ["a"]  # b was trained by one run only
    assert rows[0]["new - base (pt)"] == "-4.0 ± 5.0"
    text = ds.render({"command": "python -m bench.analog.default_switch compare x y",
                      "provenance": {"device": "cpu", "git": "abc", "versions": {}},
                      "runs": {"acc_pcm@1d": base, "acc_pcm_static@1d": new}})
    assert "On both fronts: ['a']; only acc_pcm@1d: none; only acc_pcm_static@1d: ['b']" in text
    assert "| acc_pcm_static@1d | 1 | b | 60.0 ± 2.0 |" in text
