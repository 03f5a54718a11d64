"""Training throughput of ``hwnas.train.loop.fit`` vs bare hand-written PyTorch loops, same run.

    python -m bench.train.loop [--data fashion_mnist] [--space resnet --arch ...] [--steps 40]
                               [--batch-size 256] [--repeats 5] [--threads 1] [--device cpu]
                               [--out bench/results/train_loop.md]

Same model (same initial weights), same data, same batch size, same optimizer (SGD, Nesterov
momentum 0.9, weight decay 5e-4). Variants, run interleaved (one of each per repeat, so load
changes on a shared machine hit them alike):

* ``bare``: a hand-written loop over a random permutation of the in-memory tensors (NCHW);
* ``bare channels_last``: the same with model and batches in channels_last, as ``fit`` does;
* ``dataloader``: the usual hand-written loop over ``DataLoader(TensorDataset, shuffle=True)``;
* ``fit no-aug``: ``fit`` without augmentation (what the framework adds: schedule, loss checks);
* ``fit``: ``fit`` as used, with the data set's on-device augmentation (random translate, flip).

``fit`` reports its own training images/s (evaluation excluded); the bare loops are timed from the
first batch to the last step. Each call's process CPU time is also recorded: with one thread,
images per CPU-second hardly moves when other jobs load the machine. Prints median, p10-p90 and
the ratio of medians to ``bare``; the order of the variants rotates each repeat.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from bench._results import publish
from hwnas.common.provenance import device_name, git_revision, versions
from hwnas.train.data import DataSplits, load_data
from hwnas.train.loop import FitConfig, fit
from search_spaces import get_space


def _sgd(model: nn.Module, lr: float) -> torch.optim.Optimizer:
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True,
                           weight_decay=5e-4)


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def bare_loop(channels_last: bool) -> Callable[..., float]:
    def run(model: nn.Module, data: DataSplits, steps: int, bs: int, device: str) -> float:
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        model.to(device, memory_format=fmt).train()
        x, y = data.x_train.to(device), data.y_train.to(device)
        opt = _sgd(model, 0.05)
        _sync(device)
        start, done = time.perf_counter(), 0
        while done < steps:
            perm = torch.randperm(len(y), device=device)
            for i in range(0, len(y) - bs + 1, bs):
                idx = perm[i:i + bs]
                loss = F.cross_entropy(model(x[idx].contiguous(memory_format=fmt)), y[idx])
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                done += 1
                if done == steps:
                    break
        _sync(device)
        return steps * bs / (time.perf_counter() - start)

    return run


def dataloader_loop(model: nn.Module, data: DataSplits, steps: int, bs: int, device: str) -> float:
    from torch.utils.data import DataLoader, TensorDataset

    model.to(device).train()
    loader = DataLoader(TensorDataset(data.x_train, data.y_train), batch_size=bs, shuffle=True,
                        drop_last=True)
    opt = _sgd(model, 0.05)
    _sync(device)
    start, done = time.perf_counter(), 0
    while done < steps:
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb.to(device)), yb.to(device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done += 1
            if done == steps:
                break
    _sync(device)
    return steps * bs / (time.perf_counter() - start)


def fit_loop(augment: bool) -> Callable[..., float]:
    def run(model: nn.Module, data: DataSplits, steps: int, bs: int, device: str) -> float:
        cfg = FitConfig(steps=steps, batch_size=bs, lr=0.05, augment=augment, device=device)
        return fit(model, data, cfg).images_per_s

    return run


VARIANTS = {"bare": bare_loop(False), "bare channels_last": bare_loop(True),
            "dataloader": dataloader_loop, "fit no-aug": fit_loop(False), "fit": fit_loop(True)}


def measure(args: argparse.Namespace) -> dict[str, dict[str, list[float]]]:
    data = load_data(args.data, train_limit=args.train_limit, val_fraction=0.02)
    torch.manual_seed(0)
    base = get_space(args.space).build(args.arch, in_chans=data.in_chans,
                                       num_classes=data.num_classes, img_size=data.img_size)
    rates = {k: {"wall": [], "cpu": []} for k in VARIANTS}
    names = list(VARIANTS)
    for rep in range(args.repeats + 1):  # repeat 0 warms caches and kernels; not counted
        # Rotate the order each repeat, so no variant always runs first or last.
        for name in names[rep % len(names):] + names[:rep % len(names)]:
            cpu0 = time.process_time()
            rate = VARIANTS[name](copy.deepcopy(base), data, args.steps, args.batch_size,
                                  args.device)
            cpu = time.process_time() - cpu0
            if rep > 0:
                rates[name]["wall"].append(rate)
                rates[name]["cpu"].append(args.steps * args.batch_size / cpu)
        if rep > 0:
            print(f"repeat {rep}: " + "  ".join(f"{k} {v['wall'][-1]:,.0f}"
                                                for k, v in rates.items()), flush=True)
    return rates


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def report(args: argparse.Namespace, rates: dict[str, dict[str, list[float]]]) -> str:
    ref = {k: statistics.median(rates["bare"][k]) for k in ("wall", "cpu")}
    lines = [
        "## Training loop throughput: `fit` vs a bare PyTorch loop",
        "",
        f"Command: `python -m bench.train.loop --data {args.data} --space {args.space} "
        f"--arch {args.arch} --steps {args.steps} --batch-size {args.batch_size} "
        f"--repeats {args.repeats} --threads {args.threads} --device {args.device}`",
        f"Device: {device_name(args.device)}; git {git_revision()}; "
        f"torch {versions()['torch']}",
        "",
        "| loop | images/s, median | p10-p90 | ratio | images per CPU-s, median | p10-p90 "
        "| ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, vals in rates.items():
        cells = []
        for kind in ("wall", "cpu"):
            v = vals[kind]
            med = statistics.median(v)
            cells.append(f"{med:,.0f} | {_pct(v, 0.1):,.0f}-{_pct(v, 0.9):,.0f} | "
                         f"{med / ref[kind]:.2f}")
        lines.append(f"| {name} | {' | '.join(cells)} |")
    lines += ["", "Ratios are to `bare` (medians). images/s: wall clock, training steps only "
              "(as `fit` reports it). Images per CPU-second: process CPU time of the whole call "
              "(set-up and the small validation pass included), steadier than wall time when "
              "other jobs share the cores (one thread)."]
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="fashion_mnist")
    p.add_argument("--train-limit", type=int, default=10000)
    p.add_argument("--space", default="resnet")
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32-d1r1c64")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="also write the markdown table here")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    text = report(args, measure(args))
    publish(text, args.out)


if __name__ == "__main__":
    main()
