"""Search-space costs: model build time, param/MAC counting (meta device vs real CPU model) and
training throughput of each space's example arch.

    python -m bench.search.spaces [--archs 12] [--repeats 5] [--threads 1] \
        [--out bench/results/search_spaces.md]

Prints median and spread (p10-p90 over archs or repeats), device and versions, and the ratio of
the two counting paths measured in the same run.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from bench._results import markdown, publish
from hwnas.common.provenance import device_name, versions
from search_spaces import get_space, list_spaces
from search_spaces.stats import count_params_macs, meta_stats

SHAPE = (1, 28, 28)  # Fashion-MNIST


def timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def spread(xs: list[float]) -> str:
    xs = sorted(xs)
    p10, p90 = xs[int(0.1 * (len(xs) - 1))], xs[int(round(0.9 * (len(xs) - 1)))]
    return f"{statistics.median(xs):.1f} ({p10:.1f}-{p90:.1f})"


def build(space, arch: str):
    return space.build(arch, in_chans=SHAPE[0], num_classes=10, img_size=SHAPE[1])


def counting_row(name: str, n: int) -> dict[str, object]:
    space, rng = get_space(name), random.Random(0)
    archs = [space.random_arch(rng) for _ in range(n)]
    build_ms, cpu_ms, meta_ms = [], [], []
    for arch in archs:
        build_ms.append(timed(lambda a=arch: build(space, a)))
        cpu_ms.append(timed(lambda a=arch: count_params_macs(build(space, a), SHAPE)))
        meta_ms.append(timed(lambda a=arch: meta_stats(space, a, SHAPE, 10)))
    ratio = statistics.median(m / c for m, c in zip(meta_ms, cpu_ms, strict=True))
    return {"space": name, "build_ms": spread(build_ms), "cpu_count_ms": spread(cpu_ms),
            "meta_count_ms": spread(meta_ms), "meta/cpu": f"{ratio:.2f}"}


def throughput_row(name: str, repeats: int, batch: int = 128) -> dict[str, object]:
    space = get_space(name)
    arch = space.example
    torch.manual_seed(0)
    model = build(space, arch).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = torch.randn(batch, *SHAPE), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        opt.step()

    step()  # warm-up
    rates = [batch / (timed(step) / 1e3) for _ in range(repeats)]
    params, macs = count_params_macs(model, SHAPE)
    return {"space": name, "arch": arch, "params": params, "MMACs": round(macs / 1e6, 1),
            "train img/s": spread(rates)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", type=int, default=12, help="random archs per space (counting)")
    ap.add_argument("--repeats", type=int, default=5, help="timed training steps per space")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--out", type=Path, default=None, help="also write a markdown snippet here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    head = (f"device: {device_name('cpu')}; torch {versions()['torch']}, timm "
            f"{versions()['timm']}; input {'x'.join(map(str, SHAPE))}")
    count = markdown([counting_row(n, args.archs) for n in list_spaces()])
    train = markdown([throughput_row(n, args.repeats) for n in list_spaces()])
    text = (f"{head}\n\nBuild and count, median (p10-p90) over {args.archs} seeded random archs "
            f"per space, ms; meta/cpu = median per-arch ratio of the two counting paths "
            f"(build included in both):\n\n{count}\n\nTraining step (SGD, batch 128, "
            f"fp32), images/s median (p10-p90) over {args.repeats} steps:\n\n{train}\n")
    command = (f"python -m bench.search.spaces --archs {args.archs} --repeats {args.repeats} "
               f"--threads {args.threads}")
    publish(f"## Search spaces: build, count and train-step cost\n\ncommand: `{command}`\n\n"
            f"{text}", args.out)


if __name__ == "__main__":
    main()
