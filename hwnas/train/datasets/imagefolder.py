"""Any data set laid out as class folders of images: ``root/train/<class>/*`` and
``root/test/<class>/*`` (or ``root/val/<class>/*``), read with PIL and resized to one size."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hwnas.common.errors import ConfigError, Problem
from hwnas.train.datasets.base import ROOT_HOW, RawData, register_dataset, require_path

IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}
_WHERE = "data set imagefolder"
FOLDER_HOW = ("lay the images out as DIR/train/<class>/*.png and DIR/test/<class>/*.png (or "
              f"DIR/val/...) and name DIR with {ROOT_HOW}")


def _class_dirs(split_dir: Path) -> list[Path]:
    return sorted(p for p in split_dir.iterdir() if p.is_dir())


def _read_split(split_dir: Path, classes: list[str], img_size: int,
                mode: str) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image

    images, labels, bad = [], [], []
    for label, cls in enumerate(classes):
        folder = split_dir / cls
        files = sorted(f for f in folder.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES) \
            if folder.is_dir() else []
        for f in files:
            try:
                with Image.open(f) as im:
                    # A fixed square resize: every image the same shape, as a tensor batch needs.
                    im = im.convert(mode).resize((img_size, img_size), Image.Resampling.BILINEAR)
                    images.append(np.asarray(im, dtype=np.uint8))
            except (OSError, ValueError, Image.DecompressionBombError) as err:
                bad.append(Problem(_WHERE, "every file with an image suffix must be an image PIL "
                                   "can read", f"{f} ({type(err).__name__})",
                                   "replace or remove the file"))
                continue
            labels.append(label)
    if bad:
        raise ConfigError(bad)
    if not images:
        raise ConfigError.one("data set imagefolder", "needs at least one image per split",
                              str(split_dir), FOLDER_HOW)
    x = np.stack(images)
    x = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2)
    return np.ascontiguousarray(x), np.asarray(labels, dtype=np.int64)


def _check(root: Path | None, img_size: int, channels: int) -> None:
    problems = []
    if root is None:
        problems.append(Problem(_WHERE, "needs a root directory", None, FOLDER_HOW))
    if not (isinstance(img_size, int) and img_size >= 4):
        problems.append(Problem(_WHERE, "img_size must be an int >= 4", img_size,
                                "pass e.g. img_size=32"))
    if channels not in (1, 3):
        problems.append(Problem(_WHERE, "channels must be 1 (grey) or 3 (RGB)", channels,
                                "pass 1 or 3"))
    if problems:
        raise ConfigError(problems)


@register_dataset("imagefolder", shape=(3, 32, 32), num_classes=None, flip=True, crop_pad=4,
                  how_to_get=FOLDER_HOW)
def imagefolder(root: Path | None, *, img_size: int = 32, channels: int = 3) -> RawData:
    """Class folders of images (root/train, root/test or root/val), resized to img_size."""
    _check(root, img_size, channels)
    root = require_path("imagefolder", Path(root), FOLDER_HOW)
    train_dir = require_path("imagefolder", root / "train", FOLDER_HOW)
    test_dir = next((root / s for s in ("test", "val") if (root / s).is_dir()), None)
    if test_dir is None:
        require_path("imagefolder", root / "test", FOLDER_HOW)
    classes = [p.name for p in _class_dirs(train_dir)]
    extra = sorted({p.name for p in _class_dirs(test_dir)} - set(classes))
    if len(classes) < 2 or extra:
        raise ConfigError.one("data set imagefolder",
                              "train needs >= 2 class folders and test/val no class train lacks",
                              {"train": classes, "only in test": extra}, FOLDER_HOW)
    mode = "L" if channels == 1 else "RGB"
    x_tr, y_tr = _read_split(train_dir, classes, img_size, mode)
    x_te, y_te = _read_split(test_dir, classes, img_size, mode)
    return RawData(x_tr, y_tr, x_te, y_te, num_classes=len(classes), source=str(root),
                   classes=tuple(classes))
