"""Where a result came from: package versions, device, git revision, time."""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata as md
import os
import platform
import subprocess
from pathlib import Path

_PACKAGES = ("torch", "torchvision", "timm", "optuna", "ray", "aihwkit", "aihwkit-lightning",
             "torchao", "torch-pruning", "onnxruntime", "numpy")


def versions(packages: tuple[str, ...] = _PACKAGES) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


@functools.cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str = "cpu") -> str:
    """A human-readable device label: GPU name, or CPU model with the torch thread count."""
    import torch

    if str(device).startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return f"{cpu_model()} ({torch.get_num_threads()} threads)"


def git_revision(cwd: str | os.PathLike | None = None) -> str:
    here = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, text=True,
                             capture_output=True, timeout=5, check=False)
        rev = out.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               text=True, capture_output=True, timeout=5, check=False).stdout
        return (rev + ("-dirty" if dirty.strip() else "")) if rev else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(device: str = "cpu", **extra: object) -> dict[str, object]:
    """Everything needed to trust a figure later; store it next to every result."""
    return {
        "time_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "device": device_name(device),
        "git": git_revision(),
        "versions": versions(),
        **extra,
    }
