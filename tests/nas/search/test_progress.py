"""Progress where users read it: with stdout not a terminal, one line per finished trial (its
number, arch, state, objective values with SE, seconds per part, elapsed time)."""

from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial
from study_files import tabular_raw, write_study

from hwnas.common.errors import ConfigError
from nas.cli import main
from nas.search.progress import resolve_mode, seconds_split, trial_line

LINE = re.compile(r"^trial (\d+) (COMPLETE|FAIL|PRUNED)\b.*\| elapsed \d+m\d\ds \[\d+/\d+\]$")


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("trial ")]


def test_redirected_study_prints_one_line_per_trial(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = write_study(tmp_path, tabular_raw("logged", n_trials=6))
    assert main(["search", str(path), "--out", str(tmp_path)]) == 0  # --progress auto
    lines = _lines(capsys.readouterr().out)
    assert len(lines) == 6 and all(LINE.match(line) for line in lines), lines
    assert sorted(int(LINE.match(line).group(1)) for line in lines) == list(range(6))
    assert all("acc_digital=" in line and "latency_ms=" in line for line in lines)
    # a resumed study prints only its new trials
    assert main(["search", str(path), "--out", str(tmp_path), "--n-trials", "8"]) == 0
    assert len(_lines(capsys.readouterr().out)) == 2


@pytest.mark.parametrize("mode", ["off", "bar"])
def test_progress_off_and_bar_print_no_trial_lines(tmp_path: Path, capsys,  # noqa: ANN001
                                                    mode: str) -> None:
    path = write_study(tmp_path, tabular_raw("quiet", n_trials=3))
    assert main(["search", str(path), "--out", str(tmp_path), "--progress", mode]) == 0
    assert not _lines(capsys.readouterr().out)


def _trial(**attrs: object) -> optuna.trial.FrozenTrial:
    return create_trial(state=TrialState.COMPLETE, values=[0.8123, 3.456],
                        params={"x": 0.5}, distributions={"x": FloatDistribution(0, 1)},
                        user_attrs={"arch": "resnet:abc", **attrs})


def test_a_line_shows_se_and_where_the_seconds_went() -> None:
    trial = _trial(**{"acc_pcm@1d_se": 0.0112, "train_seconds": 12.0, "feasible": True,
                      "info": {"seconds_cost": 0.42, "seconds_train_eval": 42.25}})
    line = trial_line(trial, ["acc_pcm@1d", "latency_ms"], 245.0, 7, 30)
    assert "COMPLETE resnet:abc" in line
    assert "acc_pcm@1d=0.8123±0.011" in line and "latency_ms=3.456 " in line
    assert "| s: cost 0.4 train 12.0 score 30.2 |" in line
    assert line.endswith("| elapsed 4m05s [7/30]")
    assert seconds_split(trial) == {"cost": 0.42, "train": 12.0, "score": 30.25}


def test_infeasible_and_failed_trials_say_so() -> None:
    skipped = trial_line(_trial(feasible=False, b=3.456), ["a", "b"], 1, 1, 2)
    assert " COMPLETE infeasible " in skipped and "b=3.456" in skipped
    assert "a=" not in skipped  # a placeholder, not a measured value
    reason = {"arch": "x", "fail_reason": "interrupted by SIGTERM"}
    failed = create_trial(state=TrialState.FAIL, user_attrs=reason)
    assert "FAIL x reason: interrupted by SIGTERM" in trial_line(failed, ["a"], 1, 0, 2)


def test_modes() -> None:
    class Tty:
        def isatty(self) -> bool:
            return True

    assert resolve_mode("auto", Tty()) == "bar" and resolve_mode(True, Tty()) == "bar"
    assert resolve_mode("auto") == "lines"  # pytest captures stdout: not a terminal
    assert resolve_mode(False) == "off" and resolve_mode("lines", Tty()) == "lines"
    with pytest.raises(ConfigError, match="auto, bar, lines or off"):
        resolve_mode("loud")


def test_a_rung_zero_line_names_its_prior_and_shows_no_accuracy() -> None:
    # a free rung 0 stores the prior where the accuracy objective goes: the line must not
    # present it as an accuracy
    trial = _trial(prior="synflow", prior_score=22.3, latency_ms=3.032, feasible=True,
                   info={"rung": "rung 0 (prior)", "prior": "synflow"})
    line = trial_line(trial, ["acc_pcm@1d", "latency_ms"], 1.0, 1, 24)
    assert "rung 0 prior synflow=22.3" in line and "latency_ms=3.032" in line
    assert "acc_pcm@1d=" not in line
