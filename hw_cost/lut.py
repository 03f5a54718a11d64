"""Per-block latency lookup table (the ProxylessNAS/OFA idea), rebuilt for any space and device.

A built model is decomposed generically into its blocks: the top-level modules, with plain
containers (``nn.Sequential``/``nn.ModuleList``) opened recursively. Forward hooks record each
block's input shape; the key of a block is its class, a hash of its ``repr`` (which carries every
layer's configuration) and that shape. Each distinct block is timed once, in isolation, and stored
in the cost cache. A model's prediction is the calibrated sum over its blocks, ``a * sum + b``,
with ``a, b`` fitted on a few whole-model measurements: the fit absorbs the glue between blocks
(functional ops, Python overhead, cache effects) that isolated timings do not see, and maps the
blocks' 10th-percentile timings onto the statistic predicted (median or p10).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from scipy.stats import theilslopes
from torch import nn

from hw_cost.backends import fingerprint_hash, get_backend
from hw_cost.cache import CostCache
from hw_cost.latency import measure_latency
from hw_cost.spec import MeasureSpec, StopRule

# Blocks are small: a short warm-up and a looser tolerance keep a LUT build to minutes.
BLOCK_RULE = StopRule(window=10, rel_tol=0.02, min_repeats=30, max_seconds=0.5,
                      warmup_seconds=0.05, warmup_calls=3)


@dataclass(frozen=True)
class BlockCall:
    name: str
    signature: str
    input_shape: tuple[int, ...]


def iter_blocks(model: nn.Module, prefix: str = "") -> Iterator[tuple[str, nn.Module]]:
    """Top-level blocks of ``model``: its children, plain containers opened recursively."""
    for name, child in model.named_children():
        full = f"{prefix}.{name}" if prefix else name
        if type(child) in (nn.Sequential, nn.ModuleList):
            yield from iter_blocks(child, full)
        else:
            yield full, child


def block_signature(module: nn.Module, input_shape: Sequence[int]) -> str:
    digest = hashlib.sha1(repr(module).encode()).hexdigest()[:12]
    return f"{type(module).__name__}:{digest}:{'x'.join(map(str, input_shape))}"


def record_blocks(model: nn.Module, input_shape: Sequence[int], batch_size: int = 1,
                  ) -> tuple[list[BlockCall], dict[str, nn.Module]]:
    """Run one forward and return the block calls in order, and the module of each signature."""
    calls: list[BlockCall] = []
    modules: dict[str, nn.Module] = {}

    def hook(name: str):
        def record(module: nn.Module, args: tuple) -> None:
            if len(args) != 1 or not isinstance(args[0], torch.Tensor):
                raise TypeError(f"block {name!r} takes {len(args)} inputs; the LUT times "
                                "single-tensor blocks only")
            shape = tuple(args[0].shape)
            sig = block_signature(module, shape)
            calls.append(BlockCall(name, sig, shape))
            modules.setdefault(sig, module)

        return record

    model = copy.deepcopy(model).eval()  # hooks and eval() must not touch the caller's model
    handles = [m.register_forward_pre_hook(hook(n)) for n, m in iter_blocks(model)]
    try:
        with torch.inference_mode():
            model(torch.randn(batch_size, *input_shape))
    finally:
        for h in handles:
            h.remove()
    return calls, modules


@dataclass
class Calibration:
    a: float = 1.0
    b: float = 0.0
    archs: tuple[str, ...] = ()


class LatencyLUT:
    """Block timings for one device setting, kept in the cost cache under kind ``lut_block``."""

    def __init__(self, cache: CostCache, fingerprint: dict, *, device: str = "cpu",
                 dtype: str = "fp32", threads: int | None = None, rule: StopRule = BLOCK_RULE,
                 clock: str = "wall"):
        self.cache, self.fingerprint = cache, fingerprint
        self.device, self.dtype, self.threads, self.rule = device, dtype, threads, rule
        self.clock = clock
        self.scrub_bytes = get_backend(device).scrub_bytes()
        self.prefix = f"{fingerprint_hash(fingerprint)}:{dtype}:{clock}"
        self.measured = 0  # blocks timed by this object (the rest came from the cache)

    def block_ms(self, signature: str, module: nn.Module, input_shape: Sequence[int]) -> float:
        """The block's 10th-percentile latency: a block is timed once and reused by every arch
        that contains it, so one measurement stretched by another process would bias them all;
        the fastest tenth of the calls is what a busy machine stretches least."""
        key = f"{self.prefix}:{signature}"
        hit = self.cache.get_entry("lut_block", key)
        if hit is not None and "p10_ms" in hit:
            return float(hit["p10_ms"])
        # Inside a model, the blocks run before this one have evicted its weights from L2; timed
        # alone and repeated, a block would find them hot and look up to ~25% faster.
        spec = MeasureSpec(device=self.device, batch_size=input_shape[0], dtype=self.dtype,
                           threads=self.threads, rule=self.rule, clock=self.clock,
                           scrub_bytes=self.scrub_bytes)
        result = measure_latency(module, input_shape[1:], spec)
        self.cache.put_entry("lut_block", key, {"p10_ms": result.p10_ms, "ms": result.median_ms,
                                                "cv": result.cv, "repeats": result.repeats})
        self.measured += 1
        return result.p10_ms

    def block_sum(self, model: nn.Module, input_shape: Sequence[int], batch_size: int = 1) -> float:
        """Sum of the isolated block latencies of one forward (times any missing block)."""
        calls, modules = record_blocks(model, input_shape, batch_size)
        return sum(self.block_ms(c.signature, modules[c.signature], c.input_shape) for c in calls)

    @staticmethod
    def fit(sums: Sequence[float], measured: Sequence[float], archs: Sequence[str] = ()
            ) -> Calibration:
        """``measured ~ a * sum + b`` by Theil-Sen (median of pairwise slopes): a few whole-model
        measurements stretched by other processes must not tilt the line, as they would in
        least squares."""
        x, y = np.asarray(sums, float), np.asarray(measured, float)
        if len(x) < 2 or np.ptp(x) == 0:
            return Calibration(float(np.median(y / x)) if len(x) else 1.0, 0.0, tuple(archs))
        a, b, _, _ = theilslopes(y, x)
        return Calibration(float(a), float(b), tuple(archs))

    def save_calibration(self, key: str, cal: Calibration, target: str = "latency_ms") -> None:
        self.cache.put_entry("lut", f"{self.prefix}:{key}:{target}", asdict(cal))

    def load_calibration(self, key: str, target: str = "latency_ms") -> Calibration | None:
        """The fit for one measured statistic (``latency_ms`` = median, ``latency_p10_ms``)."""
        hit = self.cache.get_entry("lut", f"{self.prefix}:{key}:{target}")
        return None if hit is None else Calibration(hit["a"], hit["b"], tuple(hit["archs"]))
