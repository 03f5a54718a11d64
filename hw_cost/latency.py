"""Measured latency: warm-up, then timed windows until the median is stable or time runs out.

A latency figure is only a figure together with its device, batch size, dtype, threads and spread,
so ``LatencyResult`` carries all of them and the device fingerprint.
"""

from __future__ import annotations

import copy
import gc
import math
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn

from hw_cost.backends import LatencyBackend, fingerprint_hash, get_backend
from hw_cost.forms import apply_form
from hw_cost.options import validate
from hw_cost.spec import MeasureSpec, StopRule
from hwnas.common.settings import settle


@dataclass(frozen=True)
class LatencyResult:
    """Per-call latency statistics of one model on one device (milliseconds)."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    mean_ms: float
    cv: float  # std / mean of the timed calls
    repeats: int
    stable: bool  # True when the adaptive stop rule fired before the time cap
    seconds: float  # wall time spent measuring, warm-up and compilation included
    device: str
    batch_size: int
    dtype: str
    threads: int
    clock: str
    channels_last: bool
    compile: bool | str
    fingerprint: dict = field(default_factory=dict)
    min_seconds: float = 0.0  # the shortest timing the stop rule allowed (see StopRule)
    form: str = "eager"  # the deployed form timed (hw_cost.forms)
    tf32: bool | None = None  # TF32 matmuls/convolutions on CUDA (None: CPU, no such setting)
    peak_memory_bytes: int | None = None  # device memory peak while timing (CUDA; None on CPU)
    gpu: dict = field(default_factory=dict)  # GPU name, clocks, driver at measurement (CUDA)

    @property
    def fingerprint_hash(self) -> str:
        return fingerprint_hash(self.fingerprint)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "fingerprint_hash": self.fingerprint_hash}


@dataclass(frozen=True)
class Prepared:
    """What a timed call runs: ``module`` (the deployed form of a copy of the model) on ``x``."""

    module: nn.Module
    x: torch.Tensor

    def __call__(self) -> object:
        return self.module(self.x)


def prepare(model: nn.Module, input_shape: Sequence[int], *, device: str, batch_size: int,
            dtype: torch.dtype, channels_last: bool, compile: bool | str, form: str = "eager",
            ) -> Prepared:
    """A copy of ``model`` placed, converted and put in its deployed ``form``
    (``hw_cost.forms``), and a zero-argument call on a fixed input.

    The copy leaves the caller's model untouched (device, dtype, memory format, compile wrapper).
    """
    model = copy.deepcopy(model).eval().to(device=device, dtype=dtype)
    x = torch.randn(batch_size, *input_shape, device=device, dtype=dtype)
    if channels_last and x.dim() == 4:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if compile and form == "eager":
        # A string names the torch.compile backend ("inductor", "eager", ...); True: default.
        model = torch.compile(model, **({"backend": compile} if isinstance(compile, str) else {}))
    return Prepared(apply_form(model, x, form), x)


@contextmanager
def _quiet_gc():
    # A collection during a timed call shows up as an outlier; timeit disables gc for this too.
    # No gc.collect() first: with torch and timm loaded a full collection takes ~0.2 s.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def median_ci(samples: list[float], z: float = 1.96) -> tuple[float, float, float]:
    """(low, median, high): the order statistics n/2 -+ z*sqrt(n)/2 bound the median at the
    confidence ``z`` gives, whatever the distribution (a sign test; no normality assumed)."""
    s = np.sort(np.asarray(samples))
    n = len(s)
    half = z * math.sqrt(n) / 2
    lo, hi = max(0, math.floor(n / 2 - half)), min(n - 1, math.ceil(n / 2 + half) - 1)
    return float(s[lo]), float(np.median(s)), float(s[hi])


def _is_stable(samples: list[float], rule: StopRule) -> bool:
    lo, med, hi = median_ci(samples)
    return (hi - lo) / 2 <= rule.rel_tol * med


def time_adaptive(fn: Callable[[], object], backend: LatencyBackend, device: str,
                  rule: StopRule, clock: str = "wall",
                  between: Callable[[], object] | None = None) -> tuple[list[float], bool]:
    """Warm up, then time windows of calls until the stop rule fires; returns (samples, stable)."""
    start = time.perf_counter()
    calls = 0
    while calls < rule.warmup_calls or time.perf_counter() - start < rule.warmup_seconds:
        fn()
        calls += 1
    backend.synchronize(device)
    samples: list[float] = []
    timed_start = time.perf_counter()
    while True:
        samples += backend.time_ms(fn, rule.window, clock, between)
        elapsed = time.perf_counter() - timed_start
        if (len(samples) >= rule.min_repeats and elapsed >= rule.min_seconds
                and _is_stable(samples, rule)):
            return samples, True
        if elapsed >= rule.max_seconds or len(samples) >= rule.max_repeats:
            return samples, False


def measure_latency(model: nn.Module, input_shape: Sequence[int] = (3, 32, 32),
                    spec: MeasureSpec | None = None, **legacy: object) -> LatencyResult:
    """Median latency of ``model`` on a random input of shape (batch_size, *input_shape), timed
    as ``spec`` says (``hw_cost.spec.MeasureSpec``; default: CPU, batch 1, fp32, eager).

    ``spec.threads`` pins torch's intra-op thread count for the measurement (None keeps the
    current count; either way the count used is recorded). Runs under ``inference_mode``;
    ``compile`` wraps the model in ``torch.compile`` (True, or a backend name such as
    "inductor"); compilation happens during warm-up and is not timed. ``clock="thread"`` times
    CPU time of the calling thread (CPU, ``threads=1``): robust to other processes sharing the
    machine. ``min_seconds`` times at least that long (see ``StopRule``); ``rule`` replaces both
    caps. ``scrub_bytes`` > 0 writes a buffer that large before every timed call (untimed), so
    each call starts with its weights evicted from cache, as inside a larger model. ``form``
    times the model as deployed (``hw_cost.forms``: eager, compile, int8, fp16, bf16); building
    it (quantization, compilation) happens before timing and is not timed. ``tf32`` sets TF32 for
    CUDA matmuls and cuDNN convolutions for the measurement (default off, so fp32 means fp32); a
    CUDA result records it, the GPU's name, clocks and driver, and the peak device memory of the
    timed model (weights, input and activations).
    ``legacy``: the spec's fields as keywords, the earlier form (deprecated, ``settle``).
    """
    spec = settle(MeasureSpec, spec, legacy, "measure_latency")
    target = validate(input_shape=input_shape, **spec.target())
    rule = spec.stop_rule()
    backend = get_backend(target.device)
    began = time.perf_counter()
    with (backend.session(target.device, spec.threads) as used_threads, torch.inference_mode(),
          backend.precision(target.device, spec.tf32) as numerics):
        backend.reset_peak_memory(target.device)
        fn = prepare(model, target.input_shape, device=target.place, batch_size=spec.batch_size,
                     dtype=target.torch_dtype, channels_last=spec.channels_last,
                     compile=spec.compile, form=spec.form)
        between = None
        if spec.scrub_bytes > 0:
            scrub = torch.zeros(spec.scrub_bytes // 4, device=target.place)
            between = lambda: scrub.add_(1.0)  # noqa: E731
        with _quiet_gc():
            samples, stable = time_adaptive(fn, backend, target.device, rule, spec.clock,
                                            between)
        peak = backend.peak_memory_bytes(target.device)
        fingerprint = backend.fingerprint(target.device, used_threads)
    arr = np.asarray(samples)
    return LatencyResult(
        median_ms=float(np.median(arr)), p10_ms=float(np.percentile(arr, 10)),
        p90_ms=float(np.percentile(arr, 90)), mean_ms=float(arr.mean()),
        cv=float(arr.std() / arr.mean()), repeats=len(samples), stable=stable,
        seconds=time.perf_counter() - began, device=target.device, batch_size=spec.batch_size,
        dtype=target.dtype, threads=used_threads, clock=spec.clock,
        channels_last=spec.channels_last, compile=spec.compile, fingerprint=fingerprint,
        min_seconds=rule.min_seconds, form=spec.form, tf32=numerics["tf32"],
        peak_memory_bytes=peak, gpu=numerics.get("gpu", {}))
