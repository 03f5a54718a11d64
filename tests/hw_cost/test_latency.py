"""Measured latency: every backend, dtypes, options, the adaptive stop rule, bad input."""

from __future__ import annotations

import itertools
import math
import random
import time

import pytest
import torch
from hw_cost_helpers import tiny_cnn

from hw_cost.backends import BACKENDS, fingerprint_hash
from hw_cost.latency import StopRule, measure_latency, median_ci, time_adaptive
from hwnas.common.errors import ConfigError

CUDA = torch.cuda.is_available()


def _usable(backend: str) -> bool:
    return backend == "cpu" or CUDA


@pytest.mark.parametrize("backend", BACKENDS.list())
def test_every_backend_measures_a_model(backend, cnn, fast_rule):
    if not _usable(backend):
        pytest.skip(f"{backend} is not available on this machine")
    r = measure_latency(cnn, (1, 16, 16), device=backend, rule=fast_rule, threads=1)
    assert r.repeats >= fast_rule.min_repeats
    assert 0 < r.p10_ms <= r.median_ms <= r.p90_ms and math.isfinite(r.cv)
    assert r.fingerprint["backend"] == backend and r.fingerprint["torch"] == torch.__version__
    assert r.device == backend and r.batch_size == 1 and r.dtype == "fp32"
    assert r.to_dict()["fingerprint_hash"] == fingerprint_hash(r.fingerprint)


@pytest.mark.parametrize("dtype", ["fp32", "bf16", "fp16"])
def test_dtypes_and_batch_on_cpu(dtype, cnn, fast_rule):
    r = measure_latency(cnn, (1, 16, 16), dtype=dtype, batch_size=3, rule=fast_rule)
    assert r.dtype == dtype and r.batch_size == 3 and r.median_ms > 0


def test_channels_last_and_compile_backend(cnn, fast_rule):
    r = measure_latency(cnn, (1, 16, 16), channels_last=True, compile="eager", rule=fast_rule)
    assert r.channels_last and r.compile == "eager" and r.median_ms > 0


def test_thread_clock_leaves_out_time_spent_descheduled():
    from hw_cost.backends import CpuBackend

    def nap() -> None:
        time.sleep(0.02)  # stands for another process holding the core

    wall = CpuBackend().time_ms(nap, 3, "wall")
    cpu = CpuBackend().time_ms(nap, 3, "thread")
    assert min(wall) >= 20 and max(cpu) < 5


def test_untimed_work_runs_before_every_call(cnn, fast_rule):
    from hw_cost.backends import CpuBackend

    seen = []
    CpuBackend().time_ms(lambda: seen.append("call"), 3, between=lambda: seen.append("scrub"))
    assert seen == ["scrub", "call"] * 3
    r = measure_latency(cnn, (1, 8, 8), scrub_bytes=1 << 20, rule=fast_rule)
    assert r.median_ms > 0


def test_thread_clock_measures_a_model(cnn, fast_rule):
    r = measure_latency(cnn, (1, 16, 16), threads=1, clock="thread", rule=fast_rule)
    assert r.clock == "thread" and r.median_ms > 0


def test_thread_count_is_pinned_then_restored(cnn, fast_rule):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        r = measure_latency(cnn, (1, 8, 8), threads=1, rule=fast_rule)
        assert r.threads == 1 and r.fingerprint["threads"] == 1
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_callers_model_is_left_as_it_was(cnn, fast_rule):
    cnn.train()
    measure_latency(cnn, (1, 8, 8), dtype="bf16", channels_last=True, rule=fast_rule)
    assert cnn.training
    assert all(p.dtype == torch.float32 for p in cnn.parameters())
    assert cnn[0].weight.is_contiguous()


class _Scripted:
    """A backend whose calls take scripted times: tests the stop rule without a clock."""

    name = "scripted"

    def __init__(self, times):
        self.times = itertools.cycle(times)

    def time_ms(self, fn, n, clock="wall", between=None):
        return [next(self.times) for _ in range(n)]

    def synchronize(self, device):
        return None


def test_stop_rule_stops_once_the_median_is_stable():
    rule = StopRule(window=10, rel_tol=0.01, min_repeats=50, max_seconds=60,
                    warmup_seconds=0, warmup_calls=1)
    samples, stable = time_adaptive(lambda: None, _Scripted([1.0, 1.0, 1.01]), "cpu", rule)
    assert stable and len(samples) == 50  # min_repeats reached with a tight median


def test_a_noisier_device_needs_more_repeats():
    rule = StopRule(window=10, rel_tol=0.01, min_repeats=10, max_repeats=100_000,
                    max_seconds=60, warmup_seconds=0, warmup_calls=1)
    rng = random.Random(0)
    quiet = _Scripted([1 + 0.02 * rng.gauss(0, 1) for _ in range(5000)])
    noisy = _Scripted([1 + 0.10 * rng.gauss(0, 1) for _ in range(5000)])
    n_quiet = len(time_adaptive(lambda: None, quiet, "cpu", rule)[0])
    n_noisy = len(time_adaptive(lambda: None, noisy, "cpu", rule)[0])
    # the median's interval shrinks like sigma / sqrt(n): 5x the noise needs ~25x the calls
    assert 10 * n_quiet < n_noisy


