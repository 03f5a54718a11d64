"""The Ray Tune side of successive halving: ``PromotingSearcher`` hands out promotions first,
keeps them from the wrapped searcher, re-queues a lost one, and survives save/restore."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray.tune")

from ray.tune.search import Searcher  # noqa: E402

from nas.search.schedule import SuccessiveHalving, pending  # noqa: E402
from nas.search.schedule_ray import PromotingSearcher  # noqa: E402
from nas.study.schedule import ScheduleCfg  # noqa: E402

METRICS = ["objective__acc", "objective__lat"]


class ListSearcher(Searcher):
    """Proposes archs a0, a1, ... and remembers what it was told."""

    def __init__(self) -> None:
        super().__init__(metric=METRICS, mode=["max", "min"])
        self.n, self.completed = 0, []

    def suggest(self, trial_id: str) -> dict:
        self.n += 1
        return {"arch": f"a{self.n - 1}", "x": self.n - 1}

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        self.completed.append(trial_id)

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(str(self.n))

    def restore(self, checkpoint_path: str) -> None:
        self.n = int(Path(checkpoint_path).read_text())


def _result(config: dict) -> dict:
    x = config["x"]  # accuracy and latency both grow with x: every arch is on one front
    return {METRICS[0]: x + 10 * config["rung"], METRICS[1]: 100 + x, "feasible": True}


def _searcher() -> PromotingSearcher:
    sh = SuccessiveHalving(ScheduleCfg(type="sh", eta=3, min_budget=1, max_budget=9),
                           ["maximize", "minimize"])
    return PromotingSearcher(ListSearcher(), sh, METRICS)


def test_promotions_come_first_and_follow_the_rule() -> None:
    s = _searcher()
    configs = {f"t{i}": s.suggest(f"t{i}") for i in range(6)}
    assert all(c["rung"] == 0 for c in configs.values())
    for tid, c in configs.items():
        s.on_trial_complete(tid, _result(c))
    promoted = [s.suggest(f"p{i}") for i in range(2)]
    # one front: crowding distance ranks its two extremes, a0 and a5, first
    assert sorted(c["arch"] for c in promoted) == ["a0", "a5"]
    assert all(c["rung"] == 1 and "promotion" in c for c in promoted)
    assert s.suggest("n0")["rung"] == 0  # nothing else due: a new candidate
    for i, c in enumerate(promoted):
        s.on_trial_complete(f"p{i}", _result(c))
    assert s.searcher.completed == [f"t{i}" for i in range(6)]  # promotions kept from it


def test_a_failed_promotion_is_queued_again_and_state_round_trips(tmp_path: Path) -> None:
    s = _searcher()
    for i in range(3):
        c = s.suggest(f"t{i}")
        s.on_trial_complete(f"t{i}", _result(c))
    first = s.suggest("p0")
    assert first["promotion"] == "a0@1"  # 3 on one front, 1 promoted: the first extreme
    s.on_trial_complete("p0", error=True)
    again = s.suggest("p1")
    assert again["promotion"] == first["promotion"]
    s.save(str(tmp_path / "ckpt.pkl"))
    t = _searcher()
    t.restore(str(tmp_path / "ckpt.pkl"))
    assert t.searcher.n == s.searcher.n and t.records.keys() == s.records.keys()
    recs = list(t.records.values())
    assert pending(recs, ["maximize", "minimize"], 3, 2) == []  # a2@1 is held by p1
    assert np.isfinite(recs[0].values).all()
