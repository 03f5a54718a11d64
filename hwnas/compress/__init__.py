"""Structured pruning (Torch-Pruning) and knowledge distillation for the Pareto winners.

    prune(model, (C, H, W), PruneConfig(ratio=0.3 | macs_budget=... | latency_budget_ms=...))
    Distiller(teacher, DistillConfig(mode="soft"|"hard", alpha, temperature))  # a loss_fn for fit
    analog.hwa_fit(model, data, "pcm", fit_cfg, loss_fn=distiller)   # HWA from a teacher
    shape_spec(pruned, fresh) / apply_spec(fresh, spec, state_dict)   # rebuild without pickle
"""

import importlib
from typing import Any

from hwnas.compress.distill import DistillConfig, Distiller, kd_loss
from hwnas.compress.shapes import apply_spec, shape_spec

_PRUNE = ("IMPORTANCES", "PruneConfig", "PruneResult", "prune")


def __getattr__(name: str) -> Any:
    # Torch-Pruning loads only when pruning is asked for: loading a checkpoint (shapes) and DDP
    # training need none of it, and a device image without it can still run them.
    if name in _PRUNE:
        module = importlib.import_module("hwnas.compress.prune")

        # The import binds the submodule to ``prune``; the function takes that name back.
        globals().update({n: getattr(module, n) for n in _PRUNE})
        return globals()[name]
    raise AttributeError(f"module 'hwnas.compress' has no attribute {name!r}")


__all__ = ["IMPORTANCES", "DistillConfig", "Distiller", "PruneConfig", "PruneResult",
           "apply_spec", "kd_loss", "prune", "shape_spec"]
