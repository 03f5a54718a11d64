"""scikit-learn's handwritten digits: ships with the package, so it needs no files at all."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from hwnas.common.errors import ConfigError
from hwnas.train.datasets.base import RawData, register_dataset

# The test split is fixed (not drawn from the run's seed) so accuracies of different runs and
# seeds are measured on the same images; the run's seed draws the validation split.
_TEST_SEED = 0


@register_dataset("digits", shape=(1, 8, 8), num_classes=10, flip=False, crop_pad=1,
                  how_to_get="install scikit-learn (it ships the data)", uses_root=False)
def digits(root: Path | None, *, test_fraction: float = 0.2) -> RawData:
    """Handwritten digits: 1,797 8x8 grey images, 10 classes (scikit-learn load_digits)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_fraction < 1.0:
        raise ConfigError.one("data set digits", "test_fraction must lie in (0, 1)", test_fraction,
                              "pass e.g. test_fraction=0.2")
    bunch = load_digits()
    # Pixel values are 0..16; scale to 0..1 like the uint8 data sets.
    x = (bunch.images.astype(np.float32) / 16.0)[:, None]
    y = bunch.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, stratify=y,
                                              random_state=_TEST_SEED)
    return RawData(x_tr, y_tr, x_te, y_te, num_classes=10, source="sklearn.datasets.load_digits",
                   classes=tuple(str(c) for c in range(10)))
