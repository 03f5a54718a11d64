"""``cost_of`` times an arch once whatever analog hardware model a study scores.

The hardware model changes only the analog estimate (tiles, ADC bits, energy), computed from the
model's shapes; the timing is cached apart from it, so two studies scoring ``pcm`` and
``pcm_static`` judge one arch on one measured latency.
"""

from __future__ import annotations

import pytest
import torch

from hw_cost.analog_cost import TILE_SIZE
from hw_cost.api import cost_of, device_fingerprint
from hw_cost.backends import fingerprint_hash
from hw_cost.cache import CostKey
from hw_cost.latency import StopRule

SHAPE = (1, 16, 16)
# 3x3 convs of 48 and 96 input channels: 432- and 864-row matrices, so 256x256 tiles (pcm_static)
# need more of them than 512x512 ones (pcm).
ARCH = ("resnet", "rn:s16-d1r1c48-d1r1c96")
ANALOG_KEYS = ("analog_tiles", "analog_tile_size", "analog_weight_fraction",
               "analog_mac_fraction", "analog_energy_uj", "analog_latency_us",
               "digital_ref_energy_uj", "analog")
# Short, and stable whatever the host's load (any spread passes): a figure that missed its stop
# rule is re-measured on the next call, and these tests are about which key serves it.
STABLE = StopRule(window=5, rel_tol=10.0, min_repeats=5, max_seconds=5.0, warmup_seconds=0.0,
                  warmup_calls=1)


# The real roofline ceiling sizes take seconds; the placement logic is the same at any size.
pytestmark = pytest.mark.usefixtures("small_ceilings")


def _cost(cache, **kw):
    return cost_of(*ARCH, input_shape=SHAPE, num_classes=10, cache=cache, threads=1, rule=STABLE,
                   **kw)


def _analog(r: dict) -> dict:
    return {k: r[k] for k in ANALOG_KEYS}


def test_two_hardware_models_share_one_timing(cache):
    pcm = _cost(cache, hw="pcm")
    static = _cost(cache, hw="pcm_static")
    assert pcm["cached"] is False and static["cached"] is True
    assert static["latency_ms"] == pcm["latency_ms"]
    assert static["latency_p90_ms"] == pcm["latency_p90_ms"] and static["macs"] == pcm["macs"]
    assert (pcm["analog_tile_size"], static["analog_tile_size"]) == (512, 256)
    assert static["analog_tiles"] > pcm["analog_tiles"]
    assert static["analog_energy_uj"] != pcm["analog_energy_uj"]
    assert (pcm["analog"]["hw"], static["analog"]["hw"]) == ("pcm", "pcm_static")
    assert cache.stats()["costs"] == 1  # one timing row for both
    # and it holds no model's estimate: a reader of the rows must not take one model's energy
    # for another's
    assert not {"analog", "analog_tiles"} & set(cache.rows()[0]["value"])


def test_hardware_options_share_the_timing_too(cache):
    first = _cost(cache, hw="pcm")
    small = _cost(cache, hw="pcm", hw_options={"tile_size": 128})
    assert small["cached"] is True and small["latency_ms"] == first["latency_ms"]
    assert small["analog_tile_size"] == 128 and small["analog_tiles"] > first["analog_tiles"]
    assert small["analog"]["hw_options"] == {"tile_size": 128}


@pytest.mark.parametrize("hw", ["pcm", "pcm_static", None])
def test_analog_fields_equal_a_fresh_uncached_call(cache, hw):
    other = "pcm_static" if hw == "pcm" else "pcm"
    _cost(cache, hw=other)  # the timing is measured for another model first
    for _ in range(2):  # the first answer computes the estimate, the second reads it back
        served = _cost(cache, hw=hw)
        assert served["cached"] is True
        assert _analog(served) == _analog(_cost(False, hw=hw))


def test_a_call_without_hw_reuses_the_timing_of_one_with_hw(cache):
    pcm = _cost(cache, hw="pcm_static")
    plain = _cost(cache)
    assert plain["cached"] is True and plain["latency_ms"] == pcm["latency_ms"]
    assert plain["analog_tile_size"] == TILE_SIZE and plain["analog"]["hw"] is None
    # and the other way round: a study naming a model after one that named none
    assert _cost(cache, hw="pcm")["latency_ms"] == plain["latency_ms"]


def test_refresh_remeasures_and_each_model_keeps_its_estimate(cache):
    _cost(cache, hw="pcm")
    again = _cost(cache, hw="pcm_static", refresh=True)
    assert again["cached"] is False and again["analog_tile_size"] == 256
    served = _cost(cache, hw="pcm")
    assert served["cached"] is True and served["latency_ms"] == again["latency_ms"]
    assert served["analog_tile_size"] == 512 and cache.stats()["costs"] == 1


def test_a_row_stored_without_hw_before_still_serves(cache):
    # The timing key is the key a call without hw or tile size always had, so those rows serve;
    # their stored analog figures (the default estimate) give way to the asked model's.
    fp = fingerprint_hash(device_fingerprint("cpu", 1))
    options = {"num_classes": 10, "channels_last": False, "compile": False, "tile_size": None,
               "clock": "wall", "form": "eager"}
    fresh = _cost(False, hw="pcm_static")
    old = {**fresh, "latency_ms": 42.0, "analog_tiles": -1, "analog": {"tiles": -1}}
    old.pop("cached")
    cache.put(CostKey(*ARCH, fp, 1, "fp32", SHAPE, options), old)
    served = _cost(cache, hw="pcm_static")
    assert served["cached"] is True and served["latency_ms"] == 42.0
    assert _analog(served) == _analog(fresh)


def test_a_cache_hit_for_a_new_model_leaves_the_global_rng_alone(cache):
    # Trials seed their own streams, but a cost look-up should not move the caller's stream.
    _cost(cache, hw="pcm")
    torch.manual_seed(7)
    _cost(cache, hw="pcm_static")
    after = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(after, torch.rand(3))
