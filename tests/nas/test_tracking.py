"""Tracking for real: a study logs its trials into a local MLflow file store that MLflow's own
client reads back (one run per trial, its objective values and arch), once per trial across
resumed runs; TensorBoard event files are written per trial."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_files import tabular_raw, write_study

import hwnas
from nas.search.tracking import mlflow_uri

mlflow = pytest.importorskip("mlflow")


def test_mlflow_file_store_is_browsable_and_resume_logs_once(tmp_path: Path) -> None:
    tracking = {"mlflow_uri": str(tmp_path / "mlruns"), "tensorboard": str(tmp_path / "tb")}
    path = write_study(tmp_path, tabular_raw("tracked", n_trials=5, tracking=tracking))
    result = hwnas.run(path, out=tmp_path)
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri(tracking["mlflow_uri"]))
    experiment = client.get_experiment_by_name("tracked")
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 5
    by_trial = {t.user_attrs["arch"]: t for t in result.study.trials}
    for run in runs:
        trial = by_trial[run.data.tags["arch"]]
        assert run.data.metrics["acc_digital"] == pytest.approx(trial.values[0])
        assert run.data.metrics["latency_ms"] == pytest.approx(trial.values[1])
        assert set(trial.params) <= set(run.data.params)
    # A resumed study logs only its new trials.
    hwnas.run(path, out=tmp_path, n_trials=7)
    assert len(client.search_runs([experiment.experiment_id])) == 7
    events = sorted((tmp_path / "tb").glob("trial_*/**/events.out.tfevents.*"))
    assert len({e.relative_to(tmp_path / "tb").parts[0] for e in events}) == 7
    assert all(e.stat().st_size > 0 for e in events)
