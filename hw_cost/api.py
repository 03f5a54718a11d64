"""``cost_of``: everything a search needs to know about one candidate's cost, measured once.

Builds the candidate from its space and arch string, measures latency, counts static costs,
places it under the device roofline, estimates its analog mapping cost, and stores the result in
the cost cache keyed by (space, arch, device fingerprint, batch, dtype, input shape, options).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from torch import nn

from hw_cost.analog_cost import analog_cost, figures_for, flat_analog
from hw_cost.backends import fingerprint_hash, get_backend
from hw_cost.cache import CostCache, CostKey
from hw_cost.latency import StopRule, measure_latency
from hw_cost.options import validate
from hw_cost.roofline import get_ceilings, roofline_point
from hw_cost.static import static_costs
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

# The roofline fields of a cost dict (None where a model is not placed).
ROOF_KEYS = ("arithmetic_intensity", "bytes_moved", "attained_flops", "roof_flops",
             "roof_fraction", "peak_flops", "peak_bytes_per_s", "memory_level",
             "level_bytes_per_s", "ridge", "bound", "ceiling")
CacheArg = CostCache | str | os.PathLike | bool | None


def resolve_cache(cache: CacheArg) -> CostCache | None:
    """None: the default cache (``$HWNAS_CACHE`` or ``~/.cache/hwnas/costs.db``); False: none."""
    if cache is False:
        return None
    if cache is None or cache is True:
        return CostCache()
    return cache if isinstance(cache, CostCache) else CostCache(cache)


def device_fingerprint(device: str = "cpu", threads: int | None = None) -> dict[str, object]:
    """The fingerprint a measurement with these settings would record."""
    backend = get_backend(device)
    with backend.session(device, threads) as used:
        return backend.fingerprint(device, used)


def measure_model(model: nn.Module, input_shape: Sequence[int], *, device: str = "cpu",
                  batch_size: int = 1, dtype: str = "fp32", channels_last: bool = False,
                  compile: bool | str = False, threads: int | None = None,
                  max_seconds: float = 10.0, min_seconds: float = 0.0,
                  tile_size: int | None = None, cache: CostCache | None = None,
                  rule: StopRule | None = None, clock: str = "wall", form: str = "eager",
                  hw: str | None = None, hw_options: dict[str, object] | None = None,
                  tf32: bool = False) -> dict[str, object]:
    """Latency, static costs, roofline placement and analog estimate of one built model (flat).

    The analog estimate takes its tile size, ADC bits and read mode from hardware model ``hw``
    with ``hw_options`` (``hw_cost.analog_cost``), so it describes what the accuracy model scores.

    ``form`` is the deployed form timed (``hw_cost.forms``). An int8 model is not placed under
    the roofline (its fields are None): the ceilings are float matmuls and copies.
    ``tf32`` is the CUDA TF32 setting of the latency and the ceilings (off: fp32 is fp32)."""
    lat = measure_latency(model, input_shape, device=device, batch_size=batch_size, dtype=dtype,
                          channels_last=channels_last, compile=compile, threads=threads,
                          max_seconds=max_seconds, min_seconds=min_seconds, rule=rule,
                          clock=clock, form=form, tf32=tf32)
    static = static_costs(model, input_shape, batch_size=batch_size, device=device,
                          dtype=lat.dtype)
    if form == "int8":
        roof: dict[str, object] = dict.fromkeys(ROOF_KEYS)
    else:
        ceilings = get_ceilings(device=device, dtype=lat.dtype, threads=threads, cache=cache,
                                clock=clock, tf32=tf32)
        roof = roofline_point(static, lat.median_ms, ceilings)
    analog = analog_cost(model, input_shape, tile_size=tile_size, hw=hw, hw_options=hw_options,
                         total_macs=static["macs"] // batch_size)
    return {
        "latency_ms": lat.median_ms, "latency_p10_ms": lat.p10_ms, "latency_p90_ms": lat.p90_ms,
        "latency_cv": lat.cv, "latency_repeats": lat.repeats, "latency_stable": lat.stable,
        "latency_seconds": lat.seconds, "latency_min_seconds": lat.min_seconds,
        "peak_memory_bytes": lat.peak_memory_bytes, "tf32": lat.tf32, "gpu": lat.gpu,
        **{k: v for k, v in static.items() if k not in ("batch_size", "dtype")},
        **roof,
        # The headline analog figures flat (trial attributes), the whole estimate nested.
        **flat_analog(analog), "analog": analog,
        "device": device, "batch_size": batch_size, "dtype": lat.dtype, "threads": lat.threads,
        "clock": clock, "form": form,
        "input_shape": list(input_shape), "channels_last": channels_last, "compile": compile,
        "fingerprint": lat.fingerprint, "fingerprint_hash": lat.fingerprint_hash,
    }


def cost_of(space: str, arch: str, *, input_shape: Sequence[int], num_classes: int,
            device: str = "cpu", batch_size: int = 1, dtype: str = "fp32",
            channels_last: bool = False, compile: bool | str = False, threads: int | None = None,
            cache: CacheArg = None, refresh: bool = False, max_seconds: float = 10.0,
            min_seconds: float = 0.0, tile_size: int | None = None, rule: StopRule | None = None,
            clock: str = "wall", form: str = "eager", hw: str | None = None,
            hw_options: dict[str, object] | None = None, tf32: bool = False,
            ) -> dict[str, object]:
    """All costs of ``arch`` from ``space`` (see ``measure_model``), cached.

    A cache hit returns the stored dict with ``cached=True``; ``refresh`` re-measures, and so
    does a hit whose timing never met the stop rule (see ``_more_precise``). Keys
    include ``latency_ms``, ``macs``, ``params``, ``peak_activation_bytes``, ``bound``,
    ``analog_tiles``, ``analog_mac_fraction``, ``analog_energy_uj`` and ``provenance``.
    ``rule`` replaces the default timing stop rule (``max_seconds`` is its time cap,
    ``min_seconds`` its shortest timing, for a figure that averages a shared host's drift);
    ``clock="thread"`` times CPU time of the one timing thread (see ``options.CLOCKS``);
    ``form`` the deployed form timed (``hw_cost.forms``), part of the cache key.
    ``hw`` and ``hw_options``: the analog hardware model the analog estimate describes (tile
    size, ADC bits, read mode); ``tile_size`` overrides its tile size. Both are in the key.
    ``tf32``: CUDA's TF32 setting (in the key on CUDA only, so CPU entries keep theirs).
    """
    from search_spaces import get_space

    target = validate(device=device, batch_size=batch_size, dtype=dtype, input_shape=input_shape,
                      threads=threads, clock=clock, form=form)
    if len(target.input_shape) != 3 or target.input_shape[1] != target.input_shape[2]:
        raise ConfigError.one("input_shape", "a space builds square images: (C, S, S)",
                              input_shape, "pass e.g. --input-shape 1,28,28")
    sp = get_space(space)
    sp.validate(arch)
    if hw is not None:  # a bad name or option fails before any timing
        figures_for(hw, options=hw_options)
    store = resolve_cache(cache)
    fingerprint = device_fingerprint(target.device, threads)
    options = {"num_classes": num_classes, "channels_last": channels_last, "compile": compile,
               "tile_size": tile_size, "clock": clock, "form": form}
    if hw is not None:  # only when named, so estimates without one keep their cache entries
        options.update(hw=hw, hw_options=dict(hw_options or {}))
    if target.backend == "cuda":
        options["tf32"] = tf32
    key = CostKey(space, arch, fingerprint_hash(fingerprint), batch_size, target.dtype,
                  target.input_shape, options)
    hit = store.get(key) if store is not None and not refresh else None
    if hit is not None and _serves(hit, rule.min_seconds if rule else min_seconds):
        return {**hit, "cached": True}
    model = sp.build(arch, in_chans=target.input_shape[0], num_classes=num_classes,
                     img_size=target.input_shape[1])
    result = measure_model(model, target.input_shape, device=target.device,
                           batch_size=batch_size, dtype=dtype, channels_last=channels_last,
                           compile=compile, threads=threads, max_seconds=max_seconds,
                           min_seconds=min_seconds, tile_size=tile_size, cache=store, rule=rule,
                           clock=clock, form=form, hw=hw, hw_options=hw_options, tf32=tf32)
    with get_backend(target.device).session(target.device, threads):  # names the threads used
        prov = provenance(target.device, options=options)
    result.update(space=space, arch=arch, features=sp.features(arch), provenance=prov)
    if hit is not None and not _more_precise(result, hit):
        return {**hit, "cached": True}
    if store is not None:
        store.put(key, result)
        store.put_entry("fingerprint", key.fingerprint, fingerprint)
    return {**result, "cached": False}


def _serves(hit: dict[str, object], min_seconds: float) -> bool:
    """Whether a stored figure answers this request: its timing met the stop rule and ran at
    least as long as asked (a figure from a short search timing does not answer a request for a
    long, host-drift-averaged one; the longer one replaces it)."""
    return bool(hit.get("latency_stable", True)) and float(
        hit.get("latency_min_seconds", 0.0)) >= min_seconds


def _more_precise(new: dict[str, object], old: dict[str, object]) -> bool:
    """Whether a re-measurement should replace a stored figure that never became stable.

    A figure taken while other work shared the cores stops at the time cap with a wide spread;
    serving it from the cache for ever would make one noisy moment the study's truth. So an
    unstable hit is measured again, and the stable or lower-spread of the two is kept; a hit
    shorter than the asked ``min_seconds`` gives way to the longer figure.
    """
    if float(new["latency_min_seconds"]) > float(old.get("latency_min_seconds", 0.0)):
        return True
    return bool(new["latency_stable"]) or float(new["latency_cv"]) < float(old["latency_cv"])
