"""Successive halving in the Ray Tune driver: a ``Searcher`` that queues promotions first.

Ray Tune's own schedulers (ASHA, Hyperband) stop trials by one metric. Here a candidate's rung
evaluation is a Ray trial of its own, like an Optuna trial in ``nas.search.schedule``: the
``PromotingSearcher`` wraps the study's searcher, and on every ``suggest`` it first hands out a
promotion that ``nas.search.schedule.pending`` says is due (the same rule, fed with the finished Ray
trials), otherwise the wrapped searcher's next candidate at its starting rung. Promotions are
never passed to the wrapped searcher, which sees only the candidates it proposed. One Tune driver
process calls the searcher, so the claims need no lock; the searcher's state (every record) is
saved with Tune's experiment checkpoint, so ``Tuner.restore`` keeps every rung result and
re-queues a promotion whose trial was lost.
"""

from __future__ import annotations

import dataclasses
import pickle
import tempfile
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from nas.search.schedule import Record, SuccessiveHalving, pending, promotion_key
from nas.study.schedule import bracket_of

KEYS = ("rung", "bracket", "parent", "promotion")  # schedule fields in a Ray trial's config


class PromotingSearcher(Searcher):
    """``searcher``'s candidates plus the promotions of ``sh``, objectives ``metrics``."""

    def __init__(self, searcher: Searcher, sh: SuccessiveHalving, metrics: list[str]):
        self.searcher, self.sh, self.metrics = searcher, sh, metrics
        self.records: dict[str, Record] = {}
        self.configs: dict[int, dict[str, Any]] = {}
        self.ids: dict[str, int] = {}
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict,
                              **spec: Any) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        return self.searcher.set_max_concurrency(max_concurrent)

    def suggest(self, trial_id: str) -> dict | None:
        number = self.ids.setdefault(trial_id, len(self.ids))
        due = pending(list(self.records.values()), self.sh.directions, self.sh.cfg.eta,
                      self.sh.top)
        if due:
            parent, rung = due[0]
            config = {**self.configs[parent.number], "rung": rung, "bracket": parent.bracket,
                      "parent": parent.number, "promotion": promotion_key(parent.arch, rung)}
        else:
            config = self.searcher.suggest(trial_id)
            if config in (None, Searcher.FINISHED):
                return config
            bracket = bracket_of(number, self.sh.shares)
            config = {**config, "rung": bracket, "bracket": bracket}
        self.configs[number] = config
        self.records[trial_id] = _live(number, config)
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if "promotion" not in self.configs.get(self.ids.get(trial_id, -1), {}):
            self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None,
                          error: bool = False) -> None:
        config = self.configs.get(self.ids.get(trial_id, -1), {})
        if "promotion" not in config:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
        rec = self.records.get(trial_id)
        if rec is None:
            return
        if error or not result or "fail_reason" in result:
            del self.records[trial_id]  # a lost promotion holds no key: it is queued again
            return
        values = tuple(float(result[m]) for m in self.metrics)
        self.records[trial_id] = dataclasses.replace(
            rec, done=True, values=values, feasible=bool(result.get("feasible", True)))

    def get_state(self) -> dict:
        state = self.__dict__.copy()
        del state["searcher"]
        return state

    def set_state(self, state: dict) -> None:
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        """One file (Tune renames it into place): our records and the wrapped searcher's."""
        with tempfile.TemporaryDirectory() as tmp:
            inner = Path(tmp) / "inner.pkl"
            self.searcher.save(str(inner))
            blob = inner.read_bytes()
        Path(checkpoint_path).write_bytes(pickle.dumps({"state": self.get_state(),
                                                        "inner": blob}))

    def restore(self, checkpoint_path: str) -> None:
        saved = pickle.loads(Path(checkpoint_path).read_bytes())
        with tempfile.TemporaryDirectory() as tmp:
            inner = Path(tmp) / "inner.pkl"
            inner.write_bytes(saved["inner"])
            self.searcher.restore(str(inner))
        self.set_state(saved["state"])


def _live(number: int, config: dict[str, Any]) -> Record:
    params = {k: v for k, v in config.items() if k not in KEYS}
    return Record(number=number, arch=str(config.get("arch", params)), params=params,
                  rung=int(config["rung"]), bracket=int(config["bracket"]), done=False,
                  promotion=config.get("promotion"))

