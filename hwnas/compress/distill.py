"""Knowledge distillation as a ``loss_fn(logits, targets, inputs)`` for ``hwnas.train.loop.fit``.

- ``soft`` (Hinton et al. 2015): ``a*CE(s, y) + (1-a) * T^2 * KL(softmax(t/T) || softmax(s/T))``;
  the ``T^2`` keeps the soft-target gradients on the same scale as the hard ones.
- ``hard`` (DeiT, Touvron et al. 2021): ``a*CE(s, y) + (1-a)*CE(s, argmax t)``. On a plain ViT
  (what the ``vit`` space builds) the teacher's hard labels train the one class head. When the
  student returns two heads in training, as timm's ``VisionTransformerDistilled`` does after
  ``set_distilled_training(True)``, the class head learns ``y`` and the distillation head learns
  the teacher's labels, as in DeiT.

The teacher is put in eval mode with gradients off and runs under ``no_grad``; it is never wrapped
in DDP (each rank holds its own copy). It may be analog (``analog.apply``): then the student learns
the hardware model's outputs. Hardware-aware training from a teacher is
``analog.hwa_fit(student, data, hw, cfg, loss_fn=Distiller(teacher))``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.common.errors import ConfigError, Problem
from hwnas.train.ddp import call_factory

MODES = ("soft", "hard")


@dataclass(kw_only=True)
class DistillConfig:
    """How the student learns from the teacher."""

    mode: str = "soft"
    """``soft`` (Hinton KD) or ``hard`` (DeiT hard-label distillation)."""
    alpha: float = 0.5
    """Weight of the ground-truth loss; ``1 - alpha`` goes to the teacher term."""
    temperature: float = 4.0
    """Softmax temperature of the soft term (typical 2-8)."""

    def validate(self) -> DistillConfig:
        problems = []
        if self.mode not in MODES:
            problems.append(Problem("distill mode", f"must be one of {list(MODES)}", self.mode,
                                    "use soft (any student) or hard (DeiT style)"))
        if not 0.0 <= self.alpha <= 1.0:
            problems.append(Problem("distill alpha", "must be in [0, 1]", self.alpha,
                                    "e.g. 0.5 weighs labels and teacher equally"))
        if not self.temperature > 0:
            problems.append(Problem("distill temperature", "must be > 0", self.temperature,
                                    "e.g. 4.0"))
        if problems:
            raise ConfigError(problems)
        return self


def kd_loss(student: torch.Tensor, teacher: torch.Tensor, targets: torch.Tensor, *,
            alpha: float, temperature: float) -> torch.Tensor:
    """Hinton's distillation loss on logits."""
    t = temperature
    soft = F.kl_div(F.log_softmax(student / t, dim=-1), F.softmax(teacher / t, dim=-1),
                    reduction="batchmean") * (t * t)
    return alpha * F.cross_entropy(student, targets) + (1.0 - alpha) * soft


def hard_loss(student: torch.Tensor | tuple[torch.Tensor, torch.Tensor], teacher: torch.Tensor,
              targets: torch.Tensor, *, alpha: float) -> torch.Tensor:
    """DeiT hard distillation; a ``(cls, dist)`` pair uses the distillation head for the teacher."""
    cls_out, dist_out = student if isinstance(student, tuple) else (student, student)
    labels = teacher.argmax(dim=-1)
    return alpha * F.cross_entropy(cls_out, targets) + (1 - alpha) * F.cross_entropy(dist_out,
                                                                                     labels)


class Distiller:
    """``loss_fn(logits, targets, inputs)`` that runs the frozen teacher on ``inputs``."""

    def __init__(self, teacher: nn.Module, cfg: DistillConfig | None = None):
        self.cfg = (cfg or DistillConfig()).validate()
        self.teacher = freeze(teacher)

    @torch.no_grad()
    def teacher_logits(self, inputs: torch.Tensor) -> torch.Tensor:
        # no_grad rather than inference_mode: inference tensors may not be saved for backward.
        out = self.teacher(inputs)
        return (out[0] + out[1]) / 2 if isinstance(out, tuple) else out

    def __call__(self, logits: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
                 targets: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        teacher = self.teacher_logits(inputs).float()
        if self.cfg.mode == "hard":
            return hard_loss(logits, teacher, targets, alpha=self.cfg.alpha)
        if isinstance(logits, tuple):  # two-head student with soft KD: distil on their mean
            logits = (logits[0] + logits[1]) / 2
        return kd_loss(logits.float(), teacher, targets, alpha=self.cfg.alpha,
                       temperature=self.cfg.temperature)


def freeze(model: nn.Module) -> nn.Module:
    """Eval mode and no gradients: the teacher's BN statistics and weights never change."""
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def make_loss(*, teacher_factory: str, teacher_kwargs: dict | None = None, mode: str = "soft",
              alpha: float = 0.5, temperature: float = 4.0, device: str = "cpu") -> Distiller:
    """Factory for ``hwnas.train.ddp`` jobs: each rank builds its teacher through
    ``teacher_factory`` (``"module:function"``, e.g. ``search_spaces.checkpoint:load_model``
    with ``{"path": ...}``), so no rank unpickles a module."""
    teacher = call_factory("teacher_factory", teacher_factory, teacher_kwargs or {}, device)
    return Distiller(teacher.to(device), DistillConfig(mode=mode, alpha=alpha,
                                                        temperature=temperature))
