"""``cost_of``: every space gets finite costs; results are cached by the full key."""

from __future__ import annotations

import json
import math
import random

import pytest
from hw_cost_helpers import FAST

from hw_cost.api import cost_of
from hw_cost.latency import StopRule
from hwnas.common.errors import ConfigError
from search_spaces import get_space, list_spaces

SHAPE = (1, 16, 16)


# The real roofline ceiling sizes take seconds; the placement logic is the same at any size.
pytestmark = pytest.mark.usefixtures("small_ceilings")


def _cost(space: str, arch: str, cache, **kw):
    return cost_of(space, arch, input_shape=kw.pop("input_shape", SHAPE), num_classes=10,
                   cache=cache, threads=1, rule=kw.pop("rule", FAST), **kw)


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


def test_an_unstable_cached_figure_is_measured_again_and_the_precise_one_kept(cache):
    # A figure stored from a noisy moment (stop rule never met) must not be served for ever.
    arch = get_space("resnet").random_arch(random.Random(3))
    first = _cost("resnet", arch, cache)
    _overwrite(cache, latency_ms=99.0, latency_stable=False, latency_cv=0.9)
    again = _cost("resnet", arch, cache)
    assert again["cached"] is False and again["latency_ms"] != 99.0
    assert cache.rows()[0]["value"]["latency_ms"] == again["latency_ms"]
    assert cache.stats()["costs"] == 1 and first["macs"] == again["macs"]
    # Kept when the re-measurement is noisier still (a stop rule nothing can meet).
    _overwrite(cache, latency_ms=99.0, latency_stable=False, latency_cv=0.0)
    kept = _cost("resnet", arch, cache, rule=NEVER_STABLE)
    assert kept["cached"] is True and kept["latency_ms"] == 99.0
    assert cache.rows()[0]["value"]["latency_ms"] == 99.0


def test_a_longer_timing_request_replaces_a_short_cached_figure(cache):
    arch = get_space("resnet").random_arch(random.Random(4))
    short = _cost("resnet", arch, cache)
    assert short["latency_min_seconds"] == 0.0
    # Stable whatever the host's load (any spread passes, time enough for 5 repeats): this test
    # is about the minimum timing length, not about stability, which a loaded host decides.
    long_rule = StopRule(window=5, rel_tol=10.0, min_repeats=5, max_seconds=5.0,
                         warmup_seconds=0.0, warmup_calls=1, min_seconds=0.1)
    longer = _cost("resnet", arch, cache, rule=long_rule)
    assert longer["cached"] is False and longer["latency_min_seconds"] == 0.1
    assert cache.rows()[0]["value"]["latency_min_seconds"] == 0.1 and cache.stats()["costs"] == 1
    # the longer figure now answers both the long and the short request
    assert _cost("resnet", arch, cache, rule=long_rule)["cached"] is True
    assert _cost("resnet", arch, cache)["latency_ms"] == longer["latency_ms"]


NEVER_STABLE = StopRule(window=5, rel_tol=0.0, min_repeats=5, max_seconds=0.1,
                        warmup_seconds=0.0, warmup_calls=1)


def _overwrite(cache, **changes) -> None:
    """Edit the one stored cost row in place, as if an earlier run had measured these figures."""
    (row,) = cache.rows()
    cache.conn.execute("UPDATE costs SET value = ?", (json.dumps({**row["value"], **changes}),))
    cache.conn.commit()


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
