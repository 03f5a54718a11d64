"""Fixtures: small files in each reader's format, so every registered data set loads in tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from datagen import make_cifar_dir, make_image_folder

from hwnas.common.threads import torch_threads


@pytest.fixture(scope="session")
def data_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    make_cifar_dir(root / "cifar-10-batches-py")
    make_image_folder(root / "folder")
    return root


@pytest.fixture(scope="session")
def dataset_kwargs(data_files: Path):
    """``load_data`` arguments that make each registered data set load quickly in a test.

    A data set missing here loads with its defaults (so a new entry is tested for free when it
    needs no files).
    """
    known = {
        "fashion_mnist": {"train_limit": 5000, "test_limit": 500},
        "cifar10": {"root": data_files / "cifar-10-batches-py"},
        "imagefolder": {"root": data_files / "folder", "img_size": 8},
        "synthetic": {"n_train": 200, "n_test": 50, "img_size": 8},
    }
    return lambda name: dict(known.get(name, {}))


@pytest.fixture(autouse=True)
def _one_thread():
    """One torch thread: several test runs share two cores here, and with more threads than
    free cores OpenMP's spinning threads slow small models down by 10x or more."""
    with torch_threads(1):
        yield
