"""noise.json keys each recipe's calibrated training noise by the column that recipe scores."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from bench.fidelity import report


def _scores(recipe: str, rng: np.random.Generator) -> pd.DataFrame:
    rows = [{"recipe": recipe, "seed": seed, "arch": f"a{i}", "acc": 0.8 + rng.normal(0, 0.02),
             "acc_se": 0.005, "repeats": 3} for i in range(6) for seed in (1, 2)]
    return pd.DataFrame(rows)


def test_each_recipe_is_keyed_by_its_own_column(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "NOISE", tmp_path / "noise.json")
    rng = np.random.default_rng(0)
    scores = pd.concat([_scores("default", rng), _scores("default_static", rng)])
    report.calibrate(scores)
    stored = json.loads((tmp_path / "noise.json").read_text())
    assert set(stored["default"]) == {"acc_pcm@1d", "pairs"}
    assert set(stored["default_static"]) == {"acc_pcm_static@1d", "pairs"}
    assert stored["default_static"]["pairs"] == 6
    assert stored["default_static"]["acc_pcm_static@1d"] > 0
