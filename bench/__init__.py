"""Benchmarks by concern; every script runs as a module from the repository root,
``python -m bench.<concern>.<script>`` (see bench/README.md).

The folders every script reads and writes, named once here so that a script's depth in the tree
does not decide where its results go.
"""

from __future__ import annotations

import sys
from pathlib import Path

import hwnas  # noqa: F401  (first: it sets Ray's switches before a script imports Ray)

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent  # the repository root
DATA = BENCH / "data"  # inputs and long-running jobs' outputs (fidelity truth, NB201 tables)
RESULTS = BENCH / "results"  # the result files bench/collect.py builds BENCHMARKS.md from


def command_line() -> str:
    """The command that started this process, as the docs tell it to be typed
    (``python -m bench.x.y ARGS``), for the result files to name."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    head = ["-m", spec.name.removesuffix(".__main__")] if spec else sys.argv[:1]
    return " ".join(["python", *head, *sys.argv[1:]])
