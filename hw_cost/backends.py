"""Latency backends: how to time one call on a device, and what identifies that device.

A backend is registered by name in ``BACKENDS`` (``cpu``, ``cuda``, and any a plugin adds
through the ``hwnas.latency_backends`` entry-point group); ``measure_latency`` picks one from the
device string's part before ``:``. A backend holds every device-specific fact: whether it is
usable here, the torch device a model and input are placed on, the execution context of a
measurement (thread count, current device), the timer and synchronisation, the clocks and
deployed forms it can time, the roofline's kernel sizes and cache levels, and a fingerprint: the
facts that must match before two latency figures may be compared. Code outside this module asks
the backend; it never compares device names.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import torch

from hwnas.common.devices import device_problem, tf32_block, tf32_state
from hwnas.common.errors import Problem
from hwnas.common.provenance import cpu_model
from hwnas.common.registry import Registry
from hwnas.common.threads import torch_threads


class LatencyBackend(Protocol):
    name: str
    clocks: tuple[str, ...]  # the clocks ``time_ms`` offers ("wall", "thread")
    matmul_n: tuple[int, ...]  # roofline matmul sizes; empty: no ceilings (roofline refuses)
    copy_bytes: int  # roofline copy far larger than any cache (DRAM)
    tf32_matters: bool  # TF32 changes its figures, so TF32 is part of its cache keys
    measures_activation_memory: bool  # peak activation memory is measured, not estimated
    profiles_device: bool  # torch.profiler records device kernels (CUDA activity)

    def place(self, device: str) -> str:
        """The torch device the model and its input are moved to."""
        ...

    def unsupported_form(self, form: str) -> Problem | None:
        """Why this backend never runs deployed ``form`` (None when it does)."""
        ...

    def emulated_form(self, form: str) -> Problem | None:
        """Why ``form`` on this machine would be software emulation (None when native)."""
        ...

    def cache_levels(self, device: str) -> dict[str, int]:
        """Cache levels given a roofline roof of their own, with their sizes in bytes."""
        ...

    def scrub_bytes(self) -> int:
        """Bytes written between block timings to evict weights from cache (0: none)."""
        ...

    def availability(self, device: str) -> Problem | None: ...

    def session(self, device: str, threads: int | None) -> Iterator[int]: ...

    def time_ms(self, fn: Callable[[], object], n: int, clock: str = "wall",
                between: Callable[[], object] | None = None) -> list[float]: ...

    def synchronize(self, device: str) -> None: ...

    def fingerprint(self, device: str, threads: int) -> dict[str, object]: ...

    def precision(self, device: str, tf32: bool) -> AbstractContextManager[dict[str, object]]:
        """Numeric settings for the block (TF32 on CUDA); yields what to record."""
        ...

    def reset_peak_memory(self, device: str) -> None: ...

    def peak_memory_bytes(self, device: str) -> int | None: ...


BACKENDS: Registry[type[LatencyBackend]] = Registry("latency backend", "hwnas.latency_backends")


_NATIVE = {"fp16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp"),
           "bf16": ("avx512_bf16", "amx_bf16", "bf16")}
_LEVELS = ("L2", "LLC")  # CPU cache levels given a bandwidth ceiling of their own


def fingerprint_hash(fingerprint: dict[str, object]) -> str:
    """A short stable id of a fingerprint, used in cache keys."""
    blob = json.dumps(fingerprint, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@BACKENDS.register("cpu")
class CpuBackend:
    """Timing with ``perf_counter_ns`` (wall) or ``thread_time_ns`` (CPU time of this thread) at
    a fixed torch intra-op thread count."""

    name = "cpu"
    clocks = ("wall", "thread")
    matmul_n = (256, 512, 1024)
    copy_bytes = 256 * 2**20
    tf32_matters = False
    measures_activation_memory = False
    profiles_device = False

    def availability(self, device: str) -> Problem | None:
        return None

    def place(self, device: str) -> str:
        return "cpu"

    def unsupported_form(self, form: str) -> Problem | None:
        return None

    def emulated_form(self, form: str) -> Problem | None:
        # Without native half arithmetic a CPU emulates it: the timing says nothing of a
        # deployment.
        if form in _NATIVE and not cpu_flags() & set(_NATIVE[form]):
            return Problem("form", f"{form} on this CPU is software emulation (none of the "
                           f"flags {list(_NATIVE[form])}), not a deployed form",
                           f"{form} on {self.name}",
                           "use --form int8 or eager on this CPU, or --device cuda")
        return None

    def cache_levels(self, device: str) -> dict[str, int]:
        return {k: v for k, v in cache_sizes().items() if k in _LEVELS}

    def scrub_bytes(self) -> int:
        return 2 * l2_cache_bytes()

    @contextmanager
    def session(self, device: str, threads: int | None) -> Iterator[int]:
        # Pinned: the thread count changes latency more than anything else on CPU.
        with torch_threads(threads) as n:
            yield n

    def time_ms(self, fn: Callable[[], object], n: int, clock: str = "wall",
                between: Callable[[], object] | None = None) -> list[float]:
        now = time.thread_time_ns if clock == "thread" else time.perf_counter_ns
        out = []
        for _ in range(n):
            if between is not None:  # untimed work before each call (cache scrubbing)
                between()
            start = now()
            fn()
            out.append((now() - start) / 1e6)
        return out

    def synchronize(self, device: str) -> None:
        return None

    @contextmanager
    def precision(self, device: str, tf32: bool) -> Iterator[dict[str, object]]:
        yield {"tf32": None}  # TF32 is a CUDA setting: nothing to set or record on CPU

    def reset_peak_memory(self, device: str) -> None:
        return None

    def peak_memory_bytes(self, device: str) -> int | None:
        return None  # torch keeps no peak statistics of host memory

    def fingerprint(self, device: str, threads: int) -> dict[str, object]:
        return {"backend": self.name, "device": cpu_model(), "threads": threads,
                "isa": torch.backends.cpu.get_cpu_capability(), "torch": torch.__version__}


_SMI_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem",
               "power.limit")


def nvidia_smi(index: int = 0) -> dict[str, str]:
    """Driver, current and maximum clocks (MHz) and power limit of GPU ``index`` from
    ``nvidia-smi``; every field "unknown" where the tool is missing or fails. Not cached: the
    clocks are read next to each figure, since a GPU's clocks move with load and temperature."""
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=" + ",".join(_SMI_FIELDS),
                              "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10, check=False).stdout
        values = [v.strip() for v in out.strip().splitlines()[0].split(",")] if out.strip() else []
    except (OSError, subprocess.SubprocessError):
        values = []
    if len(values) != len(_SMI_FIELDS):
        values = ["unknown"] * len(_SMI_FIELDS)
    return dict(zip(_SMI_FIELDS, values, strict=True))


