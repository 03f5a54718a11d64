"""Fashion-MNIST with a small dense ResNet from the `resnet` space, through the real CLI.

    python -m bench.train.fmnist [--seeds 0] [--epochs 8] [--threads 1] [--arch ...]
                                 [--out bench/results/fmnist_train.md]

Runs the exact command below once per seed in a fresh process, and reports test accuracy
(10,000 test images), wall time of the whole command (start-up, data loading, training,
per-epoch validation, test), its CPU time, and the training images/s that ``fit`` measured.
The target is >= 91% test accuracy within 10 minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._results import publish
from hwnas.common.provenance import cpu_model, git_revision, versions

ARCH = "rn:s16-d1r1c16-d1r1c32-d1r1c64"
RECIPE = ["--data", "fashion_mnist", "--batch-size", "256", "--lr", "0.2",
          "--label-smoothing", "0.1", "--warmup-epochs", "0.5"]


def command(args: argparse.Namespace, seed: int) -> list[str]:
    hwnas = str(Path(sys.executable).with_name("hwnas"))
    return [hwnas, "train", "resnet", args.arch, "--epochs", str(args.epochs), *RECIPE,
            "--threads", str(args.threads), "--seed", str(seed)]


def run_one(cmd: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run([*cmd, "--json", str(out)], check=True)
        wall = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = json.loads(out.read_text())
    result["command_wall_s"] = wall
    result["command_cpu_s"] = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return result


def _spread(values: list[float], fmt: str) -> str:
    if len(values) == 1:
        return format(values[0], fmt)
    return f"{format(statistics.mean(values), fmt)} +- {format(statistics.stdev(values), fmt)}"


def report(args: argparse.Namespace, results: list[dict]) -> str:
    shown = shlex.join(["hwnas", *command(args, args.seeds[0])[1:]])
    accs = [r["test_acc"] * 100 for r in results]
    walls = [r["command_wall_s"] for r in results]
    cpus = [r["command_cpu_s"] for r in results]
    rates = [r["fit"]["images_per_s"] for r in results]
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    return "\n".join([
        "## Fashion-MNIST with `hwnas train` (resnet space)",
        "",
        f"Command: `{shown}` (seeds {args.seeds})",
        f"Device: {cpu_model()}, {args.threads} torch thread(s); git {git_revision()}; "
        f"torch {versions()['torch']}; load average after the run {' '.join(load)}",
        "",
        "| seeds | params | test acc % | wall s (whole command) | CPU s | train images/s |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {len(results)} | {results[0]['params']:,} | {_spread(accs, '.2f')} | "
        f"{_spread(walls, '.0f')} | {_spread(cpus, '.0f')} | {_spread(rates, ',.0f')} |",
        "",
        "Per seed: " + ", ".join(f"seed {s}: {a:.2f}% in {w:.0f} s"
                                 for s, a, w in zip(args.seeds, accs, walls, strict=True)),
    ]) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--epochs", type=float, default=8)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--arch", default=ARCH)
    p.add_argument("--out", default=None, help="also write the markdown snippet here")
    args = p.parse_args()
    results = [run_one(command(args, seed)) for seed in args.seeds]
    text = report(args, results)
    publish(text, args.out)


if __name__ == "__main__":
    main()
