"""The roofline holds on a live study: no candidate attains more than its roof.

A real search (Fashion-MNIST at 28x28, as the quickstart, the dense ResNet space, measured
latency at batch 1 on one thread, ceilings measured on this machine) whose every completed
trial must sit at or under its roof, with the binding ceiling named on its card.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from optuna.trial import TrialState

from nas.cli import main
from nas.study import store

pytestmark = pytest.mark.slow

STUDY = {
    "name": "roof", "space": "resnet", "seed": 0, "n_trials": 6,
    "data": {"name": "fashion_mnist", "train_limit": 256, "test_limit": 256},
    "objectives": [{"metric": "accuracy"}, {"metric": "latency"}],
    "train": {"steps": 2, "batch_size": 64, "lr": 0.05},
    "hw_eval": {"repeats": 1, "eval_limit": 100},
    "latency": {"threads": 1, "max_seconds": 0.5}, "heartbeat_s": 1,
}


def test_no_candidate_attains_more_than_its_roof(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HWNAS_CACHE", str(tmp_path / "costs.db"))  # ceilings measured afresh
    path = tmp_path / "roof.yaml"
    path.write_text(yaml.safe_dump(STUDY))
    assert main(["run", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    _, study, _ = store.load_dir(tmp_path / "roof")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) >= 4
    for t in done:
        a = t.user_attrs
        assert 0 < a["roof_fraction"] <= 1.0, (a["arch"], a["roof_fraction"], a["info"])
        assert a["attained_flops"] <= a["roof_flops"]
        assert a["info"]["ceiling"] in ("compute", "L2 bandwidth", "LLC bandwidth",
                                        "DRAM bandwidth")
    card = next((tmp_path / "roof" / "pareto").glob("*/card.json"))
    roof = json.loads(card.read_text())["roofline"]
    assert roof["roof_fraction"] <= 1.0 and roof["ceiling"]
    assert "binding ceiling" in (card.parent / "card.md").read_text()
