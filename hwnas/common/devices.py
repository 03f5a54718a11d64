"""One check that a device name is usable here, shared by every entry point that takes one.

A GPU path asked for on a machine without a GPU must fail before any work (loading data,
building models, timing), with the rule, the value and the fix, not with a CUDA trace minutes in.
``hw_cost`` (latency backends), ``hwnas.train.ddp``, the GPU campaign and study validation all
call ``require_device``; ``device_problem`` returns the same finding for code that collects every
problem before raising.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from hwnas.common.errors import ConfigError, Problem

DEVICE_TYPES = ("cpu", "cuda")
NO_CUDA_RULE = "CUDA asked on a CPU machine"


def device_problem(name: object, where: str = "device") -> Problem | None:
    """What is wrong with device ``name`` on this machine (None when it is usable).

    Accepted: ``cpu``, ``cuda`` and ``cuda:N`` where this machine has CUDA device N.
    """
    text = str(name)
    kind, _, index = text.partition(":")
    if kind not in DEVICE_TYPES:
        return Problem(where, f"must be one of {list(DEVICE_TYPES)} (optionally 'cuda:N')", name,
                       "use cpu, cuda or cuda:N")
    if index and not index.isdigit():
        return Problem(where, "the device index must be a non-negative integer", name,
                       "write e.g. 'cuda:0'")
    if kind == "cpu":
        return None if not index or index == "0" else Problem(
            where, "the CPU has no device index", name, "write 'cpu'")
    return _cuda_problem(text, int(index or 0), where)


def _cuda_problem(name: str, index: int, where: str) -> Problem | None:
    import torch  # deferred: ``common`` (and study validation) stays importable without torch

    if not torch.cuda.is_available():
        return Problem(where, NO_CUDA_RULE, name,
                       "use cpu here (--device cpu, latency.device: cpu), or run on a machine "
                       "with an NVIDIA GPU (docs/gpu.md)")
    if index >= torch.cuda.device_count():
        return Problem(where, f"only {torch.cuda.device_count()} CUDA device(s) here", name,
                       "pick an index below the device count")
    return None


def require_device(name: object, where: str = "device") -> str:
    """``name`` as a string when it is usable here; else a ``ConfigError`` naming ``where``."""
    problem = device_problem(name, where)
    if problem is not None:
        raise ConfigError(problem)
    return str(name)


def is_cuda(name: object) -> bool:
    """Whether ``name`` names a CUDA device (usable or not)."""
    return str(name).split(":", 1)[0] == "cuda"


def set_tf32(enabled: bool) -> dict[str, bool]:
    """Set TF32 for CUDA matmuls and cuDNN convolutions explicitly (cuDNN defaults to TF32, so
    an "fp32" figure taken without this is most likely TF32); returns the settings before."""
    before = tf32_state()
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    return before


def tf32_state() -> dict[str, bool]:
    """The TF32 settings in force: matmuls and cuDNN convolutions."""
    return {"matmul": bool(torch.backends.cuda.matmul.allow_tf32),
            "cudnn": bool(torch.backends.cudnn.allow_tf32)}


@contextmanager
def tf32_block(enabled: bool) -> Iterator[dict[str, bool]]:
    """The block runs with TF32 ``enabled`` (both switches); the caller's settings come back."""
    before = set_tf32(enabled)
    try:
        yield tf32_state()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before["matmul"]
        torch.backends.cudnn.allow_tf32 = before["cudnn"]


# cuBLAS's deterministic workspace (NVIDIA's documented setting); read when cuBLAS starts.
CUBLAS_WORKSPACE = ":4096:8"


def set_deterministic() -> dict[str, object]:
    """Deterministic CUDA kernels for a seeded run: cuDNN's deterministic convolutions (no
    autotuning), cuBLAS's fixed workspace and torch's deterministic implementations, so a seeded
    training recomputes the same weights on the same GPU and software. An op that has no
    deterministic kernel warns instead of stopping the run (``warn_only``). Call it before the
    first CUDA operation: cuBLAS reads its workspace setting once. Returns the settings now."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    return deterministic_state()


def deterministic_state() -> dict[str, object]:
    """The determinism settings in force, as a unit record stores them."""
    return {"cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
            "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
            "algorithms": bool(torch.are_deterministic_algorithms_enabled()),
            "warn_only": bool(torch.is_deterministic_algorithms_warn_only_enabled()),
            "cublas_workspace": os.environ.get("CUBLAS_WORKSPACE_CONFIG")}
