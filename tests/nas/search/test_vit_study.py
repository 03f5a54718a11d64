"""A ViT study end to end on the CPU: per-block heads and MLP ratios, int8 and pcm scoring."""

from __future__ import annotations

from pathlib import Path

import pytest
from optuna.trial import TrialState
from study_files import live_raw, write_study

from nas.cli import main
from nas.study import store
from search_spaces import get_space

pytestmark = pytest.mark.slow


def test_a_vit_study_runs_and_exports(tmp_path: Path) -> None:
    raw = live_raw("vit_live", space="vit", n_trials=3,
                   objectives=[{"metric": "accuracy", "hw": "pcm", "time": "1d"},
                               {"metric": "latency"}],
                   hw_eval={"repeats": 2, "eval_limit": 100, "target_se": None,
                            "adabs": 0})  # a ViT has no batch norm for AdaBS
    path = write_study(tmp_path, raw)
    assert main(["run", str(path), "--out", str(tmp_path), "--progress", "off"]) == 0
    _, study, _ = store.load_dir(tmp_path / "vit_live")
    done = study.get_trials(states=(TrialState.COMPLETE,))
    assert len(done) == 3
    space = get_space("vit")
    for t in done:
        arch = t.user_attrs["arch"]
        assert space.encode(space.decode(arch)) == arch
        assert 0.0 <= t.user_attrs["acc_pcm@1d"] <= 1.0 and t.user_attrs["latency_ms"] > 0
    assert any((tmp_path / "vit_live" / "pareto").iterdir())
