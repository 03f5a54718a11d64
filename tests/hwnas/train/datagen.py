"""Writers of small files in the formats the data-set readers parse, and a tiny CNN."""

from __future__ import annotations

import gzip
import pickle
from pathlib import Path

import numpy as np
import torch


def write_idx(path: Path, array: np.ndarray) -> Path:
    """An IDX file (uint8), gzipped when the name ends in .gz."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(d).to_bytes(4, "big") for d in array.shape)
    payload = header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wb") as f:
        f.write(payload)
    return path


def make_idx_dir(root: Path, n_train: int = 40, n_test: int = 20, gz: bool = True) -> Path:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    ext = ".gz" if gz else ""
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        write_idx(root / f"{prefix}-images-idx3-ubyte{ext}",
                  rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        write_idx(root / f"{prefix}-labels-idx1-ubyte{ext}", np.arange(n, dtype=np.uint8) % 10)
    return root


def make_cifar_dir(root: Path, per_batch: int = 12) -> Path:
    rng = np.random.default_rng(0)
    root.mkdir(parents=True, exist_ok=True)
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    for name in names:
        batch = {b"data": rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8),
                 b"labels": [int(v) for v in np.arange(per_batch) % 10]}
        with open(root / name, "wb") as f:
            pickle.dump(batch, f)
    return root


def make_image_folder(root: Path, classes=("cat", "dog", "owl"), per_class: int = 6,
                      test_name: str = "test") -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for split, n in (("train", per_class), (test_name, 2)):
        for cls in classes:
            folder = root / split / cls
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(n):
                pixels = rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(folder / f"{i}.png")
    return root


def tiny_cnn(in_chans: int = 1, num_classes: int = 10, width: int = 16) -> torch.nn.Module:
    """A small dense CNN that learns digits in about a second."""
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(in_chans, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, 2 * width, 3, padding=1, stride=2), nn.BatchNorm2d(2 * width), nn.ReLU(),
        nn.AdaptiveAvgPool2d(2), nn.Flatten(), nn.Linear(8 * width, num_classes))
