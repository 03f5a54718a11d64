"""Validation of the measurement options every hw_cost entry point shares.

All problems are collected and raised at once (``ConfigError``), each naming the rule, the value
received and the fix, so a user fixes a bad command line in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from hwnas.common.errors import ConfigError, Problem

DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "fp16": torch.float16,
    "bf16": torch.bfloat16,
}


# How a call is timed. "wall": elapsed time, the latency a user sees. "thread": CPU time of the
# calling thread (CPU, one thread only): time the process spends descheduled is left out, so
# other processes on a shared machine (parallel trials, a busy CI box) do not inflate the figure.
CLOCKS = ("wall", "thread")


@dataclass(frozen=True)
class Target:
    """A validated measurement target: backend name and the torch device string."""

    backend: str
    device: str
    dtype: str
    batch_size: int
    input_shape: tuple[int, ...]
    clock: str = "wall"
    form: str = "eager"  # the deployed form timed (hw_cost.forms); dtype is the one it computes in
    place: str = "cpu"  # the torch device the model and input are moved to (backend.place)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


def _device_problems(device: str) -> tuple[str, list[Problem]]:
    from hw_cost.backends import BACKENDS, backend_name

    backend = backend_name(device)
    if backend not in BACKENDS:
        return backend, [Problem("device", f"must be one of {BACKENDS.list()} (the "
                                 "latency backends, optionally with ':N')", device,
                                 "use --device cpu or --device cuda, or install the package "
                                 "that declares this backend under the entry-point group "
                                 "hwnas.latency_backends (docs/plugins.md)")]
    index = str(device).split(":", 1)[1] if ":" in str(device) else "0"
    if not index.isdigit():
        return backend, [Problem("device", "the device index must be a non-negative integer",
                                 device, "write e.g. 'cuda:0'")]
    problem = BACKENDS.get(backend)().availability(str(device))
    return backend, [problem] if problem else []


def validate(*, device: str = "cpu", batch_size: int = 1, dtype: str = "fp32",
             input_shape: Sequence[int] = (3, 32, 32), threads: int | None = None,
             clock: str = "wall", form: str = "eager") -> Target:
    """Check every option and return a ``Target``; one ``ConfigError`` lists all problems.

    ``form`` (``hw_cost.forms``) fp16/bf16 sets the dtype the target computes in."""
    from hw_cost.forms import form_dtype, form_problems

    backend, problems = _device_problems(device)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
        problems.append(Problem("batch_size", "must be a positive integer", batch_size,
                                "pass --batch 1 or larger"))
    if dtype not in DTYPES:
        problems.append(Problem("dtype", f"must be one of {sorted(DTYPES)}", dtype,
                                "pass --dtype fp32, fp16 or bf16"))
    shape = tuple(input_shape) if isinstance(input_shape, Sequence) else ()
    if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        problems.append(Problem("input_shape", "must be positive integers (C,H,W) without the "
                                "batch dimension", input_shape, "pass e.g. --input-shape 1,28,28"))
    if threads is not None and (not isinstance(threads, int) or threads <= 0):
        problems.append(Problem("threads", "must be a positive integer or None (keep torch's)",
                                threads, "pass --threads 1 or leave it out"))
    problems += _clock_problems(clock, backend, threads)
    problems += form_problems(form, backend, dtype)
    if problems:
        raise ConfigError(problems)
    from hw_cost.backends import BACKENDS

    place = BACKENDS.get(backend)().place(str(device))
    return Target(backend, str(device), form_dtype(form, dtype), batch_size, shape, clock, form,
                  place)


def _clock_problems(clock: str, backend: str, threads: int | None) -> list[Problem]:
    from hw_cost.backends import BACKENDS

    if clock not in CLOCKS:
        return [Problem("clock", f"must be one of {list(CLOCKS)}", clock, "pass --clock wall")]
    if backend in BACKENDS and clock not in BACKENDS.get(backend).clocks:
        return [Problem("clock", "the thread clock exists on CPU only", f"{clock} on {backend}",
                        "use --clock wall (CUDA events) on a GPU")]
    if clock == "thread" and threads != 1:
        return [Problem("clock", "the thread clock sees the calling thread only, so it needs "
                        "threads=1", f"threads={threads}", "pass --threads 1 with --clock thread")]
    return []


def parse_shape(text: str) -> tuple[int, ...]:
    """``"1,28,28"`` -> ``(1, 28, 28)`` with a clear error on anything else."""
    try:
        shape = tuple(int(part) for part in text.replace("x", ",").split(","))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise ConfigError.one("input_shape", "must be comma-separated positive integers C,H,W",
                              text, "pass e.g. --input-shape 1,28,28")
    return shape
