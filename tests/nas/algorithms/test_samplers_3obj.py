"""Three-objective studies (accuracy, CPU latency, analog energy) on the NB201 objective table:
the default sampler runs them through the Optuna driver, reproducibly, and the front is 3-D."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from study_files import REPO, tabular_raw

TABLE3 = REPO / "bench" / "data" / "nb201_objectives.parquet"


def _raw(name: str, sampler: str) -> dict:
    return tabular_raw(name, n_trials=40, sampler=sampler, tabular={"path": str(TABLE3)},
                       objectives=[{"metric": "accuracy"}, {"metric": "latency"},
                                   {"metric": "energy"}])


@pytest.mark.parametrize("sampler", ["default", "nsga3"])
def test_three_objective_study_runs_and_repeats(tmp_path: Path, sampler: str) -> None:
    from nas.results import summary
    from nas.search.run import run_search
    from nas.study.config import validate_study
    from nas.study.store import load_dir

    archs = []
    for run in ("a", "b"):
        study_dir = run_search(validate_study(_raw(f"three_{run}", sampler)),
                               out_root=tmp_path, progress=False)
        cfg, study, _ = load_dir(study_dir)
        archs.append([t.user_attrs["arch"] for t in study.trials])
    assert archs[0] == archs[1]  # same seed, same proposals
    front = summary.front(cfg, study)
    values = np.array([t.values for t in front.trials])
    assert values.shape[1] == 3 and len(front.trials) >= 3
    assert front.hypervolume > 0
    if sampler == "default":
        assert len(set(archs[0])) == len(archs[0])  # the default never repeats an arch
