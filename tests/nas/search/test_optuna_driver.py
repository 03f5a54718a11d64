"""The Optuna driver on the NB201 table: resume, failures, two workers, later commands."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from study_files import tabular_raw, write_study

from nas.cli import main


def _study(study_dir: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{study_dir / name / 'study.db'}")


def _search(path: Path, out: Path, *extra: str) -> int:
    return main(["search", str(path), "--out", str(out), "--no-progress", *extra])


def test_resume_counts_earlier_trials(tmp_path: Path, table: pd.DataFrame) -> None:
    path = write_study(tmp_path, tabular_raw("resume", n_trials=8))
    assert _search(path, tmp_path) == 0
    first = {t.number: t.values for t in _study(tmp_path, "resume").trials}
    assert len(first) == 8
    assert _search(path, tmp_path, "--n-trials", "12") == 0
    study = _study(tmp_path, "resume")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 12
    assert {t.number: t.values for t in done if t.number in first} == first  # nothing lost
    assert _search(path, tmp_path, "--n-trials", "12") == 0  # already complete: no new trials
    assert len(_study(tmp_path, "resume").trials) == 12
    rows = table.set_index("arch")
    for t in done:  # the stored values are the table's
        assert t.values == pytest.approx([rows.loc[t.user_attrs["arch"], "acc_digital"],
                                          rows.loc[t.user_attrs["arch"], "latency_ms"]])
    frame = pd.read_parquet(tmp_path / "resume" / "trials.parquet")
    assert len(frame) == 12 and frame["arch"].is_unique


def test_failing_trials_are_recorded_and_the_study_goes_on(tmp_path: Path,
                                                           damaged_table: Path) -> None:
    raw = tabular_raw("damaged", n_trials=15, sampler="random",
                      tabular={"path": str(damaged_table)})
    assert _search(write_study(tmp_path, raw), tmp_path) == 0
    study = _study(tmp_path, "damaged")
    failed = study.get_trials(states=(TrialState.FAIL,))
    reasons = " ".join(t.user_attrs["fail_reason"] for t in failed)
    assert "acc_digital is nan" in reasons  # a NaN metric
    assert "must be a row" in reasons  # an evaluation that raised
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 15


def test_budget_marks_infeasible_and_front_is_feasible(tmp_path: Path,
                                                      table: pd.DataFrame) -> None:
    cap = float(table["latency_ms"].quantile(0.5))  # half the table is over the budget
    raw = tabular_raw("budget", n_trials=15, constraints=[{"metric": "latency", "max": cap}])
    assert _search(write_study(tmp_path, raw), tmp_path) == 0
    trials = _study(tmp_path, "budget").get_trials(states=(TrialState.COMPLETE,))
    over = [t for t in trials if t.user_attrs["latency_ms"] > cap]
    assert over and len(over) < len(trials), "half the cells are over: the sampler meets both"
    for t in over:
        assert t.constraints["latency_ms"] > 0 and t.user_attrs["feasible"] is False
        assert t.user_attrs["info"]["skipped"].startswith("a cost budget")
    main(["export", str(tmp_path / "budget")])
    index = json.loads((tmp_path / "budget" / "pareto" / "index.json").read_text())
    assert index["models"] and all(m["latency_ms"] <= cap for m in index["models"])


@pytest.mark.slow
def test_two_workers_share_one_sqlite_study(tmp_path: Path, table: pd.DataFrame) -> None:
    path = write_study(tmp_path, tabular_raw("pair", n_trials=40))
    assert _search(path, tmp_path, "--workers", "2") == 0
    trials = _study(tmp_path, "pair").trials
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    assert 40 <= len(done) <= 41  # a worker may finish the trial it had started
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # none lost or doubled
    # both workers write here; on a loaded host the second may start after the fast table is done
    assert {t.user_attrs["worker"] for t in done} <= {0, 1}
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    rows = table.set_index("arch")
    assert all(t.values[0] == pytest.approx(rows.loc[t.user_attrs["arch"], "acc_digital"])
               for t in done)


def test_pareto_export_report_on_a_tabular_study(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert _search(write_study(tmp_path, tabular_raw("later", n_trials=20)), tmp_path) == 0
    study_dir = tmp_path / "later"
    assert main(["pareto", str(study_dir)]) == 0
    assert "hypervolume" in capsys.readouterr().out
    assert main(["export", str(study_dir)]) == 0
    folders = [p for p in (study_dir / "pareto").iterdir() if p.is_dir()]
    card = json.loads((folders[0] / "card.json").read_text())
    assert card["weights"].startswith("none") and not (folders[0] / "model.pt").exists()
    assert main(["report", str(study_dir)]) == 0
    page = (study_dir / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2
    assert (study_dir / "report_pareto.png").stat().st_size > 10_000
    assert "<th>ended by</th><td>n_trials (20)</td>" in page


def test_the_report_says_a_time_limit_ended_the_run(tmp_path: Path) -> None:
    raw = tabular_raw("limited", n_trials=100_000, sampler="random")
    assert _search(write_study(tmp_path, raw), tmp_path, "--timeout", "1") == 0
    assert 0 < len(_study(tmp_path, "limited").trials) < 100_000
    assert main(["report", str(tmp_path / "limited")]) == 0
    page = (tmp_path / "limited" / "report.html").read_text()
    assert "<th>limits</th><td>n_trials 100000, timeout 1 s</td>" in page
    assert "<th>ended by</th><td>timeout (1 s)</td>" in page


def test_bad_study_is_a_one_line_error(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    path = write_study(tmp_path, tabular_raw("bad", space="nope", n_trials=0))
    assert _search(path, tmp_path) == 2
    err = capsys.readouterr().err
    assert err.startswith("hwnas: error: 2 problem(s)") and "nope" in err
    assert not (tmp_path / "bad").exists()  # nothing ran, nothing written
