"""What every campaign part shares: its settings (``Context``), its registry, a bare timing
loop to hold hwnas's timing against, and the record each part writes.

A record is one JSON file per part (``<out>/<part>.json``): the device (GPU name, clocks, driver,
or the CPU model), package versions, git revision, the command, the precision settings, the
part's figures and its goals, so ``bench/collect.py`` can write the BENCHMARKS.md section from
the folder alone. Few files: the device machine returns at most 8 per call.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench import RESULTS, command_line
from hw_cost.backends import gpu_facts
from hwnas.common.devices import is_cuda, tf32_state
from hwnas.common.provenance import cpu_model, git_revision, versions
from hwnas.common.registry import Registry

PART_SECONDS = 540.0  # 9 minutes: one part must fit a 10-minute device call with start-up


@dataclass
class Context:
    """Settings every part reads. ``smoke``: tiny sizes for the CPU dry run."""

    device: str = "cuda"
    smoke: bool = False
    out: Path = RESULTS / "gpu"
    seed: int = 0
    budget_s: float = PART_SECONDS
    data_root: str | None = None
    started: float = field(default_factory=time.perf_counter)

    @property
    def cuda(self) -> bool:
        return is_cuda(self.device)

    @property
    def data(self) -> str:
        """Fashion-MNIST on the device; the tiny digits set (ships with scikit-learn) in smoke."""
        return "digits" if self.smoke else "fashion_mnist"

    def data_kwargs(self) -> dict[str, Any]:
        return {} if self.smoke or self.data_root is None else {"root": self.data_root}

    def left(self) -> float:
        """Seconds left of this part's budget (a part stops adding items when it runs low)."""
        return self.budget_s - (time.perf_counter() - self.started)

    def pick(self, full: Any, smoke: Any) -> Any:
        return smoke if self.smoke else full

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(torch.device(self.device))


@dataclass
class Goal:
    """One figure held to the issue's goal: ``value`` compared with ``limit`` by ``op``."""

    name: str
    value: float | None
    op: str  # "<=" or ">="
    limit: float

    @property
    def met(self) -> bool | None:
        if self.value is None:
            return None
        return self.value <= self.limit if self.op == "<=" else self.value >= self.limit


@dataclass
class Report:
    """What a part found: its figures, its goals and the precision it ran at."""

    results: dict[str, Any]
    goals: list[Goal] = field(default_factory=list)
    precision: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


PARTS: Registry[Callable[[Context], Report]] = Registry("campaign part")
part = PARTS.register


def bare_times_ms(fn: Callable[[], object], n: int, device: str) -> list[float]:
    """``n`` calls of ``fn``, each timed on its own with nothing of hwnas in between: CUDA
    events on a GPU (synchronised on the end event), ``perf_counter`` on a CPU. The floor that
    hwnas's timing is judged against."""
    out = []
    for _ in range(n):
        if is_cuda(device):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end))
        else:
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def cov(values: list[float]) -> float:
    """Coefficient of variation (std / mean) of repeated figures; 0 for fewer than two."""
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def device_facts(device: str) -> dict[str, Any]:
    if is_cuda(device):
        return {**gpu_facts(device), "devices": torch.cuda.device_count()}
    return {"device": cpu_model(), "threads": torch.get_num_threads(),
            "machine": platform.machine(), "tf32": tf32_state()}


def write_record(ctx: Context, name: str, report: Report | None, seconds: float,
                 error: str | None = None) -> dict[str, Any]:
    """``<out>/<name>.json``: the part's report with everything that identifies it."""
    record = {"part": name, "device": ctx.device, "smoke": ctx.smoke,
              "facts": device_facts(ctx.device), "versions": versions(),
              "git": git_revision(), "command": command_line(),
              "seconds": round(seconds, 2), "budget_s": ctx.budget_s, "error": error,
              **(asdict(report) if report else {"results": {}, "goals": [], "precision": {},
                                                "notes": []})}
    for goal, obj in zip(record["goals"], report.goals if report else [], strict=True):
        goal["met"] = obj.met
    ctx.out.mkdir(parents=True, exist_ok=True)
    (ctx.out / f"{name}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    return record
