"""Per-candidate profiles: a ``torch.profiler`` Chrome trace and the top operators by self time.

The model is prepared exactly as a latency measurement times it (device, dtype, memory format,
deployed form), warmed up outside the profiler, then ``calls`` forwards run under it. Each row
of the table gives an operator's self time per forward and its share of all self time, so
the rows say where a candidate's latency goes (open the trace in chrome://tracing or Perfetto).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile

from hw_cost.backends import get_backend
from hw_cost.latency import prepare
from hw_cost.options import validate


def top_operators(events, calls: int, *, device: bool, top: int = 15) -> list[dict[str, object]]:
    """Rows (name, count per forward, self ms per forward, share of self time), largest first,
    from ``prof.key_averages()``; ``device`` ranks by self time on the GPU."""
    def self_us(e) -> float:
        return float(e.self_device_time_total if device else e.self_cpu_time_total)

    rows = [e for e in events if self_us(e) > 0]
    total = sum(self_us(e) for e in rows) or 1.0
    rows.sort(key=self_us, reverse=True)
    return [{"operator": e.key, "calls": e.count / calls, "self_ms": self_us(e) / 1e3 / calls,
             "share": self_us(e) / total} for e in rows[:top]]


def profile_model(model: nn.Module, input_shape: Sequence[int], *, trace: str | Path,
                  device: str = "cpu", batch_size: int = 1, dtype: str = "fp32",
                  form: str = "eager", channels_last: bool = False, threads: int | None = None,
                  calls: int = 20, warmup: int = 5, top: int = 15,
                  tf32: bool = False) -> dict[str, object]:
    """Profile ``calls`` forwards of ``model`` as deployed; write the Chrome trace to ``trace``.
    ``tf32``: CUDA's TF32 setting, as ``measure_latency`` sets it (off: fp32 is fp32).

    Returns ``{"trace", "calls", "device", "form", "total_self_ms", "operators": rows}``.
    """
    target = validate(device=device, batch_size=batch_size, dtype=dtype,
                      input_shape=input_shape, threads=threads, form=form)
    backend = get_backend(target.device)
    on_gpu = backend.profiles_device
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with (backend.session(target.device, threads) as used, torch.inference_mode(),
          backend.precision(target.device, tf32)):
        fn = prepare(model, target.input_shape, device=target.place, batch_size=batch_size,
                     dtype=target.torch_dtype, channels_last=channels_last, compile=False,
                     form=form)
        for _ in range(warmup):  # compilation and first-call costs stay out of the profile
            fn()
        backend.synchronize(target.device)
        with profile(activities=activities) as prof:
            for _ in range(calls):
                fn()
            backend.synchronize(target.device)
    path = Path(trace)
    path.parent.mkdir(parents=True, exist_ok=True)
    prof.export_chrome_trace(str(path))
    rows = top_operators(prof.key_averages(), calls, device=on_gpu, top=top)
    return {"trace": str(path), "calls": calls, "device": target.device, "form": form,
            "dtype": target.dtype, "threads": used,
            "total_self_ms": sum(float(e.self_device_time_total if on_gpu else
                                       e.self_cpu_time_total) for e in prof.key_averages())
            / 1e3 / calls, "operators": rows}