@functools.cache
def _nvidia_driver() -> str:
    return nvidia_smi()["driver_version"]


def gpu_facts(device: str) -> dict[str, object]:
    """What identifies a GPU and its state for one figure: name, capability, memory, L2 size,
    multiprocessors, driver and clocks (``nvidia_smi``), and the TF32 settings in force."""
    dev = torch.device(device)
    props = torch.cuda.get_device_properties(dev)
    smi = nvidia_smi(dev.index or 0)
    return {"device": props.name, "capability": f"{props.major}.{props.minor}",
            "memory_gb": round(props.total_memory / 2**30, 1),
            "l2_bytes": int(getattr(props, "L2_cache_size", 0)),
            "multiprocessors": props.multi_processor_count, "driver": smi["driver_version"],
            "clocks_mhz": {k: smi[k] for k in _SMI_FIELDS[1:5]},
            "power_limit_w": smi["power.limit"], "cuda": torch.version.cuda,
            "tf32": tf32_state()}


@BACKENDS.register("cuda")
class CudaBackend:
    """CUDA-event timing of each call, synchronised on the end event (no host-side guesswork)."""

    name = "cuda"
    clocks = ("wall",)
    matmul_n = (4096, 8192)
    copy_bytes = 1024 * 2**20
    tf32_matters = True
    measures_activation_memory = True
    profiles_device = True

    def availability(self, device: str) -> Problem | None:
        return device_problem(device)

    def place(self, device: str) -> str:
        return str(device)

    def unsupported_form(self, form: str) -> Problem | None:
        # The one place the rule lives: study validation and hw_cost.forms both ask here.
        if form == "int8":
            return Problem("form", "int8 is torchao's x86 int8 model, which runs on CPU only",
                           f"int8 on {self.name}", "use --device cpu, or --form fp16/bf16 on a GPU")
        return None

    def emulated_form(self, form: str) -> Problem | None:
        return None

    def cache_levels(self, device: str) -> dict[str, int]:
        l2 = int(getattr(torch.cuda.get_device_properties(torch.device(device)),
                         "L2_cache_size", 0))
        return {"L2": l2} if l2 > 0 else {}

    def scrub_bytes(self) -> int:
        return 0  # block timings on a GPU are not scrubbed (as before)

    @contextmanager
    def session(self, device: str, threads: int | None) -> Iterator[int]:
        with CpuBackend().session("cpu", threads) as n, torch.cuda.device(torch.device(device)):
            yield n

    def time_ms(self, fn: Callable[[], object], n: int, clock: str = "wall",
                between: Callable[[], object] | None = None) -> list[float]:
        out = []  # options.validate allows only the wall clock (events) here
        for _ in range(n):
            if between is not None:  # enqueued before the start event: not timed
                between()
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end))
        return out

    def synchronize(self, device: str) -> None:
        torch.cuda.synchronize(torch.device(device))

    @contextmanager
    def precision(self, device: str, tf32: bool) -> Iterator[dict[str, object]]:
        with tf32_block(tf32):
            yield {"tf32": tf32, "gpu": gpu_facts(device)}

    def reset_peak_memory(self, device: str) -> None:
        torch.cuda.synchronize(torch.device(device))
        torch.cuda.reset_peak_memory_stats(torch.device(device))

    def peak_memory_bytes(self, device: str) -> int | None:
        return int(torch.cuda.max_memory_allocated(torch.device(device)))

    def fingerprint(self, device: str, threads: int) -> dict[str, object]:
        # Only what fixes the figure's meaning: clocks move between calls and are recorded with
        # each result (``gpu_facts``), not in the cache key.
        props = torch.cuda.get_device_properties(torch.device(device))
        return {"backend": "cuda", "device": props.name,
                "capability": f"{props.major}.{props.minor}", "driver": _nvidia_driver(),
                "cuda": torch.version.cuda, "memory_gb": round(props.total_memory / 2**30, 1),
                "torch": torch.__version__}


