"""Wire a study's space and its pre-training budgets into the sampler (``attach_sampler``).

Budgets on cost metrics (``Budget.early``: latency, params, MACs, energy) reach Optuna's
samplers as constraints through ``trial.set_constraint`` (the driver's ``_constrain``; Optuna 5
reads ``FrozenTrial.constraints`` in TPE, NSGA-II/III and GP, and deprecates
``constraints_func``). A sampler that can also plan with the space and drop clearly over-budget
proposals before they are measured (the default sampler's ``attach``) gets both here.
"""

from __future__ import annotations

from typing import Any

import hw_cost
from hw_cost.backends import fingerprint_hash
from nas.algorithms.prefilter import BudgetFilter, Limit
from nas.scoring import glue


def attach_sampler(sampler: Any, evaluator: Any) -> BudgetFilter | None:
    """Give ``sampler`` the study's space and a ``BudgetFilter`` for its early budgets, when it
    takes them (``attach``); returns the filter (None: no early budget or no ``attach``)."""
    if not hasattr(sampler, "attach"):
        return None
    limits = [Limit(b.key, max=b.max, min=b.min) for b in evaluator.budgets if b.early]
    if not limits or evaluator.table is not None:  # a table row costs nothing to look up
        sampler.attach(space=evaluator.space)
        return None
    space, data, cfg = evaluator.space, evaluator.data, evaluator.cfg
    shape, classes = tuple(data.input_shape), data.num_classes

    def static(arch: str) -> dict[str, float]:
        from search_spaces.stats import reference_stats

        params, macs = reference_stats(space, arch, shape, classes)
        return {"params": float(params), "macs": float(macs)}

    prefilter = BudgetFilter(limits, static, cached=_cache_reader(cfg, space.name, shape,
                                                                  classes))
    sampler.attach(space=space, prefilter=prefilter)
    return prefilter


def _cache_reader(cfg: Any, space: str, shape: tuple[int, ...], classes: int):  # noqa: ANN202
    """``arch -> stored cost dict`` in the study's latency setting (None when not measured), so
    an arch measured before is judged on its stored median, the same on every rerun."""
    lat = cfg.latency
    try:
        store = hw_cost.api.resolve_cache(lat.cache)
        if store is None:
            return None
        fp = fingerprint_hash(hw_cost.device_fingerprint(lat.device, lat.threads))
    except Exception:  # noqa: BLE001 - no readable cache: the filter predicts instead
        return None
    form = glue.latency_form(cfg)

    def cached(arch: str) -> dict | None:
        rows = store.rows(space=space, arch=arch, fingerprint=fp, batch=lat.batch_size,
                          dtype=lat.dtype, input_shape=shape)
        rows = [r for r in rows if r["options"].get("num_classes") == classes
                and r["options"].get("form", "eager") == form
                and r["value"].get("latency_stable", True)]
        return rows[-1]["value"] if rows else None  # rows come oldest first

    return cached
