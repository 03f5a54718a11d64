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
from dataclasses import replace
from typing import TYPE_CHECKING

import torch
from torch import nn

from hw_cost.analog_cost import analog_cost, figures_for, flat_analog
from hw_cost.backends import BACKENDS, fingerprint_hash, get_backend
from hw_cost.cache import CostCache, CostKey
from hw_cost.estimate_cache import estimate_fields, estimate_parts, split_estimate, stored_estimate
from hw_cost.latency import measure_latency
from hw_cost.options import Target, validate
from hw_cost.roofline import get_ceilings, roofline_point
from hw_cost.spec import ChipSpec, MeasureSpec
from hw_cost.static import static_costs
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance
from hwnas.common.settings import settle

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


def measure_model(model: nn.Module, input_shape: Sequence[int], spec: MeasureSpec | None = None,
                  *, chip: ChipSpec | None = None, cache: CostCache | None = None,
                  **legacy: object) -> dict[str, object]:
    """Latency, static costs, roofline placement and analog estimate of one built model (flat).

    ``spec``: how the latency is taken (``hw_cost.spec.MeasureSpec``). ``chip``: the analog
    hardware model, options and tile size the analog estimate describes (``ChipSpec``), so it
    describes what the accuracy model scores. An int8 model (``spec.form``) is not placed under
    the roofline (its fields are None): the ceilings are float matmuls and copies. ``spec.tf32``
    is the CUDA TF32 setting of the latency and the ceilings (off: fp32 is fp32). ``legacy``:
    the two specs' fields as keywords, the earlier form (deprecated)."""
    spec, chip = _settled(spec, chip, legacy, "measure_model")
    lat = measure_latency(model, input_shape, spec)
    static = static_costs(model, input_shape, batch_size=spec.batch_size, device=spec.device,
                          dtype=lat.dtype)
    if spec.form == "int8":
        roof: dict[str, object] = dict.fromkeys(ROOF_KEYS)
    else:
        ceilings = get_ceilings(device=spec.device, dtype=lat.dtype, threads=spec.threads,
                                cache=cache, clock=spec.clock, tf32=spec.tf32)
        roof = roofline_point(static, lat.median_ms, ceilings)
    analog = analog_cost(model, input_shape, **chip.estimate_kw(),
                         total_macs=static["macs"] // spec.batch_size)
    return {
        "latency_ms": lat.median_ms, "latency_p10_ms": lat.p10_ms, "latency_p90_ms": lat.p90_ms,
        "latency_cv": lat.cv, "latency_repeats": lat.repeats, "latency_stable": lat.stable,
        "latency_seconds": lat.seconds, "latency_min_seconds": lat.min_seconds,
        "peak_memory_bytes": lat.peak_memory_bytes, "tf32": lat.tf32, "gpu": lat.gpu,
        **{k: v for k, v in static.items() if k not in ("batch_size", "dtype")},
        **roof,
        # The headline analog figures flat (trial attributes), the whole estimate nested.
        **flat_analog(analog), "analog": analog,
        "device": spec.device, "batch_size": spec.batch_size, "dtype": lat.dtype,
        "threads": lat.threads, "clock": spec.clock, "form": spec.form,
        "input_shape": list(input_shape), "channels_last": spec.channels_last,
        "compile": spec.compile,
        "fingerprint": lat.fingerprint, "fingerprint_hash": lat.fingerprint_hash,
    }


def cost_of(space: str, arch: str, *, input_shape: Sequence[int], num_classes: int,
            spec: MeasureSpec | None = None, chip: ChipSpec | None = None,
            cache: CacheArg = None, refresh: bool = False, **legacy: object,
            ) -> dict[str, object]:
    """All costs of ``arch`` from ``space`` (see ``measure_model``), cached.

    A cache hit returns the stored dict with ``cached=True``; ``refresh`` re-measures, and so
    does a hit whose timing never met the stop rule (see ``_more_precise``). Keys
    include ``latency_ms``, ``macs``, ``params``, ``peak_activation_bytes``, ``bound``,
    ``analog_tiles``, ``analog_mac_fraction``, ``analog_energy_uj`` and ``provenance``.
    ``spec`` (``hw_cost.spec.MeasureSpec``): how the latency is taken; its device, batch, dtype,
    form, clock, layout, compilation and (on CUDA) TF32 are part of the cache key, and a hit
    that timed shorter than ``spec.min_seconds`` is timed again.
    ``chip`` (``ChipSpec``): the analog hardware model the analog estimate describes (tile
    size, ADC bits, read mode). It is not in the timing's key: one arch is timed once whatever
    model a study scores, and each model's estimate is cached beside it
    (``hw_cost.estimate_cache``); ``cached`` tells of the timing.
    ``legacy``: the two specs' fields as keywords, the earlier form (deprecated).
    """
    spec, chip = _settled(spec, chip, legacy, "cost_of")
    target, sp = _checked(space, arch, input_shape, spec, chip)
    store = resolve_cache(cache)
    fingerprint = device_fingerprint(target.device, spec.threads)
    key = CostKey(space, arch, fingerprint_hash(fingerprint), spec.batch_size, target.dtype,
                  target.input_shape, _timing_options(num_classes, spec, target.backend))
    build = functools.cache(functools.partial(
        sp.build, arch, in_chans=target.input_shape[0], num_classes=num_classes,
        img_size=target.input_shape[1]))
    hit = store.get(key) if store is not None and not refresh else None
    timing, cached, fresh = hit, True, None
    if hit is None or not _serves(hit, spec.shortest):
        timing, cached, fresh = _measure(
            build(), key, hit, store, fingerprint, features=sp.features(arch),
            spec=replace(spec, device=target.device), chip=chip)
    estimate = stored_estimate(
        store, estimate_parts(space, arch, target.input_shape, num_classes,
                              **chip.estimate_kw()),
        lambda: _estimate(build, target.input_shape, timing.get("macs"), spec.batch_size,
                          chip),
        fresh=fresh)
    return {**timing, **estimate_fields(estimate), "cached": cached}


def _settled(spec: MeasureSpec | None, chip: ChipSpec | None, legacy: dict[str, object],
             where: str) -> tuple[MeasureSpec, ChipSpec]:
    """The two specs a call runs with, the earlier keywords applied (``settle``): the analog
    chip's (``hw``, ``hw_options`` as ``options``, ``tile_size``) and the timing's."""
    chip_kw = {_CHIP_KEYWORDS[k]: legacy.pop(k) for k in list(legacy) if k in _CHIP_KEYWORDS}
    return (settle(MeasureSpec, spec, legacy, where), settle(ChipSpec, chip, chip_kw, where))


# The earlier keywords of the analog chip, by the ChipSpec field each became.
_CHIP_KEYWORDS = {"hw": "hw", "hw_options": "options", "tile_size": "tile_size"}


def _checked(space: str, arch: str, input_shape: Sequence[int], spec: MeasureSpec,
             chip: ChipSpec) -> tuple[Target, SearchSpace]:
    """The validated timing target and the space; every bad input fails before any timing."""
    from search_spaces import get_space

    target = validate(input_shape=input_shape, **spec.target())
    if len(target.input_shape) != 3 or target.input_shape[1] != target.input_shape[2]:
        raise ConfigError.one("input_shape", "a space builds square images: (C, S, S)",
                              input_shape, "pass e.g. --input-shape 1,28,28")
    sp = get_space(space)
    sp.validate(arch)
    if chip.hw is not None:
        figures_for(chip.hw, options=chip.options)
    return target, sp


def _timing_options(num_classes: int, spec: MeasureSpec, backend: str) -> dict[str, object]:
    """The options of the timing's cache key. The hardware model is not among them; the key
    keeps the ``tile_size: None`` every call without a hardware model or tile size had, so the
    rows those calls stored still serve. Rows stored under the earlier keys that held
    ``hw``/``hw_options`` or a tile size are not looked up: those archs are timed again."""
    options = {"num_classes": num_classes, "channels_last": spec.channels_last,
               "compile": spec.compile, "tile_size": None, "clock": spec.clock,
               "form": spec.form}
    if BACKENDS.get(backend).tf32_matters:
        options["tf32"] = spec.tf32
    return options


def _measure(model: nn.Module, key: CostKey, hit: dict | None, store: CostCache | None,
             fingerprint: dict[str, object], *, features: dict[str, object], spec: MeasureSpec,
             chip: ChipSpec) -> tuple[dict[str, object], bool, dict | None]:
    """Time ``model`` (a miss, or a hit that does not serve): (the timing kept, whether it is
    the cached one, the analog estimate computed on the way); stores a timing that replaces."""
    result = measure_model(model, key.input_shape, spec, chip=chip, cache=store)
    new, estimate = split_estimate(result)
    with get_backend(spec.device).session(spec.device, spec.threads):  # names the threads used
        prov = provenance(spec.device, options=key.options)
    new.update(space=key.space, arch=key.arch, features=features, provenance=prov)
    if hit is not None and not _more_precise(new, hit):
        return hit, True, estimate
    if store is not None:
        store.put(key, new)
        store.put_entry("fingerprint", key.fingerprint, fingerprint)
    return new, False, estimate


def _estimate(build: Callable[[], nn.Module], input_shape: Sequence[int], macs: object,
              batch_size: int, chip: ChipSpec) -> dict:
    """The analog estimate of the candidate for a timing served from the cache. Building it
    draws from the global RNG, which a cache hit must leave as it found it."""
    with torch.random.fork_rng(devices=[]):
        return analog_cost(build(), input_shape, **chip.estimate_kw(),
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
