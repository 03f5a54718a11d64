"""Wire a study's space and its pre-training budgets into the sampler (``attach_sampler``).

Budgets on cost metrics (``Budget.early``: latency, params, MACs, energy) reach Optuna's
samplers as constraints through ``trial.set_constraint`` (the driver's ``_constrain``; Optuna 5
reads ``FrozenTrial.constraints`` in TPE, NSGA-II/III and GP, and deprecates
``constraints_func``). A sampler that can also plan with the space and drop clearly over-budget
proposals before they are measured (the default sampler's ``attach``) gets both here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import hw_cost
from hw_cost.backends import fingerprint_hash
from hw_cost.estimate_cache import ESTIMATE_KIND, estimate_fields, estimate_key
from nas.algorithms.prefilter import BudgetFilter, Limit
from nas.scoring import glue
from search_spaces.stats import reference_stats

if TYPE_CHECKING:
    from nas.study.config import StudyConfig


def attach_sampler(sampler: Any, evaluator: Any) -> BudgetFilter | None:
    """Give ``sampler`` the study's space, its hypervolume reference as far as it is fixed
    before any trial, and a ``BudgetFilter`` for its early budgets, when it takes them
    (``attach``); returns the filter (None: no early budget or no ``attach``)."""
    if not hasattr(sampler, "attach"):
        return None
    reference = evaluator.cfg.fixed_reference()  # the front's own, for the parent rule
    limits = [Limit(b.key, max=b.max, min=b.min) for b in evaluator.budgets if b.early]
    if not limits or evaluator.table is not None:  # a table row costs nothing to look up
        sampler.attach(space=evaluator.space, reference=reference)
        return None
    space, data, cfg = evaluator.space, evaluator.data, evaluator.cfg
    shape, classes = tuple(data.input_shape), data.num_classes

    def static(arch: str) -> dict[str, float]:  # exact, on the meta device: no memory, no time
        params, macs = reference_stats(space, arch, shape, classes)
        return {"params": float(params), "macs": float(macs)}

    view = _CacheView.open(cfg, space.name, shape, classes)
    prefilter = BudgetFilter(limits, static, cached=view.get if view else None,
                             history=view.history if view else None)
    sampler.attach(space=space, prefilter=prefilter, reference=reference)
    return prefilter


class _CacheView:
    """The cost cache's rows in the study's latency setting: ``get(arch)`` its stored cost
    (measured before: judged on the stored median, the same on every rerun) with the analog
    estimate of the study's hardware model when one is stored, ``history()`` every such row
    (the pre-filter's fit starts from them)."""

    def __init__(self, rows: Any, classes: int, form: str,
                 estimate: Any = lambda arch: None):
        self._rows, self.classes, self.form, self._estimate = rows, classes, form, estimate

    @classmethod
    def open(cls, cfg: StudyConfig, space: str, shape: tuple[int, ...], classes: int
             ) -> _CacheView | None:
        lat = cfg.latency
        try:
            store = hw_cost.api.resolve_cache(lat.cache)
            if store is None:
                return None
            fp = fingerprint_hash(hw_cost.device_fingerprint(lat.device, lat.threads))
        except Exception:  # noqa: BLE001 - no readable cache: the filter predicts instead
            return None
        where = {"space": space, "fingerprint": fp, "batch": lat.batch_size, "dtype": lat.dtype,
                 "input_shape": shape}
        hw, hw_options = glue.cost_hw(cfg)

        def estimate(arch: str) -> dict | None:  # the timing's row holds no hardware model's
            return store.get_entry(ESTIMATE_KIND, estimate_key(
                space, arch, shape, classes, tile_size=None, hw=hw, hw_options=hw_options))

        return cls(lambda **more: store.rows(**where, **more), classes, glue.latency_form(cfg),
                   estimate if hw is not None else lambda arch: None)

    def _values(self, **more: Any) -> list[dict]:
        return [r["value"] for r in self._rows(**more)
                if r["options"].get("num_classes") == self.classes
                and r["options"].get("form", "eager") == self.form]

    def get(self, arch: str) -> dict | None:
        rows = [v for v in self._values(arch=arch) if v.get("latency_stable", True)]
        if not rows:
            return None
        estimate = self._estimate(arch)  # rows come oldest first
        return {**rows[-1], **estimate_fields(estimate)} if estimate else rows[-1]

    def history(self) -> list[dict]:
        return self._values()
