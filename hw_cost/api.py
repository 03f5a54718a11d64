"""``cost_of``: everything a search needs to know about one candidate's cost, measured once.

Builds the candidate from its space and arch string, measures latency, counts static costs,
places it under the device roofline, estimates its analog mapping cost, and stores the result in
the cost cache keyed by (space, arch, device fingerprint, batch, dtype, input shape, options).
The analog estimate is stored apart, per hardware model (``hw_cost.estimate_cache``): the
hardware model a study scores must not decide which timing it gets.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

from hw_cost.analog_cost import analog_cost, figures_for, flat_analog
from hw_cost.backends import BACKENDS, fingerprint_hash, get_backend
from hw_cost.cache import CostCache, CostKey
from hw_cost.estimate_cache import estimate_fields, estimate_parts, split_estimate, stored_estimate
from hw_cost.latency import StopRule, measure_latency
from hw_cost.options import Target, validate
from hw_cost.roofline import get_ceilings, roofline_point
from hw_cost.static import static_costs
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

if TYPE_CHECKING:
    from search_spaces.base import SearchSpace

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
    size, ADC bits, read mode); ``tile_size`` overrides its tile size. They are not in the
    timing's key: one arch is timed once whatever model a study scores, and each model's
    estimate is cached beside it (``hw_cost.estimate_cache``); ``cached`` tells of the timing.
    ``tf32``: CUDA's TF32 setting (in the key on CUDA only, so CPU entries keep theirs).
    """
    target, sp = _checked(space, arch, input_shape, device=device, batch_size=batch_size,
                          dtype=dtype, threads=threads, clock=clock, form=form, hw=hw,
                          hw_options=hw_options)
    store = resolve_cache(cache)
    fingerprint = device_fingerprint(target.device, threads)
    key = CostKey(space, arch, fingerprint_hash(fingerprint), batch_size, target.dtype,
                  target.input_shape, _timing_options(num_classes, channels_last, compile,
                                                      clock, form, target.backend, tf32))
    build = functools.cache(functools.partial(
        sp.build, arch, in_chans=target.input_shape[0], num_classes=num_classes,
        img_size=target.input_shape[1]))
    analog_kw = {"tile_size": tile_size, "hw": hw, "hw_options": hw_options}
    hit = store.get(key) if store is not None and not refresh else None
    timing, cached, fresh = hit, True, None
    if hit is None or not _serves(hit, rule.min_seconds if rule else min_seconds):
        timing, cached, fresh = _measure(
            build(), key, hit, store, fingerprint, analog_kw, features=sp.features(arch),
            device=target.device, batch_size=batch_size, dtype=dtype,
            channels_last=channels_last, compile=compile, threads=threads,
            max_seconds=max_seconds, min_seconds=min_seconds, rule=rule, clock=clock, form=form,
            tf32=tf32)
    estimate = stored_estimate(
        store, estimate_parts(space, arch, target.input_shape, num_classes, **analog_kw),
        lambda: _estimate(build, target.input_shape, timing.get("macs"), batch_size, analog_kw),
        fresh=fresh)
    return {**timing, **estimate_fields(estimate), "cached": cached}


def _checked(space: str, arch: str, input_shape: Sequence[int], *, hw: str | None,
             hw_options: dict[str, object] | None, **setting: object) -> tuple[Target, SearchSpace]:
    """The validated timing target and the space; every bad input fails before any timing."""
    from search_spaces import get_space

    target = validate(input_shape=input_shape, **setting)
    if len(target.input_shape) != 3 or target.input_shape[1] != target.input_shape[2]:
        raise ConfigError.one("input_shape", "a space builds square images: (C, S, S)",
                              input_shape, "pass e.g. --input-shape 1,28,28")
    sp = get_space(space)
    sp.validate(arch)
    if hw is not None:
        figures_for(hw, options=hw_options)
    return target, sp


def _timing_options(num_classes: int, channels_last: bool, compile: bool | str, clock: str,
                    form: str, backend: str, tf32: bool) -> dict[str, object]:
    """The options of the timing's cache key. The hardware model is not among them; the key
    keeps the ``tile_size: None`` every call without a hardware model or tile size had, so the
    rows those calls stored still serve. Rows stored under the earlier keys that held
    ``hw``/``hw_options`` or a tile size are not looked up: those archs are timed again."""
    options = {"num_classes": num_classes, "channels_last": channels_last, "compile": compile,
               "tile_size": None, "clock": clock, "form": form}
    if BACKENDS.get(backend).tf32_matters:
        options["tf32"] = tf32
    return options


def _measure(model: nn.Module, key: CostKey, hit: dict | None, store: CostCache | None,
             fingerprint: dict[str, object], analog_kw: dict[str, object], *,
             features: dict[str, object], **timing: object,
             ) -> tuple[dict[str, object], bool, dict | None]:
    """Time ``model`` (a miss, or a hit that does not serve): (the timing kept, whether it is
    the cached one, the analog estimate computed on the way); stores a timing that replaces."""
    result = measure_model(model, key.input_shape, cache=store, **timing, **analog_kw)
    new, estimate = split_estimate(result)
    device, threads = str(timing["device"]), timing["threads"]
    with get_backend(device).session(device, threads):  # names the threads used
        prov = provenance(device, options=key.options)
    new.update(space=key.space, arch=key.arch, features=features, provenance=prov)
    if hit is not None and not _more_precise(new, hit):
        return hit, True, estimate
    if store is not None:
        store.put(key, new)
        store.put_entry("fingerprint", key.fingerprint, fingerprint)
    return new, False, estimate


def _estimate(build: Callable[[], nn.Module], input_shape: Sequence[int], macs: object,
              batch_size: int, analog_kw: dict[str, object]) -> dict:
    """The analog estimate of the candidate for a timing served from the cache. Building it
    draws from the global RNG, which a cache hit must leave as it found it."""
    with torch.random.fork_rng(devices=[]):
        return analog_cost(build(), input_shape, **analog_kw,
                           total_macs=int(macs) // batch_size if macs else None)


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
