"""A candidate proposed again is answered from the study's store: the same values, constraints
and metrics as its first evaluation, no second evaluation, and it still counts as a trial."""

from __future__ import annotations

from pathlib import Path

import pytest
from study_files import stored_study, tabular_raw, write_study

from nas.cli import main
from nas.scoring.evaluate import Evaluator
from nas.search.progress import seconds_split
from nas.search.repeats import REPEAT_OF


def _metrics(trial) -> dict[str, str]:  # noqa: ANN001
    """Every stored attribute but the trial's own, as text (a NaN metric equals itself)."""
    own = ("process", "worker", "move", REPEAT_OF, "info")
    return {k: repr(v) for k, v in trial.user_attrs.items() if k not in own}


def test_a_repeated_candidate_is_answered_from_the_store(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    raw = tabular_raw("again", n_trials=1, constraints=[{"metric": "latency", "max": 1e9}])
    path = write_study(tmp_path, raw)
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress"]) == 0
    study = stored_study(tmp_path, "again")
    first = study.trials[0]
    for _ in range(2):  # the same candidate twice more, as a sampler may propose it
        study.enqueue_trial(first.params)
    calls: list[str] = []
    real = Evaluator.evaluate

    def counted(self, arch, **kw):  # noqa: ANN001, ANN003, ANN202
        calls.append(arch)
        return real(self, arch, **kw)

    monkeypatch.setattr(Evaluator, "evaluate", counted)
    assert main(["search", str(path), "--out", str(tmp_path), "--no-progress",
                 "--n-trials", "4"]) == 0
    trials = stored_study(tmp_path, "again").trials
    assert [t.state.name for t in trials] == ["COMPLETE"] * 4
    again = [t for t in trials if REPEAT_OF in t.user_attrs]
    assert [t.number for t in again] == [1, 2]
    for t in again:
        assert t.user_attrs[REPEAT_OF] == 0 and t.values == first.values
        assert t.constraints == first.constraints
        assert t.user_attrs["arch"] == first.user_attrs["arch"]
        assert _metrics(t) == _metrics(first)
        assert seconds_split(t) == {} and seconds_split(first)  # its time was the twin's
        assert not any(k.startswith("seconds_") for k in t.user_attrs["info"])
    assert len(calls) == 1 and calls[0] != first.user_attrs["arch"]  # only the novel one ran
