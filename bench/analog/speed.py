"""Evaluation time of every analog hardware model on the fast path, and of aihwkit's C++ tile
for ``pcm`` and ``pcm_hwa``, as ratios to digital evaluation.

(Run as ``python -m bench.analog.speed``: ``bench.analog`` is a subpackage, so it never shadows
the project's ``analog`` package.)

Same model, same test subset, same run; each figure is the median (and min-max spread) over
``--repeats`` timed evaluations (each includes conversion, one programming and drift to ``--time``),
every path timed once per repeat in turn, and each ratio taken within a repeat.

    nice -n 10 .venv/bin/python -m bench.analog.speed --test-limit 2000 --repeats 3

``--aihwkit`` adds aihwkit's C++ tile for ``pcm`` and ``pcm_hwa`` (slow; the reference).
Besides wall time, each call's CPU time (``time.thread_time``) is taken: on a shared host a
neighbour slows the wall clock of whatever runs, but the work a path does shows in its CPU time.
The table goes to the ``speed`` block of ``bench/results/analog_depth.md`` (``--out``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch

import analog
from bench import RESULTS, command_line
from bench._results import replace_section
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from search_spaces import get_space


def timed_interleaved(runs: dict[str, Callable[[], object]], repeats: int
                      ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Wall and CPU seconds per call of every run, the runs taken in turn within each repeat: a
    host that speeds up or slows down over the minutes a run takes (a shared VM does) then moves
    every path alike, and the ratios stay comparable."""
    for fn in runs.values():
        fn()  # warm-up: conversion caches, allocator
    wall: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start, start_cpu = time.perf_counter(), time.thread_time()
            fn()
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.thread_time() - start_cpu)
    return wall, cpu


def _ratios(times: list[float], base: list[float]) -> str:
    ratios = [a / b for a, b in zip(times, base, strict=True)]  # same repeat, minutes apart
    return f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}]"


def table(wall: dict[str, list[float]], cpu: dict[str, list[float]]) -> list[str]:
    lines = ["| path | median s | min-max s | ratio to digital (median [min-max] per repeat) "
             "| CPU s | CPU-time ratio to digital |", "|---|---|---|---|---|---|"]
    for name, s in wall.items():
        lines.append(f"| {name} | {statistics.median(s):.3f} | {min(s):.3f}-{max(s):.3f} | "
                     f"{_ratios(s, wall['digital'])} | {statistics.median(cpu[name]):.3f} | "
                     f"{_ratios(cpu[name], cpu['digital'])} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32")
    p.add_argument("--test-limit", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--time", default="1d")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--aihwkit", action="store_true", help="also time aihwkit's C++ tile")
    p.add_argument("--hw", default="*", help="shell pattern of analog hardware models")
    p.add_argument("--out", default=str(RESULTS / "analog_depth.md"),
                   help="results file whose speed block is rewritten ('' prints only)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = load_data("fashion_mnist", test_limit=args.test_limit, train_limit=1000)
    model = get_space("resnet").build(args.arch, in_chans=data.in_chans,
                                      num_classes=data.num_classes, img_size=data.img_size).eval()
    x, y = data.x_test, data.y_test
    calib = data.x_train[:512]

    def fast(name: str, fast_path: bool = True):
        hw = analog.get_hw(name)
        t = args.time if hw.times is None or analog.parse_time(args.time) in hw.times else "1d"
        protocol = analog.ScoringProtocol(times=(t,), fast=fast_path, adabs=0)  # no AdaBS
        return lambda: analog.evaluate(model, x, y, name, protocol, calib=calib)

    def bare() -> None:  # the floor: torch's own inference loop, no hwnas code
        with torch.inference_mode():
            for i in range(0, len(x), 500):
                model(x[i:i + 500])

    runs = {"digital": lambda: analog.evaluate(model, x, y, "digital"),
            "bare torch loop (digital, batches of 500)": bare}
    names = [n for n in analog.list_hw(args.hw) if analog.get_hw(n).kind == "analog"]
    runs.update({f"fast path, {name}": fast(name) for name in names})
    if args.aihwkit:
        runs.update({f"aihwkit C++ tile, {name}": fast(name, False)
                     for name in ("pcm", "pcm_hwa")})
    load_before = os.getloadavg()[0]
    wall, cpu = timed_interleaved(runs, args.repeats)
    load_after = os.getloadavg()[0]
    prov = provenance("cpu")
    lines = ["## Evaluation time: every analog hardware model on the fast path, as a ratio to "
             "digital", "", f"Command: `{command_line()}` ({prov.get('time_utc')}, git "
             f"{prov.get('git')}; load average (1 min) before/after {load_before:.2f} / "
             f"{load_after:.2f} on {os.cpu_count()} cores). Each timed evaluation includes "
             "conversion, input-range calibration, one programming and drift; every path is "
             "timed once per repeat in turn and each ratio is taken within its repeat.", "",
             f"{args.arch}, {len(y)} Fashion-MNIST test images, {args.threads} thread(s), "
             f"{args.repeats} repeats, drift {args.time} (1d where a model is defined only at "
             "fixed times)", "", *table(wall, cpu), "",
             f"device: {prov.get('device')}; versions: {prov.get('versions')}"]
    text = "\n".join(lines)
    print(text)
    if args.out:
        replace_section(Path(args.out), "speed", text)


if __name__ == "__main__":
    main()
