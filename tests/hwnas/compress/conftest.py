"""Small real data and one intra-op thread for the compress tests (tiny tensors: more threads
only add synchronisation, and other test processes share the cores)."""

from __future__ import annotations

import pytest

from hwnas.common.threads import torch_threads


@pytest.fixture(autouse=True)
def _one_thread():
    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def digits():
    from hwnas.train.data import load_data

    return load_data("digits", seed=0)
