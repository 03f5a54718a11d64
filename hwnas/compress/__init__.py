"""Structured pruning (Torch-Pruning) and knowledge distillation for the Pareto winners.

    prune(model, (C, H, W), PruneConfig(ratio=0.3 | macs_budget=... | latency_budget_ms=...))
    Distiller(teacher, DistillConfig(mode="soft"|"hard", alpha, temperature))  # a loss_fn for fit
    hwa_distill(model, data, "pcm", fit_cfg, distiller)   # HWA fine-tuning from a teacher
    shape_spec(pruned, fresh) / apply_spec(fresh, spec, state_dict)   # rebuild without pickle
"""

from hwnas.compress.distill import DistillConfig, Distiller, hwa_distill, kd_loss
from hwnas.compress.prune import IMPORTANCES, PruneConfig, PruneResult, prune
from hwnas.compress.shapes import apply_spec, shape_spec

__all__ = ["IMPORTANCES", "DistillConfig", "Distiller", "PruneConfig", "PruneResult",
           "apply_spec", "hwa_distill", "kd_loss", "prune", "shape_spec"]
