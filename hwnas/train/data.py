"""Data sets as ready tensors: seeded train/val/test splits, normalized with train statistics.

``load_data("fashion_mnist", seed=0)`` returns a ``DataSplits`` of float32 NCHW CPU tensors. The
readers live in ``hwnas.train.datasets`` (one registry entry each); decoded
arrays are cached per process, so loading the same data set again (another trial, another seed)
costs only the split.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from hwnas.common.errors import ConfigError, Problem
from hwnas.train.datasets import Dataset, RawData, get_dataset, list_datasets

__all__ = ["DataSplits", "dataset_info", "list_datasets", "load_data"]


@dataclass(frozen=True, eq=False)
class DataSplits:
    """Train/val/test tensors of one data set (float32 NCHW, normalized; int64 labels; CPU)."""

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    in_chans: int
    img_size: int
    mean: tuple[float, ...]
    std: tuple[float, ...]
    source: str = ""
    flip: bool = False
    """Whether a horizontal flip keeps the label (the loader's default augmentation uses it)."""
    crop_pad: int = 0
    """Random-translate range in pixels of the default augmentation."""
    classes: tuple[str, ...] = field(default=())

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return (self.in_chans, self.img_size, self.img_size)

    def sizes(self) -> dict[str, int]:
        return {"train": len(self.y_train), "val": len(self.y_val), "test": len(self.y_test)}


@functools.lru_cache(maxsize=8)
def _read(name: str, root: str | None, options: tuple[tuple[str, object], ...]) -> RawData:
    spec = get_dataset(name)
    raw = spec.reader(Path(root) if root else None, **dict(options))
    for arr in (raw.x_train, raw.y_train, raw.x_test, raw.y_test):
        arr.flags.writeable = False  # shared by every later load: nobody may change it
    return raw


def _check_args(spec: Dataset, root: str | Path | None, val_fraction: float,
                train_limit: int | None, test_limit: int | None,
                options: dict[str, object]) -> None:
    problems = spec.check_options(options)
    if root is not None and not spec.uses_root:
        problems.append(Problem(f"data set {spec.name}", "takes no root directory", str(root),
                                "drop --data-root: this data set needs no files"))
    if not 0.0 <= val_fraction < 1.0:
        problems.append(Problem("val_fraction", "must lie in [0, 1)", val_fraction,
                                "pass e.g. 0.1 (0 gives an empty validation split)"))
    for key, value in (("train_limit", train_limit), ("test_limit", test_limit)):
        if value is not None and not (isinstance(value, int) and value >= 2):
            problems.append(Problem(key, "must be None or an int >= 2", value,
                                    "pass a number of images, or None for all"))
    if problems:
        raise ConfigError(problems)


def _split(n: int, val_fraction: float, train_limit: int | None,
           seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (train, val) indices: ``val_fraction`` of all ``n`` images held out, then at most
    ``train_limit`` of the rest for training. The limit is a training budget: it never shrinks
    the validation split, whose size sets how finely candidates can be told apart.
    Indices are sorted so a split reads the arrays in order."""
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(round(val_fraction * n))
    val, train = perm[:n_val], perm[n_val:]
    if train_limit is not None:
        train = train[:train_limit]
    return np.sort(train), np.sort(val)


def _as_float(x: np.ndarray) -> torch.Tensor:
    """A float32 copy (never a view: the cached arrays are read-only and normalized in place)."""
    t = torch.from_numpy(np.array(x, dtype=np.float32))
    return t.div_(255.0) if x.dtype == np.uint8 else t


def _channel_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # float64 sums: float32 loses digits over tens of millions of pixels.
    flat = x.transpose(0, 1).reshape(x.shape[1], -1).double()
    mean = flat.mean(dim=1)
    std = flat.std(dim=1).clamp_min(1e-6)
    return mean.float(), std.float()


def load_data(name: str, *, root: str | Path | None = None, val_fraction: float = 0.1,
              seed: int = 0, train_limit: int | None = None, test_limit: int | None = None,
              **options: object) -> DataSplits:
    """Load a registered data set as normalized train/val/test tensors.

    ``seed`` draws the validation split (``val_fraction`` of the data set's train images) and
    the ``train_limit`` training subset from the rest; the test split is the data set's own and
    the same for every seed; ``test_limit`` keeps its first images.
    Normalization is per channel, from the train split only. ``options`` go to the reader
    (e.g. ``img_size`` for imagefolder, ``n_train`` for synthetic; see ``hwnas data info``).
    """
    spec = get_dataset(name)
    _check_args(spec, root, val_fraction, train_limit, test_limit, options)
    raw = _read(name, str(root) if root else None, tuple(sorted(options.items())))
    tr_idx, val_idx = _split(len(raw.y_train), val_fraction, train_limit, seed)
    x_train = _as_float(raw.x_train[tr_idx])
    mean, std = _channel_stats(x_train)

    def norm(x: torch.Tensor) -> torch.Tensor:
        return x.sub_(mean[:, None, None]).div_(std[:, None, None])

    x_test, y_test = raw.x_test[:test_limit], raw.y_test[:test_limit]
    return DataSplits(
        name=name,
        x_train=norm(x_train), y_train=torch.from_numpy(raw.y_train[tr_idx]),
        x_val=norm(_as_float(raw.x_train[val_idx])),
        y_val=torch.from_numpy(raw.y_train[val_idx]),
        x_test=norm(_as_float(x_test)), y_test=torch.from_numpy(np.array(y_test)),
        num_classes=raw.num_classes, in_chans=int(x_train.shape[1]),
        img_size=int(x_train.shape[-1]), mean=tuple(mean.tolist()), std=tuple(std.tolist()),
        source=raw.source, flip=spec.flip, crop_pad=spec.crop_pad, classes=raw.classes)


def dataset_info(name: str, **kwargs: object) -> dict[str, object]:
    """What ``hwnas data info`` prints: shapes, classes, split sizes, normalization, path."""
    spec = get_dataset(name)
    data = load_data(name, **kwargs)
    return {
        "name": name, "description": spec.description, "source": data.source,
        "input_shape": data.input_shape, "num_classes": data.num_classes,
        "classes": list(data.classes), "sizes": data.sizes(),
        "mean": [round(m, 4) for m in data.mean], "std": [round(s, 4) for s in data.std],
        "augment": {"flip": data.flip, "crop_pad": data.crop_pad},
        "options": spec.options(),
    }
