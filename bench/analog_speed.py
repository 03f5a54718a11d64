"""Evaluation time on ``pcm``: aihwkit C++ tile, aihwkit torch tile and the fast path vs digital.

(Named analog_speed.py, not analog.py: a script in bench/ named analog.py would shadow the
``analog`` package when run as ``python bench/<script>``.)

Same model, same test subset, same run; each figure is the median (and min-max spread) over
``--repeats`` timed evaluations (each includes conversion, one programming and drift to ``--time``).

    nice -n 10 .venv/bin/python bench/analog_speed.py --test-limit 2000 --repeats 3
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


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    fn()  # warm-up: conversion caches, allocator
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32")
    p.add_argument("--test-limit", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--time", default="1d")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    data = load_data("fashion_mnist", test_limit=args.test_limit, train_limit=1000)
    model = get_space("resnet").build(args.arch, in_chans=data.in_chans,
                                      num_classes=data.num_classes, img_size=data.img_size).eval()
    x, y = data.x_test, data.y_test
    runs = {
        "digital": lambda: analog.evaluate(model, x, y, "digital"),
        "aihwkit C++ tile": lambda: analog.evaluate(model, x, y, "pcm", times=(args.time,),
                                                    fast=False),
        "aihwkit torch tile": lambda: analog.evaluate(model, x, y, "pcm", times=(args.time,),
                                                      fast=False, options={"tile": "torch"}),
        "fast path": lambda: analog.evaluate(model, x, y, "pcm", times=(args.time,), fast=True),
    }
    secs = {name: timed(fn, args.repeats) for name, fn in runs.items()}
    base = statistics.median(secs["digital"])
    print(f"{args.arch}, {len(y)} Fashion-MNIST test images, {args.threads} thread(s), "
          f"{args.repeats} repeats, drift {args.time}")
    print("| path | median s | min-max s | ratio to digital |\n|---|---|---|---|")
    for name, s in secs.items():
        print(f"| {name} | {statistics.median(s):.3f} | {min(s):.3f}-{max(s):.3f} | "
              f"{statistics.median(s) / base:.2f}x |")
    prov = provenance("cpu")
    print(f"\ndevice: {prov.get('device')}; versions: {prov.get('versions')}")


if __name__ == "__main__":
    main()
