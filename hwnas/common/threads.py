"""Pinning torch's intra-op thread count for a block of work."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def torch_threads(n: int | None) -> Iterator[int]:
    """Run the block with ``n`` torch threads (``None``: leave as is); restore the old count after.

    On CPU the thread count moves latency and throughput more than anything else, so measuring
    and small-model work pin it, and must not leak the setting into the caller's later work.
    """
    import torch  # imported here: ``common`` stays importable without torch

    previous = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)
