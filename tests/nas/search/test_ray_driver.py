"""The Ray Tune backend for real: a local Ray started by the command runs a tiny live study;
its trials land in the same Optuna storage and artifact format as the Optuna driver's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from optuna.trial import TrialState
from study_files import live_raw, write_study

from nas.cli import main
from nas.study import store

pytestmark = pytest.mark.slow


def test_ray_backend_same_artifacts_and_resume(tmp_path: Path) -> None:
    raw = live_raw("rayq", n_trials=2, backend="ray",
                   ray={"cpus_per_trial": 1, "max_concurrent": 2})
    path = write_study(tmp_path, raw)
    assert main(["run", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    study_dir = tmp_path / "rayq"
    cfg, study, _ = store.load_dir(study_dir)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 2
    for t in done:
        assert t.user_attrs["ray_trial_id"] and t.user_attrs["worker"] == "ray"
        assert t.values == [t.user_attrs["acc_pcm@1d"], t.user_attrs["latency_ms"]]
        assert "acc_digital" in t.user_attrs and store.load_weights(study_dir, study, t)
        assert t.distributions and set(t.params) == set(t.distributions)
    index = json.loads((study_dir / "pareto" / "index.json").read_text())
    assert index["models"] and all(m["onnx_ok"] for m in index["models"])
    assert (study_dir / "report.html").exists() and (study_dir / "trials.parquet").exists()
    # Rerunning the same command: nothing left to do, nothing copied twice.
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    _, study, _ = store.load_dir(study_dir)
    ids = [t.user_attrs["ray_trial_id"] for t in study.trials]
    assert len(ids) == len(set(ids)) == 2


@pytest.mark.parametrize("scheme", ["path", "file-uri"])
def test_ray_storage_takes_a_shared_path_or_uri(tmp_path: Path, scheme: str) -> None:
    from nas.search.ray_driver import _Root
    from nas.study.config import validate_study

    shared = tmp_path / "shared"
    where = str(shared) if scheme == "path" else shared.as_uri()
    cfg = validate_study(live_raw("uri", backend="ray", ray={"storage": where}))
    root = _Root(cfg, tmp_path / "runs" / "uri")
    assert root.base == f"{where}/uri" and root.runs() == []
    (shared / "uri" / "run-000").mkdir()
    assert root.runs() == ["run-000"] and not root.done("run-000")
    root.mark_done("run-000")
    assert root.done("run-000") and (shared / "uri" / "run-000" / ".hwnas_done").exists()
    assert not (tmp_path / "runs" / "uri" / "ray").exists()  # nothing on the driver's disk
