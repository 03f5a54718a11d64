"""Small models, a fast stop rule and a private cost cache for the hw_cost tests."""

from __future__ import annotations

import pytest
import torch
from hw_cost_helpers import FAST, tiny_cnn
from torch import nn

from hw_cost.cache import CostCache
from hw_cost.latency import StopRule


@pytest.fixture
def cnn() -> nn.Module:
    torch.manual_seed(0)
    return tiny_cnn()


@pytest.fixture
def cache(tmp_path) -> CostCache:
    store = CostCache(tmp_path / "costs.db")
    yield store
    store.close()


@pytest.fixture
def fast_rule() -> StopRule:
    return FAST
