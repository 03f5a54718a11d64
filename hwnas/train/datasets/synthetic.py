"""A learnable synthetic data set of any shape: fast to make, for benchmarks and tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from hwnas.common.errors import ConfigError, Problem
from hwnas.train.datasets.base import RawData, register_dataset

_WHERE = "data set synthetic"


def _check(**values: int | float) -> None:
    problems = [Problem(_WHERE, f"{k} must be >= {low}", v, f"pass {k} >= {low}")
                for k, (v, low) in values.items() if not v >= low]
    if problems:
        raise ConfigError(problems)


def _prototypes(rng: np.random.Generator, num_classes: int, in_chans: int,
                img_size: int) -> np.ndarray:
    """One smooth random pattern per class: coarse noise upsampled, unit variance."""
    coarse = rng.standard_normal((num_classes, in_chans, 4, 4)).astype(np.float32)
    up = F.interpolate(torch.from_numpy(coarse), size=(img_size, img_size), mode="bilinear",
                       align_corners=False).numpy()
    return up / up.std(axis=(1, 2, 3), keepdims=True)


def _draw(rng: np.random.Generator, protos: np.ndarray, n: int,
          noise: float) -> tuple[np.ndarray, np.ndarray]:
    y = rng.integers(0, len(protos), size=n)
    # Random contrast and additive noise keep the task learnable but not trivial.
    gain = rng.uniform(0.5, 1.5, size=(n, 1, 1, 1)).astype(np.float32)
    x = protos[y] * gain + noise * rng.standard_normal((n, *protos.shape[1:]), dtype=np.float32)
    return x.astype(np.float32), y.astype(np.int64)


@register_dataset("synthetic", shape=(3, 32, 32), num_classes=10, flip=False, crop_pad=2,
                  uses_root=False)
def synthetic(root: Path | None, *, num_classes: int = 10, in_chans: int = 3, img_size: int = 32,
              n_train: int = 5000, n_test: int = 1000, noise: float = 1.5,
              data_seed: int = 0) -> RawData:
    """Synthetic class patterns plus noise; shape, classes and size are options."""
    _check(num_classes=(num_classes, 2), in_chans=(in_chans, 1), img_size=(img_size, 4),
           n_train=(n_train, 2), n_test=(n_test, 1), noise=(noise, 0.0))
    # The data are fixed by data_seed; the run's seed only draws the validation split.
    rng = np.random.default_rng(data_seed)
    protos = _prototypes(rng, num_classes, in_chans, img_size)
    x_tr, y_tr = _draw(rng, protos, n_train, noise)
    x_te, y_te = _draw(rng, protos, n_test, noise)
    return RawData(x_tr, y_tr, x_te, y_te, num_classes=num_classes,
                   source=f"synthetic(data_seed={data_seed})",
                   classes=tuple(f"pattern{c}" for c in range(num_classes)))
