"""CIFAR-10 from the standard python-pickle batch directory (``cifar-10-batches-py``)."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

from hwnas.common.errors import ConfigError
from hwnas.train.datasets.base import (
    ROOT_HOW,
    RawData,
    check_labels,
    register_dataset,
    require_path,
)

CIFAR_ROOT = "data/cifar-10-batches-py"
CIFAR_HOW = ("download cifar-10-python.tar.gz from https://www.cs.toronto.edu/~kriz/cifar.html "
             "on a machine with network, extract it, and name the folder cifar-10-batches-py "
             f"(the one holding data_batch_1..5 and test_batch) with {ROOT_HOW}")
CIFAR_CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
                 "truck")


def read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One pickled batch -> (N, 3, 32, 32) uint8 images and int64 labels.

    The format is pickle, so only read batch files you trust (as for any pickled data set).
    """
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    data, labels = batch.get(b"data"), batch.get(b"labels")
    if data is None or labels is None or np.asarray(data).shape[1:] != (3072,):
        raise ConfigError.one(f"CIFAR-10 batch {path}", "must hold b'data' (N, 3072) and b'labels'",
                              sorted(batch)[:4], "use the python version of CIFAR-10")
    x = np.asarray(data, dtype=np.uint8).reshape(-1, 3, 32, 32)
    return x, check_labels("cifar10", np.asarray(labels), 10)


@register_dataset("cifar10", shape=(3, 32, 32), num_classes=10, flip=True, crop_pad=4,
                  default_root=CIFAR_ROOT, how_to_get=CIFAR_HOW)
def cifar10(root: Path | None) -> RawData:
    """CIFAR-10: 50k/10k 32x32 colour images, 10 classes (python pickle batches)."""
    root = require_path("cifar10", Path(root or CIFAR_ROOT), CIFAR_HOW)
    names = [f"data_batch_{i}" for i in range(1, 6)]
    train = [read_batch(require_path("cifar10", root / n, CIFAR_HOW)) for n in names]
    x_te, y_te = read_batch(require_path("cifar10", root / "test_batch", CIFAR_HOW))
    x_tr = np.concatenate([x for x, _ in train])
    y_tr = np.concatenate([y for _, y in train])
    return RawData(x_tr, y_tr, x_te, y_te, num_classes=10, source=str(root), classes=CIFAR_CLASSES)
