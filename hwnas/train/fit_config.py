"""``FitConfig``: how to train one model, the one training configuration of hwnas.

It lives apart from the loop (no torch import at module level) so that study files
(``nas.study.config.TrainCfg``) take their fields and defaults from it without loading torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hwnas.common.errors import ConfigError, Problem

OPTIMIZERS = ("sgd", "adamw")
VALIDATION = ("epoch", "end", "off")
_DEFAULT_LR = {"sgd": 0.1, "adamw": 1e-3}


@dataclass
class FitConfig:
    """How to train one model. Validated on construction: every bad field is reported at once."""

    epochs: float = 1.0
    """Passes over the train split (fractions allowed); ignored when ``steps`` is set."""
    steps: int | None = None
    """Optimizer steps budget; overrides ``epochs``."""
    batch_size: int = 128
    lr: float | None = None
    """Peak learning rate; None picks 0.1 for sgd and 1e-3 for adamw."""
    optimizer: str = "sgd"
    """``sgd`` (Nesterov momentum) or ``adamw``."""
    weight_decay: float = 5e-4
    """Applied to weights only: biases and norm parameters are not decayed."""
    momentum: float = 0.9
    """SGD momentum, or AdamW's beta1."""
    label_smoothing: float = 0.0
    warmup_epochs: float = 0.0
    """Linear warm-up from 0 to ``lr``, then cosine decay to 0 over the rest of the budget."""
    augment: bool = True
    """The data set's own augmentation (random translate; flip where it keeps the label)."""
    seed: int = 0
    """Seeds the batch order, augmentation and randomness inside the model (dropout), each from
    its own stream (``hwnas.common.seeds``)."""
    device: str = "cpu"
    amp: bool = True
    """Mixed precision on CUDA (bf16 where supported, else fp16 with loss scaling); off on CPU."""
    tf32: bool = False
    """TF32 for fp32 matmuls and convolutions on CUDA, set explicitly for the run and restored
    after (cuDNN's default is TF32, so fp32 training without this is most likely TF32)."""
    channels_last: bool = True
    """channels_last memory format for plain convs, on CPU too: oneDNN and cuDNN run it faster
    (1.3-1.4x training throughput on CPU for the CNN spaces, measured in bench/train_loop.py)."""
    eval_batch_size: int = 1000
    validation: str = "epoch"
    """When to score the val split while training: ``epoch`` (after every epoch, the history),
    ``end`` (after the last one only) or ``off`` (never; ``FitResult.val_acc`` is NaN), for a
    caller that scores the model itself afterwards."""

    def __post_init__(self) -> None:
        if self.lr is None and self.optimizer in _DEFAULT_LR:
            self.lr = _DEFAULT_LR[self.optimizer]
        problems = self.problems()
        if problems:
            raise ConfigError(problems)

    def problems(self) -> list[Problem]:
        checks = [
            ("epochs", self.steps is not None or _num(self.epochs) > 0, self.epochs, "must be > 0",
             "pass e.g. epochs=1 (or a steps budget)"),
            ("steps", self.steps is None or (isinstance(self.steps, int) and self.steps >= 1),
             self.steps, "must be None or an int >= 1", "pass e.g. steps=100"),
            ("batch_size", isinstance(self.batch_size, int) and self.batch_size >= 1,
             self.batch_size, "must be an int >= 1", "pass e.g. batch_size=128"),
            # lr None is only left when the optimizer is unknown: that problem is reported.
            ("lr", _num(self.lr) > 0 or (self.lr is None and self.optimizer not in OPTIMIZERS),
             self.lr, "must be > 0",
             "pass e.g. lr=0.1 (sgd), 1e-3 (adamw)"),
            ("optimizer", self.optimizer in OPTIMIZERS, self.optimizer,
             f"must be one of {list(OPTIMIZERS)}", "pick sgd or adamw"),
            ("weight_decay", _num(self.weight_decay) >= 0, self.weight_decay, "must be >= 0",
             "pass e.g. 5e-4"),
            ("momentum", 0 <= _num(self.momentum) < 1, self.momentum, "must lie in [0, 1)",
             "pass e.g. 0.9"),
            ("label_smoothing", 0 <= _num(self.label_smoothing) < 1, self.label_smoothing,
             "must lie in [0, 1)", "pass e.g. 0.1"),
            ("warmup_epochs", _num(self.warmup_epochs) >= 0, self.warmup_epochs, "must be >= 0",
             "pass e.g. 0.5"),
            ("device", device_ok(self.device), self.device,
             "must be cpu or an available cuda device",
             "pass --device cpu on a machine without GPU"),
            ("eval_batch_size", isinstance(self.eval_batch_size, int) and self.eval_batch_size >= 1,
             self.eval_batch_size, "must be an int >= 1", "pass e.g. 1000"),
            ("validation", self.validation in VALIDATION, self.validation,
             f"must be one of {VALIDATION}", "pass epoch, end or off"),
        ]
        return [Problem(f"FitConfig.{k}", rule, v, fix) for k, ok, v, rule, fix in checks if not ok]


def _num(v: object) -> float:
    """A number to compare, or NaN for anything else (so every check on it fails)."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def device_ok(device: str) -> bool:
    """Whether ``device`` names the CPU or a CUDA device this machine has."""
    import torch  # deferred: study files validate without loading torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        return False
    return dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available())
