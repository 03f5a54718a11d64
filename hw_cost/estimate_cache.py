"""The analog estimate of a candidate, cached apart from its timing (``cost_of``).

A hardware model (``hw``, ``hw_options``, ``tile_size``) changes only the analog estimate:
tiles, ADC bits, energy, computed from the model's shapes. The timing is the expensive, noisy
part, so it is cached once per arch and setting, and each hardware model's estimate is stored
beside it in the cache's ``entries`` (kind ``ESTIMATE_KIND``), keyed by what it depends on:
space, arch, input shape, classes and the hardware model; not the device, batch or dtype.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence

from hw_cost.analog_cost import flat_analog
from hw_cost.cache import CostCache, export_path, write_table

ESTIMATE_KIND = "analog_estimate"


ESTIMATE_OF_KIND = "analog_estimate_of"
"""What each estimate describes (space, arch, shape, hardware model), under the same key: the
key is a digest, and an export must say which arch and model each row is."""


def estimate_parts(space: str, arch: str, input_shape: Sequence[int], num_classes: int, *,
                   tile_size: int | None, hw: str | None,
                   hw_options: dict[str, object] | None) -> dict[str, object]:
    """What one arch's analog estimate under one hardware model depends on."""
    return {"space": space, "arch": arch, "input_shape": list(input_shape),
            "num_classes": num_classes, "tile_size": tile_size, "hw": hw,
            "hw_options": dict(hw_options or {})}


def parts_key(parts: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def estimate_key(space: str, arch: str, input_shape: Sequence[int], num_classes: int, *,
                 tile_size: int | None, hw: str | None,
                 hw_options: dict[str, object] | None) -> str:
    """The cache key of one arch's analog estimate under one hardware model."""
    return parts_key(estimate_parts(space, arch, input_shape, num_classes, tile_size=tile_size,
                                    hw=hw, hw_options=hw_options))


def estimate_fields(estimate: dict) -> dict[str, object]:
    """The fields of a cost dict that an estimate gives: the flat headline figures and the
    whole estimate nested under ``analog`` (as ``measure_model`` lays them out)."""
    return {**flat_analog(estimate), "analog": estimate}


def split_estimate(result: dict) -> tuple[dict, dict | None]:
    """(the fields of a ``measure_model`` result that hold for any hardware model, its analog
    estimate or None when it has none)."""
    estimate = result.get("analog")
    if estimate is None:
        return dict(result), None
    drop = estimate_fields(estimate)
    return {k: v for k, v in result.items() if k not in drop}, estimate


def stored_estimate(store: CostCache | None, parts: dict[str, object],
                    compute: Callable[[], dict], *, fresh: dict | None = None) -> dict:
    """``fresh`` (just computed with a timing) when given, else the stored estimate of
    ``parts`` (``estimate_parts``), else ``compute()``; whatever was computed is stored for the
    next call, beside what it describes."""
    key = parts_key(parts)
    if fresh is None and store is not None:
        hit = store.get_entry(ESTIMATE_KIND, key)
        if hit is not None:
            return hit
    estimate = fresh if fresh is not None else compute()
    if store is not None:
        store.put_entry(ESTIMATE_KIND, key, estimate)
        store.put_entry(ESTIMATE_OF_KIND, key, parts)
    return estimate


def export_estimates(store: CostCache, path: str | os.PathLike) -> int:
    """Write every stored analog estimate, one row per (arch, hardware model), to ``.csv`` or
    ``.parquet``: what it describes (``space``, ``arch``, ``hw``, ``tile_size``,
    ``hw_options`` as JSON; empty for an estimate stored before these were kept), then its
    fields flattened (``assumptions.adc_share``, ...)."""
    import pandas as pd

    path = export_path(path)
    about = store.entries(ESTIMATE_OF_KIND)
    records = []
    for key, estimate in store.entries(ESTIMATE_KIND).items():
        of = dict(about.get(key) or {})
        of = {**of, "hw_options": json.dumps(of.get("hw_options", {}), sort_keys=True),
              "input_shape": json.dumps(of.get("input_shape"))} if of else {}
        records.append({"key": key, **of, "estimate": estimate})
    flat = pd.json_normalize(records, sep=".") if records else pd.DataFrame(columns=["key"])
    flat.columns = [c.removeprefix("estimate.") for c in flat.columns]
    return write_table(flat, path)
