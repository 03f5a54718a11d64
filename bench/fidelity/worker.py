"""One truth worker. It lives in a module of its own (not ``__main__``) because ``spawn``
re-imports the target by name in the child, and ``python -m bench.fidelity`` is not importable
under that name there."""

from __future__ import annotations

from bench.fidelity import bands, truth


def run(spaces: dict[str, list[str]] | None, threads: int, seconds: float | None,
        device: str = "cpu", phases: tuple[str, ...] | None = None) -> int:
    """Run truth units; ``spaces`` None: truth v2's plan (latency bands, second seed);
    ``phases``: only units of these phases (None: all).

    Returns the number of units done."""
    truth.use_device(device)  # a spawned worker imports the module afresh
    units = bands.plan_v2() if spaces is None else truth.plan(spaces)
    return truth.work(truth.with_phases(units, phases), threads=threads, stop_after=seconds)
