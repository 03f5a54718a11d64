"""Structured pruning (Torch-Pruning) and knowledge distillation for the Pareto winners.

    prune(model, (C, H, W), PruneConfig(ratio=0.3 | macs_budget=... | latency_budget_ms=...))
    Distiller(teacher, DistillConfig(mode="soft"|"hard", alpha, temperature))  # a loss_fn for fit
    analog.hwa_fit(model, data, "pcm", fit_cfg, loss_fn=distiller)   # HWA from a teacher
    shape_spec(pruned, fresh) / apply_spec(fresh, spec, state_dict)   # rebuild without pickle
"""

from hwnas.compress.distill import DistillConfig, Distiller, kd_loss
from hwnas.compress.prune import IMPORTANCES, PruneConfig, PruneResult, prune
from hwnas.compress.shapes import apply_spec, shape_spec

__all__ = ["IMPORTANCES", "DistillConfig", "Distiller", "PruneConfig", "PruneResult",
           "apply_spec", "kd_loss", "prune", "shape_spec"]
