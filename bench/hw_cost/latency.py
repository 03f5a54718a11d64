"""Latency repeatability: one mid-size candidate measured in fresh processes, against the floor.

Each run starts a new Python process that builds the candidate and calls ``hw_cost.cost_of``
(no cache hit: ``refresh=True``), so every run pays its own warm-up, allocator and thread-pool
start, as a search worker does. Reported: the median latency of each run, the coefficient of
variation (CV) of those medians (target <= 3% on an idle CPU, <= 1% on a GPU), the spread within
runs, the time spent measuring one candidate (timing alone and the whole ``cost_of``), and the
load average before and after (other processes on the machine inflate every figure).

The floor: each round also starts a fresh process that times the same model with a bare
``perf_counter`` loop (warm-up, then ``--bare-seconds`` of calls, median; no hw_cost). The
CV of its medians is what this machine allows from one fresh process to the next; the goal
for ``cost_of`` is a CV at most 1.2x that floor, measured in the same run (the ratio column).

    python -m bench.hw_cost.latency                        # 10 runs, mbconv mid-size, 1 thread, CPU
    python -m bench.hw_cost.latency --device cuda --runs 10
    python -m bench.hw_cost.latency --runs 30 --min-seconds 0,5,10   # settings alternate, one run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench import RESULTS, ROOT

MODULE = "bench.hw_cost.latency"  # its fresh processes run this module
WINDOW = 10  # runs per block: the repeatability target is over 10 fresh processes
MID_SIZE = {
    "mbconv": "mb:hs-s16-k3e3c16d2-k5e4c24d2se-k3e4c40d3-k5e6c64d3se-k5e6c96d2se",
    "resnet": "rn:s24-d2r2c32-d2r2c64-d2r1c96-d1r2c128",
}


def child(args: argparse.Namespace) -> None:
    import search_spaces  # noqa: F401  imported before the clock: a search worker has it loaded
    from hw_cost import MeasureSpec, cost_of

    start = time.perf_counter()
    spec = MeasureSpec(device=args.device, batch_size=args.batch, dtype=args.dtype,
                       threads=args.threads, max_seconds=args.max_seconds,
                       min_seconds=args.min_seconds, clock=args.clock)
    r = cost_of(args.space, args.arch, input_shape=args.shape, num_classes=10, spec=spec,
                cache=args.cache, refresh=True)
    print(json.dumps({"median_ms": r["latency_ms"], "cv": r["latency_cv"],
                      "p10_ms": r["latency_p10_ms"], "p90_ms": r["latency_p90_ms"],
                      "repeats": r["latency_repeats"], "stable": r["latency_stable"],
                      "timing_s": r["latency_seconds"], "cost_of_s": time.perf_counter() - start,
                      "device": r["provenance"]["device"], "versions": r["provenance"]["versions"],
                      "git": r["provenance"]["git"]}))


def bare(args: argparse.Namespace) -> None:
    """The floor: the same model timed by a plain loop in a fresh process."""
    import numpy as np
    import torch

    from search_spaces import get_space

    torch.set_num_threads(args.threads)
    model = get_space(args.space).build(args.arch, in_chans=args.shape[0], num_classes=10,
                                        img_size=args.shape[1]).eval()
    x = torch.randn(args.batch, *args.shape)
    times = []
    with torch.inference_mode():
        end = time.perf_counter() + 0.3
        while time.perf_counter() < end:
            model(x)
        end = time.perf_counter() + args.bare_seconds
        while time.perf_counter() < end:
            start = time.perf_counter_ns()
            model(x)
            times.append((time.perf_counter_ns() - start) / 1e6)
    t = np.asarray(times)
    print(json.dumps({"median_ms": float(np.median(t)), "cv": float(t.std() / t.mean()),
                      "p10_ms": float(np.percentile(t, 10)), "p90_ms": float(np.percentile(t, 90)),
                      "repeats": len(t), "stable": True, "timing_s": args.bare_seconds,
                      "cost_of_s": args.bare_seconds}))


def run_bare(args: argparse.Namespace) -> dict:
    cmd = [sys.executable, "-m", MODULE, "--bare", "--space", args.space, "--arch", args.arch,
           "--input-shape", ",".join(map(str, args.shape)), "--batch", str(args.batch),
           "--threads", str(args.threads), "--bare-seconds", str(args.bare_seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_fresh(args: argparse.Namespace, cache: str, min_seconds: float) -> dict:
    cmd = [sys.executable, "-m", MODULE, "--child", "--space", args.space, "--arch", args.arch,
           "--input-shape", ",".join(map(str, args.shape)), "--device", args.device,
           "--batch", str(args.batch), "--dtype", args.dtype, "--threads", str(args.threads),
           "--max-seconds", str(args.max_seconds), "--cache", cache, "--clock", args.clock,
           "--min-seconds", str(min_seconds)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


def window_cvs(medians: np.ndarray) -> list[float]:
    """CV of each block of ``WINDOW`` consecutive runs: the 10-process repeatability figure, taken
    several times from one long run. A long run also spans the minutes-long speed steps of a
    shared host, which the whole-run CV includes and the blocks mostly do not."""
    blocks = [medians[i:i + WINDOW] for i in range(0, len(medians) - WINDOW + 1, WINDOW)]
    return [float(b.std() / b.mean()) for b in blocks]


def successive_cv(medians: np.ndarray) -> float:
    """Run-to-run CV from successive differences (von Neumann): slow drift of the host over the
    run cancels in each difference, so this is the spread from one fresh process to the next."""
    d = np.diff(medians)
    return float(np.sqrt(np.mean(d ** 2) / 2) / medians.mean()) if len(d) else float("nan")


def stats(runs: list[dict]) -> dict[str, object]:
    med = np.array([r["median_ms"] for r in runs])
    return {"cv": float(med.std() / med.mean()), "windows": window_cvs(med),
            "successive": successive_cv(med), "median": float(np.median(med)),
            "spread": float(med.max() / med.min()),
            "timing": float(np.median([r["timing_s"] for r in runs])),
            "whole": float(np.median([r["cost_of_s"] for r in runs]))}


def table(runs: list[dict]) -> list[str]:
    lines = ["| run | median ms | p10 ms | p90 ms | CV within run | repeats | stable | timing s |"
             " cost_of s |", "|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(runs, 1):
        lines.append(f"| {i} | {r['median_ms']:.3f} | {r['p10_ms']:.3f} | {r['p90_ms']:.3f} | "
                     f"{r['cv']:.1%} | {r['repeats']} | {r['stable']} | {r['timing_s']:.2f} | "
                     f"{r['cost_of_s']:.2f} |")
    return lines


def summary(settings: list[float], by: dict[float, list[dict]],
            floor: list[dict]) -> list[str]:
    lines = ["| timing | CV of medians | x floor CV | CV of each 10 runs | run-to-run CV "
             "(successive) | x floor | median ms | max/min | timing s | whole s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    ref = stats(floor)
    for name, runs in [("bare loop (floor)", floor),
                       *((f"cost_of, min_seconds {m:g}", by[m]) for m in settings)]:
        st = stats(runs)
        blocks = ", ".join(f"{w:.2%}" for w in st["windows"]) or "-"
        lines.append(f"| {name} | **{st['cv']:.2%}** | **{st['cv'] / ref['cv']:.2f}** | "
                     f"{blocks} | {st['successive']:.2%} | "
                     f"{st['successive'] / ref['successive']:.2f} | {st['median']:.3f} | "
                     f"{st['spread']:.3f} | {st['timing']:.2f} | {st['whole']:.2f} |")
    return lines


def report(args: argparse.Namespace, by: dict[float, list[dict]], floor: list[dict],
           load: tuple[float, float]) -> str:
    first = next(iter(by.values()))[0]
    lines = [
        "## hw_cost: latency repeatability (fresh processes)", "",
        f"Command: `python -m bench.hw_cost.latency --space {args.space} --runs {args.runs} "
        f"--threads {args.threads} --device {args.device} --clock {args.clock} "
        f"--min-seconds {','.join(f'{m:g}' for m in args.settings)} --bare-seconds "
        f"{args.bare_seconds:g}`", "",
        f"Device: {first['device']}; torch {first['versions']['torch']}; git {first['git']}",
        f"Candidate: `{args.arch}` ({args.space}), input {args.shape}, batch {args.batch}, "
        f"{args.dtype}, {args.threads} thread(s)",
        f"Load average (1 min) before/after: {load[0]:.2f} / {load[1]:.2f} on {os.cpu_count()} "
        "cores",
        f"Each round runs one fresh bare-loop process (the floor) and one fresh `cost_of` "
        f"process per `min_seconds` setting, in turn, so all share the host's state; "
        f"'x floor' is a CV divided by the bare loop's CV of the same run (goal <= 1.2). CV of "
        f"each {WINDOW} runs is the 10-process repeatability figure, taken several times; the "
        "successive-difference CV leaves out drift slower than a run.",
        "", *summary(args.settings, by, floor), ""]
    for m in args.settings:
        lines += [f"### min_seconds = {m:g}", "", *table(by[m]), ""]
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--space", default="mbconv", choices=sorted(MID_SIZE))
    p.add_argument("--arch", default=None)
    p.add_argument("--runs", type=int, default=10, help="fresh processes per setting")
    p.add_argument("--input-shape", default="1,28,28")
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", default="fp32")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=15.0)
    p.add_argument("--min-seconds", default="0",
                   help="comma-separated minimum timing per run; several are compared in turn")
    p.add_argument("--clock", default="wall", help="wall or thread (CPU time, 1 thread)")
    p.add_argument("--cache", default=None)
    p.add_argument("--out", default=str(RESULTS / "hw_cost_latency.md"))
    p.add_argument("--bare-seconds", type=float, default=2.0,
                   help="timing of the bare-loop floor per fresh process (default 2)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--bare", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.arch = args.arch or MID_SIZE[args.space]
    args.shape = tuple(int(d) for d in args.input_shape.split(","))
    args.settings = [float(m) for m in args.min_seconds.split(",")]
    if args.child:
        args.min_seconds = args.settings[0]
        child(args)
        return
    if args.bare:
        bare(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.cache or str(Path(tmp) / "costs.db")  # ceilings measured once, reused
        before = os.getloadavg()[0]
        by: dict[float, list[dict]] = {m: [] for m in args.settings}
        floor: list[dict] = []
        for i in range(args.runs):
            floor.append(run_bare(args))
            print(f"run {i + 1}, bare loop: {floor[-1]['median_ms']:.3f} ms", flush=True)
            for m in args.settings:
                by[m].append(run_fresh(args, cache, m))
                print(f"run {i + 1}, min_seconds {m:g}: {by[m][-1]['median_ms']:.3f} ms",
                      flush=True)
        text = report(args, by, floor, (before, os.getloadavg()[0]))
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