@functools.cache
def cache_sizes() -> dict[str, int]:
    """Bytes of the CPU's data caches by level (Linux sysfs): ``{"L1": .., "L2": .., "LLC": ..}``;
    the last level found is the LLC. Levels that cannot be read are left out."""
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    found: dict[int, int] = {}
    for index in sorted(base.glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            text = (index / "size").read_text().strip().upper()
            scale = {"K": 2**10, "M": 2**20}.get(text[-1], 1)
            found[int((index / "level").read_text())] = int(text.rstrip("KM")) * scale
        except (OSError, ValueError):
            continue
    names = {1: "L1", 2: "L2"}
    top = max(found, default=0)
    return {("LLC" if level == top and level > 2 else names.get(level, f"L{level}")): size
            for level, size in sorted(found.items())}


def l2_cache_bytes() -> int:
    """Size of the CPU's level-2 cache, 2 MiB when it cannot be read."""
    return cache_sizes().get("L2", 2 * 2**20)


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (``/proc/cpuinfo``; empty where it cannot be read)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def backend_name(device: str) -> str:
    """The backend a device string names: its part before ``:`` (``cuda:1`` -> ``cuda``)."""
    return str(device).split(":", 1)[0]


def get_backend(device: str) -> LatencyBackend:
    """The backend of ``device``; an unknown name is a ``ConfigError`` listing the known ones."""
    return BACKENDS.get(backend_name(device))()
