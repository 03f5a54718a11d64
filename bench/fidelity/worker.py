"""One truth worker. It lives in a module of its own (not ``__main__``) because ``spawn``
re-imports the target by name in the child, and ``python -m bench.fidelity`` is not importable
under that name there."""

from __future__ import annotations

from bench.fidelity import bands, truth
from hwnas.common.devices import is_cuda, set_deterministic, set_tf32


def run(spaces: dict[str, list[str]] | None, threads: int, seconds: float | None,
        device: str = "cpu", phases: tuple[str, ...] | None = None) -> int:
    """Run truth units; ``spaces`` None: truth v2's plan (latency bands, second seed);
    ``phases``: only units of these phases (None: all).

    Returns the number of units done."""
    truth.DEVICE = device  # a spawned worker imports the module afresh
    if is_cuda(device):
        set_tf32(False)  # the truth is fp32; cuDNN would default to TF32
        # Deterministic kernels: weights lost with a machine are retrained to the same values on
        # the same GPU and software (``truth._redo``), so a later window's HWA and scoring start
        # from the weights the record describes.
        set_deterministic()
    units = bands.plan_v2() if spaces is None else truth.plan(spaces)
    return truth.work(truth.with_phases(units, phases), threads=threads, stop_after=seconds)
