"""Fashion-MNIST from IDX files (the format of MNIST and its relatives), parsed with numpy."""

from __future__ import annotations

import gzip
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

FASHION_ROOT = "/usr/share/datasets/fashion-mnist"
FASHION_HOW = (f"install the Debian package: apt-get install dataset-fashion-mnist (files land in "
               f"{FASHION_ROOT}), or name a DIR holding "
               "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] with " + ROOT_HOW)
FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")

# IDX type codes (third byte of the magic number) -> numpy dtypes, big-endian.
_IDX_TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (gzipped or not) as a numpy array of the shape its header declares."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_TYPES:
        raise ConfigError.one(f"IDX file {path}",
                              "must start with the IDX magic 00 00 <type> <ndim>",
                              raw[:4].hex(), "re-download or reinstall the data files")
    ndim = raw[3]
    dims = np.frombuffer(raw, dtype=">u4", count=ndim, offset=4).astype(int)
    dtype = np.dtype(_IDX_TYPES[raw[2]])
    count = int(np.prod(dims))
    offset = 4 + 4 * ndim
    if len(raw) - offset != count * dtype.itemsize:
        raise ConfigError.one(f"IDX file {path}", f"header declares shape {tuple(dims)}",
                              f"{len(raw) - offset} data bytes",
                              "the file is truncated; get it again")
    return np.frombuffer(raw, dtype=dtype, count=count, offset=offset).reshape(dims)


def _find(root: Path, stem: str) -> Path:
    for name in (f"{stem}.gz", stem):
        if (root / name).exists():
            return root / name
    return require_path("fashion_mnist", root / f"{stem}.gz", FASHION_HOW)


@register_dataset("fashion_mnist", shape=(1, 28, 28), num_classes=10, flip=True, crop_pad=2,
                  default_root=FASHION_ROOT, how_to_get=FASHION_HOW)
def fashion_mnist(root: Path | None) -> RawData:
    """Fashion-MNIST: 60k/10k 28x28 grey clothing images, 10 classes (Zalando, IDX files)."""
    root = require_path("fashion_mnist", Path(root or FASHION_ROOT), FASHION_HOW)
    arrays = {}
    for split, prefix in (("train", "train"), ("test", "t10k")):
        x = read_idx(_find(root, f"{prefix}-images-idx3-ubyte"))
        y = read_idx(_find(root, f"{prefix}-labels-idx1-ubyte"))
        if x.ndim != 3 or len(x) != len(y):
            raise ConfigError.one(f"fashion_mnist {split} files in {root}",
                                  "images must be (N, 28, 28) with one label each",
                                  (x.shape, y.shape), "use the original IDX files")
        arrays[split] = (x[:, None], check_labels("fashion_mnist", y, 10))
    (x_tr, y_tr), (x_te, y_te) = arrays["train"], arrays["test"]
    return RawData(x_tr, y_tr, x_te, y_te, num_classes=10, source=str(root),
                   classes=FASHION_CLASSES)
