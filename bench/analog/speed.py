"""Evaluation time of every analog hardware model on the fast path, and of aihwkit's C++ tile
for ``pcm`` and ``pcm_hwa``, as ratios to digital evaluation.

(Run as ``python -m bench.analog.speed``: ``bench.analog`` is a subpackage, so it never shadows
the project's ``analog`` package.)

Same model, same test subset, same run; each figure is the median (and min-max spread) over
``--repeats`` timed evaluations (each includes conversion, one programming and drift to ``--time``),
every path timed once per repeat in turn, and each ratio taken within a repeat.

    nice -n 10 .venv/bin/python -m bench.analog.speed --test-limit 2000 --repeats 3

``--aihwkit`` adds aihwkit's C++ tile for ``pcm`` and ``pcm_hwa`` (slow; the reference).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

import analog
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from search_spaces import get_space


def timed_interleaved(runs: dict[str, Callable[[], object]],
                      repeats: int) -> dict[str, list[float]]:
    """Seconds per call of every run, the runs taken in turn within each repeat: a host that
    speeds up or slows down over the minutes a run takes (a shared VM does) then moves every
    path alike, and the ratios stay comparable."""
    for fn in runs.values():
        fn()  # warm-up: conversion caches, allocator
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, fn in runs.items():
            start = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - start)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32")
    p.add_argument("--test-limit", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--time", default="1d")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--aihwkit", action="store_true", help="also time aihwkit's C++ tile")
    p.add_argument("--hw", default="*", help="shell pattern of analog hardware models")
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
        return lambda: analog.evaluate(model, x, y, name, times=(t,), fast=fast_path,
                                       calib=calib)

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
    print(f"{args.arch}, {len(y)} Fashion-MNIST test images, {args.threads} thread(s), "
          f"{args.repeats} repeats, drift {args.time} (1d where a model is defined only at "
          "fixed times)")
    print("| path | median s | min-max s | ratio to digital (median [min-max] per repeat) |\n"
          "|---|---|---|---|", flush=True)
    times = timed_interleaved(runs, args.repeats)
    base = times["digital"]
    for name, s in times.items():
        ratios = [a / b for a, b in zip(s, base, strict=True)]  # same repeat, minutes apart
        print(f"| {name} | {statistics.median(s):.3f} | {min(s):.3f}-{max(s):.3f} | "
              f"{statistics.median(ratios):.2f}x [{min(ratios):.2f}-{max(ratios):.2f}] |")
    prov = provenance("cpu")
    print(f"\ndevice: {prov.get('device')}; versions: {prov.get('versions')}")


if __name__ == "__main__":
    main()
