"""AdaBS: batch-norm statistics re-estimated through the analog model.

Programming noise and drift change every channel's gain and offset on analog tiles, while the
batch norms keep the statistics of the digital model they were trained with. Joshi et al.
(Nature Communications 11, 2473, 2020, "Accurate deep neural network inference using
computational phase-change memory") re-estimate them on hardware: training images run through
the programmed (and drifted) model with the batch norms collecting fresh running means and
variances, nothing else changes. On the resnet space this removes most of the drift loss and
most of the spread between programmings (DESIGN.md, "Measured since the first wave").
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from analog import defaults
from hwnas.common.errors import ConfigError
from hwnas.common.seeds import stream_seed

_BN = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


class AdaBSWarning(UserWarning):
    """AdaBS was asked for, but the model has no batch norm to recalibrate."""


def batch_norms(model: nn.Module) -> list[nn.Module]:
    """Every batch-norm layer that tracks running statistics (timm's BatchNormAct2d included)."""
    return [m for m in model.modules() if isinstance(m, _BN) and m.track_running_stats]


def default_adabs(adabs: int | None, images: Tensor | None, model: nn.Module,
                  notes: list[str]) -> int:
    """The AdaBS image count for ``adabs=None`` (the default of ``analog.evaluate``): the
    studies' ``defaults.ADABS_IMAGES`` (capped at the training images handed over) whenever
    training images (``adabs_images``) and a batch norm exist; otherwise off, noted, because
    ``evaluate`` cannot draw training images itself. An explicit count is returned unchanged."""
    if adabs is not None:
        return adabs
    if not batch_norms(model):
        return 0
    if images is None or len(images) == 0:
        notes.append(f"AdaBS off: no training images passed (adabs_images=); pass them for the "
                     f"default of {defaults.ADABS_IMAGES} images, or adabs=0 to say so")
        return 0
    n = min(defaults.ADABS_IMAGES, len(images))
    if n < defaults.ADABS_IMAGES:
        notes.append(f"AdaBS on {n} training images: fewer than the default "
                     f"{defaults.ADABS_IMAGES} were passed")
    return n


def check_adabs(adabs: int, images: Tensor | None) -> None:
    """``adabs`` images must exist among the training images handed over."""
    if not isinstance(adabs, int) or isinstance(adabs, bool) or adabs < 0:
        raise ConfigError.one("adabs", "must be an integer >= 0 (training images)", adabs,
                              "use e.g. adabs=512, or 0 to keep the digital statistics")
    if adabs == 0:
        return
    have = 0 if images is None else len(images)
    if adabs > have:
        raise ConfigError.one(
            "adabs", f"must not exceed the training images available ({have})", adabs,
            f"use adabs <= {have}, or pass more training images (adabs_images=)")


@torch.no_grad()
def recalibrate(model: nn.Module, images: Tensor, *, batch_size: int = 256,
                device: str | torch.device = "cpu") -> int:
    """Re-estimate every batch norm's running mean and variance from ``images`` through ``model``.

    Only the batch norms switch to train mode (analog layers stay in eval mode: no training
    noise, drift compensation on); their running statistics restart and become the plain
    average over the batches (``momentum=None``). Returns the number of layers recalibrated.
    """
    norms = batch_norms(model)
    if not norms:
        return 0
    saved = [(m, m.momentum, m.training) for m in norms]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
        m.train()
    try:
        for start in range(0, len(images), batch_size):
            model(images[start:start + batch_size].to(device))
    finally:
        for m, momentum, training in saved:
            m.momentum = momentum
            m.train(training)
    return len(norms)


def training_images(x_train: Tensor, n: int, seed: int) -> Tensor | None:
    """``n`` training images drawn from the ``adabs`` stream of ``seed`` (None for ``n`` 0).

    A seeded random subset rather than the first ``n``: a data set stored by class would
    otherwise recalibrate on one class.
    """
    if n <= 0:
        return None
    gen = torch.Generator().manual_seed(stream_seed(seed, "adabs"))
    return x_train[torch.randperm(len(x_train), generator=gen)[:n]]


def warn_without_bn(model: nn.Module, name: str, notes: list[str]) -> bool:
    """Warn (and note) when AdaBS has nothing to do; True when the model has batch norms."""
    if batch_norms(model):
        return True
    note = f"{name}: adabs requested, but the model has no batch norm: nothing to recalibrate"
    warnings.warn(note, AdaBSWarning, stacklevel=3)
    notes.append(note)
    return False
