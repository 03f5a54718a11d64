"""Roofline placement: the device's two ceilings, measured once, and where a model sits under them.

Ceilings: peak FLOP/s from a large square matmul and peak bytes/s from a large tensor copy, both
in the measurement dtype and thread count, cached in the cost cache under the device fingerprint.
Per model: arithmetic intensity = FLOPs / bytes moved, where the bytes are estimated as weights
read once plus every leaf-module activation written once and read once; attained FLOP/s = FLOPs /
measured latency; the model is memory-bound when its intensity is left of the ridge point.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from hw_cost.backends import fingerprint_hash, get_backend
from hw_cost.options import validate

# Sizes that dwarf the caches yet finish in well under a second per call.
_MATMUL_N = {"cpu": 1024, "cuda": 8192}
_COPY_BYTES = {"cpu": 256 * 2**20, "cuda": 1024 * 2**20}


@dataclass(frozen=True)
class Ceilings:
    """Measured peaks of one device configuration (FLOP/s, bytes/s) and how they were measured."""

    peak_flops: float
    peak_bytes_per_s: float
    matmul_n: int
    copy_bytes: int
    repeats: int
    dtype: str
    fingerprint: dict
    clock: str = "wall"

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the two roofs meet."""
        return self.peak_flops / self.peak_bytes_per_s

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "ridge": self.ridge}


def _median_ms(fn, backend, repeats: int, clock: str) -> float:
    fn()  # warm-up: first-touch page faults and kernel selection
    return float(np.median(backend.time_ms(fn, repeats, clock)))


def measure_ceilings(*, device: str = "cpu", dtype: str = "fp32", threads: int | None = None,
                     repeats: int = 7, clock: str = "wall") -> Ceilings:
    """Time a large matmul and a large copy; the medians give the two roofs."""
    target = validate(device=device, dtype=dtype, threads=threads, clock=clock)
    backend = get_backend(target.device)
    n = _MATMUL_N[target.backend]
    numel = _COPY_BYTES[target.backend] // torch.empty((), dtype=target.torch_dtype).element_size()
    with backend.session(target.device, threads) as used, torch.inference_mode():
        a = torch.randn(n, n, device=target.device, dtype=target.torch_dtype)
        b = torch.randn(n, n, device=target.device, dtype=target.torch_dtype)
        mm_ms = _median_ms(lambda: torch.mm(a, b), backend, repeats, clock)
        src = torch.randn(numel, device=target.device, dtype=target.torch_dtype)
        dst = torch.empty_like(src)
        copy_ms = _median_ms(lambda: dst.copy_(src), backend, repeats, clock)
        fingerprint = backend.fingerprint(target.device, used)
    copy_bytes = 2 * src.numel() * src.element_size()  # each byte is read once and written once
    return Ceilings(peak_flops=2 * n**3 / (mm_ms / 1e3),
                    peak_bytes_per_s=copy_bytes / (copy_ms / 1e3), matmul_n=n,
                    copy_bytes=copy_bytes, repeats=repeats, dtype=dtype, fingerprint=fingerprint,
                    clock=clock)


def ceilings_key(fingerprint: dict, dtype: str, clock: str = "wall") -> str:
    return f"{fingerprint_hash(fingerprint)}:{dtype}:{clock}"


def get_ceilings(*, device: str = "cpu", dtype: str = "fp32", threads: int | None = None,
                 cache=None, remeasure: bool = False, clock: str = "wall") -> Ceilings:
    """Cached ceilings for this device, dtype, thread count and clock; measured on first use."""
    target = validate(device=device, dtype=dtype, threads=threads, clock=clock)
    backend = get_backend(target.device)
    with backend.session(target.device, threads) as used:
        key = ceilings_key(backend.fingerprint(target.device, used), dtype, clock)
    if cache is not None and not remeasure:
        hit = cache.get_entry("ceilings", key)
        if hit is not None:
            return Ceilings(**{k: v for k, v in hit.items() if k != "ridge"})
    ceilings = measure_ceilings(device=device, dtype=dtype, threads=threads, clock=clock)
    if cache is not None:
        cache.put_entry("ceilings", key, ceilings.to_dict())
    return ceilings


def roofline_point(static: dict, latency_ms: float, ceilings: Ceilings) -> dict[str, object]:
    """Place one model under the roofline from its static costs and measured latency."""
    bytes_moved = static["model_bytes"] + static["input_bytes"] + 2 * static["activation_bytes"]
    flops = static["flops"]
    intensity = flops / bytes_moved
    roof = min(ceilings.peak_flops, intensity * ceilings.peak_bytes_per_s)
    attained = flops / (latency_ms / 1e3)
    return {
        "arithmetic_intensity": intensity,
        "bytes_moved": bytes_moved,
        "attained_flops": attained,
        "roof_flops": roof,
        "roof_fraction": attained / roof,
        "peak_flops": ceilings.peak_flops,
        "peak_bytes_per_s": ceilings.peak_bytes_per_s,
        "ridge": ceilings.ridge,
        "bound": "compute" if intensity >= ceilings.ridge else "memory",
    }
