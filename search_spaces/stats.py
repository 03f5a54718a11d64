"""Parameter and MAC counts of a model (one helper, so a shared counter can replace it)."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode


def count_params_macs(model: nn.Module, input_shape: tuple[int, ...]) -> tuple[int, int]:
    """(parameters, multiply-accumulates of one forward pass on one ``input_shape`` image).

    MACs are FLOPs / 2 from ``FlopCounterMode``, counted under the math attention kernel: the
    fused CPU kernel reports 0 FLOPs and would undercount ViTs. Works on the meta device too.
    A model whose weights are all frozen still lets ``nn.MultiheadAttention`` take its fused
    fast path, which counts 0.
    """
    params = sum(p.numel() for p in model.parameters())
    first = next(model.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    x = torch.zeros((1, *input_shape), device=device)
    was_training = model.training
    model.eval()  # batch-norm in train mode rejects a batch of one 1x1 map
    try:
        # Grad stays enabled: under no_grad an eval nn.MultiheadAttention takes its fused fast
        # path, which the counter does not see (0 MACs).
        with FlopCounterMode(display=False) as counter, sdpa_kernel(SDPBackend.MATH):
            model(x)
    finally:
        model.train(was_training)
    return params, counter.get_total_flops() // 2


def reference_stats(space: Any, arch: str, input_shape: tuple[int, int, int] = (3, 32, 32),
                    num_classes: int = 10) -> tuple[int, int]:
    """Params and MACs of ``arch`` built for a reference shape on the meta device (no memory,
    no compute, so even the largest arch costs a fraction of a second); remembered per arch.

    The space is rebuilt from its class and instance attributes (its constructor options).
    """
    options = tuple(sorted(vars(space).items()))
    return _reference_stats(type(space), options, arch, tuple(input_shape), num_classes)


@functools.lru_cache(maxsize=4096)
def _reference_stats(space_cls: type, options: tuple, arch: str,
                     input_shape: tuple[int, int, int], num_classes: int) -> tuple[int, int]:
    return meta_stats(space_cls(**dict(options)), arch, input_shape, num_classes)


def meta_stats(space: Any, arch: str, input_shape: tuple[int, int, int] = (3, 32, 32),
               num_classes: int = 10) -> tuple[int, int]:
    """Params and MACs of ``arch`` built on the meta device, counted afresh each call
    (``reference_stats`` remembers them)."""
    with torch.device("meta"):
        model = space.build(arch, in_chans=input_shape[0], num_classes=num_classes,
                            img_size=input_shape[1])
    return count_params_macs(model, input_shape)


def size_text(n: int) -> str:
    """A space's size: exact up to a billion; above, its power of ten (``~10^10.7``), which
    reads."""
    return f"{n:,}" if n < 10**9 else f"~10^{math.log10(n):.1f}"
