"""What a model costs on hardware: measured latency (CPU/CUDA), FLOPs/MACs, memory, roofline
placement, the analog tile cost model, latency predictors and a persistent cost cache.

    MeasureSpec(device="cpu", batch_size=1, dtype="fp32", form="eager")  (a timing's settings)
    measure_latency(model, (C, H, W), MeasureSpec(...)) -> LatencyResult
                                            (form: eager|compile|int8|fp16|bf16)
    compare_latency({"a": m1, "b": m2}, (C, H, W)) -> dict  (interleaved, side by side)
    profile_model(model, (C, H, W), trace="trace.json") -> dict  (top operators by self time)
    static_costs(model, (C, H, W)) -> dict(params, macs, flops, model_bytes, peak_activation_bytes)
    analog_cost(model, (C, H, W), tile_size=256) -> dict(tiles, analog_mac_fraction, ...)
    cost_of(space, arch, input_shape=..., num_classes=..., spec=MeasureSpec(...),
            chip=ChipSpec(hw="pcm_static")) -> dict               (measured once, cached)
    predict_latency(space, arch, input_shape=..., num_classes=...) -> float  (LUT or regressor)
    cache.CostCache(path)                                            (SQLite, many writers)

Names are imported on first use, so ``import hw_cost.cache`` (a cache worker, ``hwnas cost cache
stats``) does not pay for importing torch.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "AnalogFigures": "analog_cost", "analog_cost": "analog_cost", "flat_analog": "analog_cost",
    "cost_of": "api", "device_fingerprint": "api", "measure_model": "api",
    "BACKENDS": "backends", "fingerprint_hash": "backends",
    "CostCache": "cache", "CostKey": "cache", "compare_latency": "compare",
    "FORMS": "forms", "profile_model": "profile",
    "LatencyResult": "latency", "measure_latency": "latency",
    "ChipSpec": "spec", "MeasureSpec": "spec", "StopRule": "spec",
    "predict_latency": "predictors",
    "Ceilings": "roofline", "get_ceilings": "roofline", "measure_ceilings": "roofline",
    "roofline_point": "roofline",
    "static_costs": "static",
}
_MODULES = ("analog_cost", "api", "backends", "cache", "compare", "forms", "latency", "lut",
            "options", "predictors", "profile", "regressor", "roofline", "spec", "static")
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"hw_cost.{_EXPORTS[name]}"), name)
    if name in _MODULES:
        return importlib.import_module(f"hw_cost.{name}")
    raise AttributeError(f"module 'hw_cost' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
