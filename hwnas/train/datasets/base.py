"""The data-set registry: each entry reads raw arrays; ``train.data`` splits and normalizes them."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.registry import Registry


@dataclass(frozen=True)
class RawData:
    """Decoded arrays as a reader returns them, before any split or normalization.

    Images are NCHW, either ``uint8`` (0..255) or ``float32`` (already scaled); labels int64.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    source: str
    classes: tuple[str, ...] = ()


Reader = Callable[..., RawData]


@dataclass(frozen=True)
class Dataset:
    """One registered data set: its reader plus what is known before reading it.

    ``shape`` and ``num_classes`` are those of the default options (imagefolder learns its classes
    from the folders: ``num_classes`` is then None). ``flip`` says whether a horizontal flip keeps
    the label (on for clothes and photos, off for digits); ``crop_pad`` is the random-translate
    range of the default augmentation in pixels.
    """

    name: str
    reader: Reader
    shape: tuple[int, int, int]
    num_classes: int | None
    flip: bool
    crop_pad: int
    default_root: str | None
    how_to_get: str
    description: str
    uses_root: bool = True
    """False for data sets that need no files (a given root is then an error, not ignored)."""

    def options(self) -> dict[str, object]:
        """Keyword options the reader accepts, with their defaults."""
        params = inspect.signature(self.reader).parameters
        return {k: p.default for k, p in params.items() if p.kind is p.KEYWORD_ONLY}

    def check_options(self, options: dict[str, object]) -> list[Problem]:
        known = self.options()
        return [Problem(f"data set {self.name}", f"option must be one of {sorted(known)}", k,
                        "drop the option or use one the data set knows (`hwnas data info`)")
                for k in options if k not in known]


DATASETS: Registry[Dataset] = Registry("data set")


def register_dataset(name: str, *, shape: tuple[int, int, int], num_classes: int | None,
                     flip: bool, crop_pad: int, default_root: str | None = None,
                     how_to_get: str = "", uses_root: bool = True) -> Callable[[Reader], Reader]:
    """Decorator: ``@register_dataset("digits", shape=(1, 8, 8), ...)`` on a reader function.

    A reader is ``reader(root: Path | None, *, option=default, ...) -> RawData``.
    """

    def deco(reader: Reader) -> Reader:
        doc = (reader.__doc__ or "").strip().splitlines()
        DATASETS.register(name)(Dataset(
            name=name, reader=reader, shape=shape, num_classes=num_classes, flip=flip,
            crop_pad=crop_pad, default_root=default_root, how_to_get=how_to_get,
            description=doc[0] if doc else "", uses_root=uses_root))
        return reader

    return deco


def get_dataset(name: str) -> Dataset:
    if name not in DATASETS:
        raise ConfigError.one("data set", f"must be one of {DATASETS.list()}", name,
                              "use a registered data set (see `hwnas data list`)")
    return DATASETS.get(name)


def list_datasets(pattern: str = "*") -> list[str]:
    return DATASETS.list(pattern)


# How to name the data folder, in the words of each command that takes one: the data and train
# commands have a flag, a study (search, run) has the field data.root.
ROOT_HOW = ("`--data-root DIR` (hwnas data info, hwnas train) or `data: {root: DIR}` in the "
            "study (hwnas search/run: --set data.root=DIR)")


def require_path(dataset: str, path: Path, how_to_get: str) -> Path:
    """``path`` itself, or a ConfigError naming the path and how to get the data."""
    if not path.exists():
        raise ConfigError.one(f"data set {dataset}", "needs this path to exist", str(path),
                              how_to_get)
    return path


def check_labels(dataset: str, y: np.ndarray, num_classes: int) -> np.ndarray:
    """Labels as int64 within ``[0, num_classes)``; a corrupt file fails here, not in training."""
    y = np.asarray(y, dtype=np.int64)
    if y.size and (y.min() < 0 or y.max() >= num_classes):
        raise ConfigError.one(f"data set {dataset}", f"labels must lie in [0, {num_classes})",
                              (int(y.min()), int(y.max())), "check the files are not corrupt")
    return y