def test_stop_rule_gives_up_at_the_cap_when_the_median_wanders():
    rule = StopRule(window=10, rel_tol=0.01, min_repeats=10, max_repeats=200,
                    max_seconds=60, warmup_seconds=0, warmup_calls=1)
    drifting = _Scripted([float(i) for i in range(1, 10_000)])
    samples, stable = time_adaptive(lambda: None, drifting, "cpu", rule)
    assert not stable and len(samples) == 200


def test_min_seconds_keeps_timing_past_a_stable_median():
    rule = StopRule(window=10, rel_tol=0.01, min_repeats=10, max_repeats=10**9, max_seconds=60,
                    warmup_seconds=0, warmup_calls=1, min_seconds=0.05)
    start = time.perf_counter()
    samples, stable = time_adaptive(lambda: None, _Scripted([1.0]), "cpu", rule)
    # stable after 10 calls, yet timing goes on for the asked 0.05 s before it stops
    assert stable and time.perf_counter() - start >= 0.05 and len(samples) > 10


@pytest.mark.parametrize("low, high", [(5.0, 1.0), (-0.1, 1.0)])
def test_min_seconds_outside_zero_to_cap_is_refused(low, high):
    with pytest.raises(ConfigError, match=r"min_seconds: must lie in \[0, max_seconds\]"):
        StopRule(min_seconds=low, max_seconds=high)


def test_a_measurement_records_its_minimum_timing():
    r = measure_latency(tiny_cnn(), (1, 8, 8), threads=1, max_seconds=1.0, min_seconds=0.1)
    assert r.min_seconds == 0.1 and r.seconds >= 0.1
    # a loaded host may keep the median moving: then the timing ran to its cap, never less
    assert r.stable or r.seconds >= 1.0


def test_median_interval_by_hand():
    lo, med, hi = median_ci(list(range(1, 101)))  # n=100: ranks 50 -+ 9.8 -> 41st..60th
    assert (lo, med, hi) == (41.0, 50.5, 60.0)


@pytest.mark.parametrize("kwargs, rule, value", [
    ({"device": "tpu"}, "must be one of ['cpu', 'cuda']", "'tpu'"),
    ({"device": "cuda:x"}, "device index must be a non-negative integer", "'cuda:x'"),
    ({"batch_size": 0}, "must be a positive integer", "got 0"),
    ({"batch_size": -2}, "must be a positive integer", "got -2"),
    ({"dtype": "fp8"}, "must be one of ['bf16', 'fp16', 'fp32']", "'fp8'"),
    ({"input_shape": ()}, "without the batch dimension", "got ()"),
    ({"threads": 0}, "positive integer or None", "got 0"),
    ({"clock": "sundial"}, "clock: must be one of ['wall', 'thread']", "'sundial'"),
    ({"clock": "thread", "threads": 2}, "needs threads=1", "'threads=2'"),
    ({"clock": "thread", "threads": None}, "needs threads=1", "'threads=None'"),
])
def test_bad_input_names_rule_value_and_fix(kwargs, rule, value, cnn):
    shape = kwargs.pop("input_shape", (1, 8, 8))
    with pytest.raises(ConfigError) as err:
        measure_latency(cnn, shape, **kwargs)
    text = str(err.value)
    assert rule in text and value in text and "Fix:" in text and "\n" not in text


def test_every_problem_is_reported_at_once(cnn):
    with pytest.raises(ConfigError) as err:
        measure_latency(cnn, (1, 8, 8), device="tpu", batch_size=0, dtype="int3")
    assert len(err.value.problems) == 3


@pytest.mark.skipif(CUDA, reason="checks the message on a machine without CUDA")
def test_cuda_on_a_cpu_machine_is_a_clear_error(cnn):
    with pytest.raises(ConfigError, match="CUDA asked on a CPU machine"):
        measure_latency(cnn, (1, 8, 8), device="cuda")


def test_thread_clock_is_cpu_only(cnn):
    with pytest.raises(ConfigError, match="the thread clock exists on CPU only"):
        measure_latency(cnn, (1, 8, 8), device="cuda", threads=1, clock="thread")


@pytest.mark.gpu
def test_cuda_fingerprint_names_the_gpu(cnn, fast_rule):
    r = measure_latency(cnn, (1, 16, 16), device="cuda", dtype="fp16", rule=fast_rule)
    assert r.fingerprint["device"] == torch.cuda.get_device_name(0)
    assert {"capability", "driver", "cuda"} <= set(r.fingerprint)
