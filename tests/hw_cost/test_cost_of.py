"""``cost_of``: every space gets finite costs; results are cached by the full key."""

from __future__ import annotations

import math
import random

import pytest
from hw_cost_helpers import FAST

import hw_cost.roofline as roofline
from common.errors import ConfigError
from hw_cost.api import cost_of
from search_spaces import get_space, list_spaces

SHAPE = (1, 16, 16)


@pytest.fixture(autouse=True)
def small_ceilings(monkeypatch):
    # The real ceiling sizes take seconds; the placement logic is the same at any size.
    monkeypatch.setitem(roofline._MATMUL_N, "cpu", 256)
    monkeypatch.setitem(roofline._COPY_BYTES, "cpu", 16 * 2**20)


def _cost(space: str, arch: str, cache, **kw):
    return cost_of(space, arch, input_shape=kw.pop("input_shape", SHAPE), num_classes=10,
                   cache=cache, threads=1, rule=FAST, **kw)


@pytest.mark.parametrize("space", list_spaces())
def test_every_space_gets_finite_costs(space, cache):
    arch = get_space(space).random_arch(random.Random(0))
    r = _cost(space, arch, cache)
    numbers = ("latency_ms", "latency_p10_ms", "latency_p90_ms", "macs", "params", "model_bytes",
               "peak_activation_bytes", "arithmetic_intensity", "attained_flops", "analog_tiles",
               "analog_energy_uj", "analog_latency_us")
    assert all(math.isfinite(r[k]) and r[k] > 0 for k in numbers), {k: r[k] for k in numbers}
    assert 0 <= r["analog_mac_fraction"] <= 1 and r["bound"] in ("compute", "memory")
    assert r["arch"] == arch and r["cached"] is False and r["features"] == get_space(
        space).features(arch)
    assert r["provenance"]["versions"]["torch"] and r["analog"]["estimate"] is True


def test_second_call_is_a_cache_hit_and_refresh_remeasures(cache):
    arch = get_space("resnet").random_arch(random.Random(1))
    first = _cost("resnet", arch, cache)
    hit = _cost("resnet", arch, cache)
    assert hit["cached"] is True and hit["latency_ms"] == first["latency_ms"]
    assert hit["macs"] == first["macs"]
    assert _cost("resnet", arch, cache, refresh=True)["cached"] is False
    assert _cost("resnet", arch, cache, batch_size=2)["cached"] is False  # another key
    assert cache.stats()["costs"] == 2


def test_no_cache_writes_nothing(cache):
    arch = get_space("resnet").random_arch(random.Random(2))
    assert _cost("resnet", arch, False)["cached"] is False
    assert cache.stats()["costs"] == 0


@pytest.mark.parametrize("space, arch, kw, match", [
    ("resnet", "rn:nonsense", {}, "resnet arch"),
    ("nospace", "x", {}, "space: must be one of"),
    ("resnet", "rn:s16-d2r1c48", {"input_shape": (1, 16, 8)}, "a space builds square images"),
    ("resnet", "rn:s16-d2r1c48", {"batch_size": 0}, "batch_size: must be a positive integer"),
])
def test_bad_input(space, arch, kw, match, cache):
    with pytest.raises(ConfigError, match=match):
        _cost(space, arch, cache, **kw)
