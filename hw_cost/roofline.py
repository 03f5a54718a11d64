"""Roofline placement: the device's ceilings, measured once, and where a model sits under them.

Ceilings, in the measurement dtype and thread count, cached under the device fingerprint:

* compute: the best FLOP/s of square matmuls of several sizes, each warmed up, then timed for a
  while, best of its repeats. A short, cold matmul "peak" is no bound: a model once attained
  1.3x such a peak on this kind of VM.
* bandwidth, one per memory level: a copy whose source and destination fill half of the L2, of
  the last-level cache, and a copy far larger than any cache (DRAM), each best of repeats. Small
  models at batch 1 live in cache, so a DRAM roof alone does not bound them. On a GPU the levels
  are its L2 (size from the device properties) and HBM (reported as DRAM).
* precision: on CUDA, fp32 ceilings are measured with TF32 off unless ``tf32=True`` (cuBLAS
  would otherwise use tensor cores and report a peak fp32 models never reach with TF32 off).

Per model: arithmetic intensity = FLOPs / bytes moved, where the bytes are estimated as weights
read once plus every leaf-module activation written once and read once; attained FLOP/s = FLOPs /
measured latency. The memory level is the smallest cache that holds the model's working set
(weights + peak activations + input); the roof is min(compute, intensity x that level's
bandwidth), and ``ceiling`` names the one that binds.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from hw_cost.backends import BACKENDS, fingerprint_hash, get_backend
from hw_cost.options import validate
from hwnas.common.errors import ConfigError

# The matmul sizes tried for the compute peak and the DRAM copy are the backend's
# (``matmul_n``, ``copy_bytes``); so are the cache levels with a roof of their own.
_WARMUP_S = 0.2  # per kernel: clocks up, pages touched, kernels chosen
_TIMED_S = 0.3  # per kernel: timed calls after warm-up (best of them is kept)
VERSION = 2  # cached ceilings of an older definition are measured again


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one device configuration (FLOP/s, bytes/s) and how they were measured.

    ``peak_bytes_per_s`` is DRAM's; ``cache_bytes_per_s`` the caches' (``{"L2": .., "LLC": ..}``)
    and ``cache_bytes`` their sizes.
    """

    peak_flops: float
    peak_bytes_per_s: float
    matmul_n: int
    copy_bytes: int
    repeats: int
    dtype: str
    fingerprint: dict
    clock: str = "wall"
    cache_bytes_per_s: dict = field(default_factory=dict)
    cache_bytes: dict = field(default_factory=dict)
    tf32: bool | None = None  # TF32 during the matmuls (CUDA); None on CPU

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where compute and the DRAM roof meet."""
        return self.peak_flops / self.peak_bytes_per_s

    def bandwidths(self) -> dict[str, float]:
        """Every bandwidth ceiling by memory level, innermost first, DRAM last."""
        return {**self.cache_bytes_per_s, "DRAM": self.peak_bytes_per_s}

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ridge": self.ridge}


def best_ms(fn, backend, device: str, clock: str, *, warmup_s: float = _WARMUP_S,
            timed_s: float = _TIMED_S, min_repeats: int = 5) -> tuple[float, int]:
    """Warm ``fn`` up for ``warmup_s``, time it for ``timed_s`` (at least ``min_repeats`` calls);
    the fastest call and the number timed. A peak is what the device can do, so the best call,
    not the median, is its estimate: every slower call lost time to something else."""
    start = time.perf_counter()
    while time.perf_counter() - start < warmup_s:
        fn()
    backend.synchronize(device)
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < min_repeats or time.perf_counter() - start < timed_s:
        samples += backend.time_ms(fn, min_repeats, clock)
    return float(np.min(samples)), len(samples)


def _copy_rate(nbytes: int, target, backend, clock: str, **timing) -> float:
    """Bytes/s of copying ``nbytes`` (each byte read once, written once; ``nbytes`` in total)."""
    size = torch.empty((), dtype=target.torch_dtype).element_size()
    numel = max(1, nbytes // (2 * size))
    src = torch.randn(numel, device=target.place, dtype=target.torch_dtype)
    dst = torch.empty_like(src)
    # Copies that fit in a cache take microseconds: time a batch of them per call, so the
    # clock's own cost and the loop stay negligible.
    inner = max(1, (8 * 2**20) // nbytes)

    def run() -> None:
        for _ in range(inner):
            dst.copy_(src)
    ms, _ = best_ms(run, backend, target.device, clock, **timing)
    return 2 * numel * size * inner / (ms / 1e3)


def measure_ceilings(*, device: str = "cpu", dtype: str = "fp32", threads: int | None = None,
                     repeats: int = 5, clock: str = "wall", warmup_s: float | None = None,
                     timed_s: float | None = None, tf32: bool = False,
                     matmul_n: tuple[int, ...] | None = None,
                     copy_bytes: int | None = None) -> Ceilings:
    """Time square matmuls and copies at each memory level; the best calls give the roofs.
    ``warmup_s`` and ``timed_s`` (per kernel) default to the module's ``_WARMUP_S``,
    ``_TIMED_S``; ``matmul_n`` and ``copy_bytes`` to the device's sizes (smaller ones are for
    dry runs). ``tf32`` is the CUDA TF32 setting during the measurement (off by default)."""
    target = validate(device=device, dtype=dtype, threads=threads, clock=clock)
    backend = get_backend(target.device)
    timing = {"warmup_s": _WARMUP_S if warmup_s is None else warmup_s,
              "timed_s": _TIMED_S if timed_s is None else timed_s, "min_repeats": repeats}
    if not (matmul_n or backend.matmul_n):
        raise ConfigError.one("device", "the roofline needs a backend with known ceilings "
                              "(matmul_n empty: peak FLOP/s and bandwidth unknown)", device,
                              "use the measured latency (hw_cost.cost_of), or give the backend "
                              "matmul_n and copy_bytes")
    levels = backend.cache_levels(target.device)
    copy_bytes = copy_bytes or backend.copy_bytes
    with (backend.session(target.device, threads) as used, torch.inference_mode(),
          backend.precision(target.device, tf32) as numerics):
        rates = {}
        for n in matmul_n or backend.matmul_n:
            a = torch.randn(n, n, device=target.place, dtype=target.torch_dtype)
            b = torch.randn(n, n, device=target.place, dtype=target.torch_dtype)
            ms, _ = best_ms(lambda a=a, b=b: torch.mm(a, b), backend, target.device, clock,
                            **timing)
            rates[n] = 2 * n**3 / (ms / 1e3)
        dram = _copy_rate(copy_bytes, target, backend, clock, **timing)
        cached = {k: _copy_rate(v // 2, target, backend, clock, **timing)
                  for k, v in levels.items()}
        fingerprint = backend.fingerprint(target.device, used)
    best_n = max(rates, key=rates.get)
    return Ceilings(peak_flops=rates[best_n], peak_bytes_per_s=dram, matmul_n=best_n,
                    copy_bytes=copy_bytes, repeats=repeats, dtype=target.dtype,
                    fingerprint=fingerprint, clock=clock,
                    # A cache never streams slower than the memory behind it.
                    cache_bytes_per_s={k: max(v, dram) for k, v in cached.items()},
                    cache_bytes=levels, tf32=numerics["tf32"])


def ceilings_key(fingerprint: dict, dtype: str, clock: str = "wall", tf32: bool = False) -> str:
    # TF32 only changes the figures of a backend it matters to; other keys stay as they were.
    name = str(fingerprint.get("backend"))
    matters = name in BACKENDS and BACKENDS.get(name).tf32_matters
    suffix = ":tf32" if tf32 and matters else ""
    return f"{fingerprint_hash(fingerprint)}:{dtype}:{clock}:v{VERSION}{suffix}"


def get_ceilings(*, device: str = "cpu", dtype: str = "fp32", threads: int | None = None,
                 cache=None, remeasure: bool = False, clock: str = "wall",
                 tf32: bool = False) -> Ceilings:
    """Cached ceilings for this device, dtype, thread count, clock and TF32 setting; measured on
    first use."""
    target = validate(device=device, dtype=dtype, threads=threads, clock=clock)
    backend = get_backend(target.device)
    with backend.session(target.device, threads) as used:
        key = ceilings_key(backend.fingerprint(target.device, used), dtype, clock, tf32)
    if cache is not None and not remeasure:
        hit = cache.get_entry("ceilings", key)
        if hit is not None:
            return Ceilings(**{k: v for k, v in hit.items() if k != "ridge"})
    ceilings = measure_ceilings(device=device, dtype=dtype, threads=threads, clock=clock,
                                tf32=tf32)
    if cache is not None:
        cache.put_entry("ceilings", key, ceilings.to_dict())
    return ceilings


def memory_level(static: dict, ceilings: Ceilings) -> str:
    """The smallest cache level that holds the model's working set; DRAM when none does."""
    working_set = (static["model_bytes"] + static["input_bytes"]
                   + static.get("peak_activation_bytes", 0))
    for level, size in sorted(ceilings.cache_bytes.items(), key=lambda kv: kv[1]):
        if working_set <= size and level in ceilings.cache_bytes_per_s:
            return level
    return "DRAM"


def roofline_point(static: dict, latency_ms: float, ceilings: Ceilings) -> dict[str, object]:
    """Place one model under the roofline from its static costs and measured latency."""
    bytes_moved = static["model_bytes"] + static["input_bytes"] + 2 * static["activation_bytes"]
    flops = static["flops"]
    intensity = flops / bytes_moved
    level = memory_level(static, ceilings)
    bandwidth = ceilings.bandwidths()[level]
    memory_roof = intensity * bandwidth
    roof = min(ceilings.peak_flops, memory_roof)
    attained = flops / (latency_ms / 1e3)
    compute = ceilings.peak_flops <= memory_roof
    return {
        "arithmetic_intensity": intensity,
        "bytes_moved": bytes_moved,
        "attained_flops": attained,
        "roof_flops": roof,
        "roof_fraction": attained / roof,
        "peak_flops": ceilings.peak_flops,
        "peak_bytes_per_s": ceilings.peak_bytes_per_s,
        "memory_level": level,
        "level_bytes_per_s": bandwidth,
        "ridge": ceilings.peak_flops / bandwidth,
        "bound": "compute" if compute else "memory",
        "ceiling": "compute" if compute else f"{level} bandwidth",
    }
