"""Data-set readers, one module per format; importing this package registers them all.

A reader returns raw train/test arrays (``RawData``); ``load_data`` draws the seeded
validation split and normalizes. Add a data set with ``@register_dataset(name, shape=...)``.
"""

from hwnas.train.datasets.base import (
    DATASETS,
    Dataset,
    RawData,
    get_dataset,
    list_datasets,
    register_dataset,
)

# Importing the modules registers the data sets.
from hwnas.train.datasets import cifar, digits, idx, imagefolder, synthetic  # noqa: E402,F401,E501  isort: skip

__all__ = ["DATASETS", "Dataset", "RawData", "get_dataset", "list_datasets", "register_dataset"]
