"""Batch norms after pruning or short training: when their running statistics no longer fit the
weights, and their re-estimation on training images (as AdaBS does for the analog score)."""

from __future__ import annotations

from typing import Any

from torch import nn

from analog import defaults
from analog.adabs import recalibrate, training_images
from hwnas.train.data import DataSplits
from nas.finalize.config import FinalizeConfig
from nas.study.config import StudyConfig

# Training steps after which a batch norm's running average (torch's default momentum 0.1)
# keeps under 5% of what it held before: 0.9 ** 29 < 0.05.
SETTLED_STEPS = 29



def bn_images(cfg: StudyConfig, fc: FinalizeConfig) -> int:
    """Images that re-estimate the batch norms: ``fc.bn_images``, else the study's AdaBS count
    (the analog score's re-estimation), else the scoring default when the study turned it off."""
    if fc.bn_images is not None:
        return fc.bn_images
    return cfg.hw_eval.adabs or defaults.ADABS_IMAGES


def stale_bn(pruned: dict[str, Any], trained: dict[str, Any], hwa: dict[str, Any] | None
             ) -> list[str]:
    """Why the trained batch-norm statistics may not fit the final weights (empty: they do).
    Pruning changes every layer's inputs; under one epoch, or in fewer than ``SETTLED_STEPS``
    steps, the running averages still carry statistics of weights that have since moved (one
    epoch on 1,000 images is 7 steps of 128: measured on a quickstart model, digital accuracy
    0.18 on the trained statistics where the AdaBS-scored analog one read 0.43)."""
    why = []
    if pruned.get("target"):
        why.append(f"pruned ({pruned['target']})")
    steps = int(trained.get("steps") or 0)
    if float(trained.get("epochs", 1.0)) < 1:
        why.append(f"retrained {float(trained['epochs']):.2g} epoch (< 1)")
    elif 0 < steps < SETTLED_STEPS:
        why.append(f"retrained {steps} steps (< {SETTLED_STEPS})")
    if hwa is not None and float(hwa.get("epochs") or 0.0) < 1:
        why.append(f"HWA fine-tuned {float(hwa['epochs']):.2g} epoch (< 1)")
    return why


def reestimate_bn(model: nn.Module, data: DataSplits, cfg: StudyConfig, images: int) -> int:
    """Re-estimate every batch norm's running statistics on ``images`` training images, drawn
    as AdaBS draws them (the study seed's ``adabs`` stream); the model is left in eval mode.
    Returns the number of batch norms re-estimated (0 without images or batch norms)."""
    x = training_images(data.x_train, min(images, len(data.x_train)), cfg.seed)
    if x is None:
        return 0
    return recalibrate(model.eval(), x, device=cfg.train.device)


def bn_step(student: nn.Module, data: DataSplits, cfg: StudyConfig, fc: FinalizeConfig,
             why: list[str]) -> dict[str, Any] | None:
    if not why:
        return None
    n = min(bn_images(cfg, fc), len(data.x_train))
    layers = reestimate_bn(student, data, cfg, n) if n else 0
    return {"images": n if layers else 0, "layers": layers, "why": why}


def bn_note(bn: dict[str, Any] | None) -> str:
    """What the table's "after" batch norms hold, in one line."""
    if bn is None:
        return "batch norms: the trained statistics (no pruning, at least one epoch of training)"
    if not bn["layers"]:
        return (f"batch norms NOT re-estimated ({', '.join(bn['why'])}): no batch norm or "
                "--bn-images 0; the digital score reads the trained statistics")
    return (f"batch norms re-estimated on {bn['images']} training images before every \"after\" "
            f"figure ({', '.join(bn['why'])}), as AdaBS does for the analog score")

