"""Small models, a fast stop rule and a private cost cache for the hw_cost tests."""

from __future__ import annotations

import pytest
import torch
from hw_cost_helpers import FAST, tiny_cnn
from torch import nn

import hw_cost.backends as backends
import hw_cost.roofline as roofline
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


@pytest.fixture
def small_ceilings(monkeypatch):
    """Roofline ceilings measured at small sizes (the real ones take seconds); a module opts in
    with ``pytestmark = pytest.mark.usefixtures("small_ceilings")``."""
    monkeypatch.setattr(backends.CpuBackend, "matmul_n", (256,))
    monkeypatch.setattr(backends.CpuBackend, "copy_bytes", 16 * 2**20)
    monkeypatch.setattr(roofline, "_WARMUP_S", 0.01)
    monkeypatch.setattr(roofline, "_TIMED_S", 0.02)
