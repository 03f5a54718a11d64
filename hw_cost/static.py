"""Static costs: parameters, MACs/FLOPs, model bytes, activation memory.

FLOPs come from ``torch.utils.flop_counter.FlopCounterMode`` run under the MATH attention
backend: the fused CPU attention kernel reports 0 FLOPs, which would undercount ViTs by ~15%.
``FlopCounterMode`` counts only matrix products and convolutions (mm, addmm, bmm, convolution,
attention), 2 FLOPs per multiply-accumulate, so ``macs == flops / 2`` exactly; element-wise
work (norms, activations, pooling, bias adds, softmax) is not counted.
"""

from __future__ import annotations

import copy
import weakref
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from hw_cost.backends import get_backend
from hw_cost.options import validate


def count_flops(model: nn.Module, x: torch.Tensor) -> tuple[int, dict[str, int]]:
    """Total FLOPs of one forward on ``x`` and the count per aten op."""
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), sdpa_kernel(SDPBackend.MATH), counter:
        model(x)
    by_op = {str(op).removeprefix("aten."): int(n)
             for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return int(counter.get_total_flops()), by_op


def model_bytes(model: nn.Module, dtype: torch.dtype = torch.float32) -> int:
    """Bytes of parameters and buffers once the floating ones are cast to ``dtype``."""
    size = torch.empty((), dtype=dtype).element_size()
    tensors = [*model.parameters(), *model.buffers()]
    return sum(t.numel() * (size if t.is_floating_point() else t.element_size()) for t in tensors)


class _Liveness:
    """Tracks the bytes of tensors the hooked modules produce while they are alive.

    Keyed by storage so in-place ops and views add nothing; a tensor's bytes leave the count when
    its Python object is freed. Tensors made by functional code between modules are not seen, so
    the peak is a lower bound of what the forward really holds.
    """

    def __init__(self) -> None:
        self.live: dict[int, list[int]] = {}
        self.current = self.peak = self.total = self.calls = 0

    def add(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage.data_ptr()
        if key in self.live:
            self.live[key][1] += 1
        else:
            self.live[key] = [storage.nbytes(), 1]
            self.current += storage.nbytes()
            self.total += storage.nbytes()
            self.peak = max(self.peak, self.current)
        weakref.finalize(t, self._drop, key)

    def _drop(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] == 0:
            self.current -= entry[0]
            del self.live[key]

    def hook(self, module: nn.Module, args: tuple, output: object) -> None:
        self.calls += 1
        for t in output if isinstance(output, tuple | list) else (output,):
            if isinstance(t, torch.Tensor):
                self.add(t)


def activation_memory_hooks(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """Peak and total bytes of leaf-module outputs during one forward (estimate from hooks),
    and the number of leaf-module calls."""
    tracker = _Liveness()
    leaves = [m for m in model.modules() if not any(True for _ in m.children())]
    handles = [m.register_forward_hook(tracker.hook) for m in leaves]
    try:
        with torch.inference_mode():
            tracker.add(x)
            out = model(x)
            peak, total = tracker.peak, tracker.total
            del out
    finally:
        for h in handles:
            h.remove()
    # leaf_calls: modules run per forward, a proxy for per-op overhead, which dominates the
    # latency of small models at batch 1.
    return {"peak_activation_bytes": peak, "activation_bytes": total,
            "leaf_calls": tracker.calls}


def activation_memory_cuda(model: nn.Module, x: torch.Tensor) -> int:
    """Measured peak bytes allocated by one forward above the model and input already resident."""
    torch.cuda.synchronize(x.device)
    torch.cuda.reset_peak_memory_stats(x.device)
    base = torch.cuda.memory_allocated(x.device)
    with torch.inference_mode():
        model(x)
    torch.cuda.synchronize(x.device)
    return int(torch.cuda.max_memory_allocated(x.device) - base)


def static_costs(model: nn.Module, input_shape: Sequence[int], *, batch_size: int = 1,
                 device: str = "cpu", dtype: str = "fp32") -> dict[str, object]:
    """Parameters, MACs, FLOPs, model bytes and activation memory of one forward pass.

    Counts are for the whole batch. ``peak_activation_bytes`` is measured with
    ``max_memory_allocated`` on CUDA and estimated from forward hooks on CPU (a lower bound, see
    ``_Liveness``); ``activation_bytes`` (all leaf outputs, for roofline traffic) always comes
    from hooks.
    """
    target = validate(device=device, batch_size=batch_size, dtype=dtype, input_shape=input_shape)
    model = copy.deepcopy(model).eval().to(device=target.place, dtype=target.torch_dtype)
    x = torch.randn(batch_size, *target.input_shape, device=target.place,
                    dtype=target.torch_dtype)
    flops, by_op = count_flops(model, x)
    act = activation_memory_hooks(model, x)
    measured = get_backend(target.device).measures_activation_memory
    if measured:
        act["peak_activation_bytes"] = activation_memory_cuda(model, x)
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "macs": flops // 2,
        "flops": flops,
        "flops_by_op": by_op,
        "model_bytes": model_bytes(model, target.torch_dtype),
        "input_bytes": x.numel() * x.element_size(),
        **act,
        "peak_activation_method": "measured" if measured else "estimated_from_hooks",
        "batch_size": batch_size,
        "dtype": dtype,
    }
