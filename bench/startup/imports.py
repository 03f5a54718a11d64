"""What a process pays at start to import the stack, with the installed packages' bytecode and
without it.

Every CLI call, test subprocess, Optuna worker and Ray worker imports torch, Optuna, aihwkit,
Ray and the project before it does anything. Where ``PYTHONDONTWRITEBYTECODE=1`` is set and the
installer did not compile the packages, each such process compiles them from source again.
``[tool.uv] compile-bytecode = true`` (pyproject.toml) compiles them once, at install. The arms,
alternated in each repeat so that a change of load hits both:

* ``bare``: ``python -c pass`` (the interpreter alone, the floor);
* ``bytecode``: the imports as installed (``.pyc`` present);
* ``no bytecode``: the same imports with ``PYTHONPYCACHEPREFIX`` set to an empty folder and
  ``PYTHONDONTWRITEBYTECODE=1``, so Python finds no ``.pyc`` and compiles every module each
  time, as on an install without compiled bytecode.

    python -m bench.startup.imports --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench import RESULTS, command_line
from bench._results import markdown, publish
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

MODULES = ("torch", "optuna", "aihwkit", "ray", "nas.cli", "analog", "hw_cost", "search_spaces")
OUT = RESULTS / "startup_imports.md"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each arm")
    ap.add_argument("--out", type=Path, default=OUT, help="the results markdown ('' prints)")
    args = ap.parse_args(argv)
    if args.repeats < 1:
        raise ConfigError.one("--repeats", "must be at least 1", args.repeats,
                              "pass e.g. --repeats 5")
    return args


def arms(empty: Path) -> dict[str, tuple[str, dict[str, str]]]:
    """arm -> (the code the child runs, its environment)."""
    imports = "import " + ", ".join(MODULES)
    cold = {"PYTHONPYCACHEPREFIX": str(empty), "PYTHONDONTWRITEBYTECODE": "1"}
    return {"bare": ("pass", {}), "bytecode": (imports, {}), "no bytecode": (imports, cold)}


def one(code: str, env: dict[str, str]) -> float:
    """Wall seconds of one child process running ``code``."""
    child = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], env={**child, **env}, check=True)
    return time.perf_counter() - t0


def measure(repeats: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory(prefix="no_pyc_") as empty:
        todo = arms(Path(empty))
        one(*todo["bytecode"])  # warm the page cache once, so the first arm pays no disk read
        times: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(repeats):
            for name, (code, env) in todo.items():
                times[name].append(one(code, env))
    return times


def table(times: dict[str, list[float]]) -> list[dict[str, object]]:
    floor = statistics.median(times["bare"])
    ref = statistics.median(times["bytecode"])
    return [{"arm": name, "runs": len(t), "median s": round(statistics.median(t), 2),
             "min s": round(min(t), 2), "max s": round(max(t), 2),
             "imports s (median - bare)": round(statistics.median(t) - floor, 2),
             "x bytecode": round(statistics.median(t) / ref, 2)} for name, t in times.items()]


def render(times: dict[str, list[float]], prov: dict[str, object]) -> str:
    v = prov["versions"]
    return (f"## Start-up: import time with and without installed bytecode\n\n"
            f"Command: `{command_line()}` on {prov['device']}, git {prov['git']}, "
            f"{prov['time_utc']}; load average at the end "
            f"{' / '.join(f'{x:.2f}' for x in os.getloadavg())}. Each run is a new process "
            f"importing `{', '.join(MODULES)}`; the arms alternate within each repeat. "
            f"Versions: {json.dumps(v)}.\n\n{markdown(table(times))}\n")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    times = measure(args.repeats)
    publish(render(times, provenance("cpu")), args.out or None)


if __name__ == "__main__":
    main()
