"""Tracking for real: a study logs its trials into a local MLflow file store through MLflow's own
client, which reads them back as docs/tracking.md says (one run per trial, its objective values
and arch), once per trial across resumed runs; infeasible trials are marked infeasible, never
given placeholder accuracies; no deprecation warning comes from the project's calls; TensorBoard
event files are written per trial."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import optuna
import pandas as pd
import pytest
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial
from study_files import tabular_raw, write_study

import hwnas
from nas.search.tracking import measured, mlflow_uri

mlflow = pytest.importorskip("mlflow")


def _client(uri: str, monkeypatch: pytest.MonkeyPatch) -> mlflow.MlflowClient:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # docs/tracking.md: reading it back
    return mlflow.MlflowClient(tracking_uri=mlflow_uri(uri))


def test_mlflow_file_store_is_browsable_and_resume_logs_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    tracking = {"mlflow_uri": str(tmp_path / "mlruns"), "tensorboard": str(tmp_path / "tb")}
    path = write_study(tmp_path, tabular_raw("tracked", n_trials=5, tracking=tracking))
    result = hwnas.run(path, out=tmp_path)
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ  # the opt-in is scoped to the logging
    client = _client(tracking["mlflow_uri"], monkeypatch)
    experiment = client.get_experiment_by_name("tracked")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 5
    by_trial = {t.user_attrs["arch"]: t for t in result.study.trials}
    for run in runs:
        trial = by_trial[run.data.tags["arch"]]
        assert run.data.metrics["acc_digital"] == pytest.approx(trial.values[0])
        assert run.data.metrics["latency_ms"] == pytest.approx(trial.values[1])
        assert run.data.metrics["feasible"] == 1.0 and run.data.tags["feasible"] == "true"
        assert run.data.params == {k: str(v) for k, v in trial.params.items()}
        assert run.info.status == "FINISHED" and run.info.run_name == str(trial.number)
    # A resumed study logs only its new trials.
    hwnas.run(path, out=tmp_path, n_trials=7)
    assert len(client.search_runs([experiment.experiment_id])) == 7
    events = sorted((tmp_path / "tb").glob("trial_*/**/events.out.tfevents.*"))
    assert len({e.relative_to(tmp_path / "tb").parts[0] for e in events}) == 7
    assert all(e.stat().st_size > 0 for e in events)


def test_infeasible_trials_are_logged_as_infeasible(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    table = pd.read_parquet(Path(tabular_raw()["tabular"]["path"]))
    cap = float(table["latency_ms"].quantile(0.5))  # half the cells are over the budget
    tracking = {"mlflow_uri": str(tmp_path / "mlruns")}
    raw = tabular_raw("capped", n_trials=12, tracking=tracking,
                      constraints=[{"metric": "latency", "max": cap}])
    result = hwnas.run(write_study(tmp_path, raw), out=tmp_path)
    over = {t.number for t in result.study.trials if t.user_attrs["latency_ms"] > cap}
    assert over and len(over) < 12
    client = _client(tracking["mlflow_uri"], monkeypatch)
    runs = client.search_runs([client.get_experiment_by_name("capped").experiment_id])
    for run in runs:
        infeasible = int(run.data.tags["trial_number"]) in over
        assert run.data.tags["feasible"] == ("false" if infeasible else "true")
        assert run.data.metrics["feasible"] == (0.0 if infeasible else 1.0)
        assert run.data.metrics["acc_digital"] > 0  # the table's accuracy, not a placeholder


def test_placeholder_values_of_a_skipped_trial_are_not_metrics() -> None:
    skipped = create_trial(state=TrialState.COMPLETE, values=[0.0, 5.0], params={"x": 0.1},
                           distributions={"x": FloatDistribution(0, 1)},
                           user_attrs={"feasible": False, "latency_ms": 5.0})
    assert measured(skipped, ["acc_pcm@1d", "latency_ms"]) == {"latency_ms": 5.0}
    fine = create_trial(state=TrialState.COMPLETE, values=[0.7, 5.0], params={"x": 0.1},
                        distributions={"x": FloatDistribution(0, 1)}, user_attrs={})
    assert measured(fine, ["acc_pcm@1d", "latency_ms"]) == {"acc_pcm@1d": 0.7, "latency_ms": 5.0}


def test_tracking_raises_no_deprecation_warning_from_our_calls(tmp_path: Path) -> None:
    tracking = {"mlflow_uri": str(tmp_path / "mlruns"), "tensorboard": str(tmp_path / "tb")}
    path = write_study(tmp_path, tabular_raw("clean", n_trials=3, tracking=tracking))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # third-party modules' own import-time warnings
        for module in ("nas", "hwnas", "search_spaces", "hw_cost", "analog"):
            # only warnings attributed to the project's code (our calls) become errors
            warnings.filterwarnings("error", category=DeprecationWarning, module=module)
            warnings.filterwarnings("error", category=FutureWarning, module=module)
        warnings.filterwarnings("error", category=optuna.exceptions.ExperimentalWarning,
                                module="nas")
        hwnas.run(path, out=tmp_path)
