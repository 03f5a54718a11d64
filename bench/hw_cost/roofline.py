"""Roofline ceilings of this device and where candidates of each space sit under them.

Ceilings (best matmul FLOP/s over several sizes, copy bytes/s in L2, in the LLC and in DRAM,
each warmed up and best of its calls) are measured ``--repeats`` times per dtype and thread
count, reported as median and spread, and compared as ratios. Then one mid-size candidate per
space is placed at batch 1 and at ``--big-batch``: arithmetic intensity, attained FLOP/s, share
of the roof reached (must be <= 100%), the memory level holding its working set and the ceiling
that binds.

    python -m bench.hw_cost.roofline --threads 1 2 --dtypes fp32 bf16
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

from bench import RESULTS
from bench.hw_cost.forms import arch_of  # one mid-size candidate per space

SPACES = ("mbconv", "resnet", "vit")


def ceilings_table(args: argparse.Namespace) -> tuple[list[str], dict]:
    from hw_cost.roofline import measure_ceilings

    lines = ["| dtype | threads | peak GFLOP/s (median, min-max) | DRAM GB/s (median, min-max) |"
             " L2 GB/s | LLC GB/s | DRAM ridge FLOP/B |", "|---|---|---|---|---|---|---|"]
    found = {}
    for dtype in args.dtypes:
        for threads in args.threads:
            runs = [measure_ceilings(dtype=dtype, threads=threads) for _ in range(args.repeats)]
            fl = [c.peak_flops / 1e9 for c in runs]
            bw = [c.peak_bytes_per_s / 1e9 for c in runs]
            found[(dtype, threads)] = (statistics.median(fl), statistics.median(bw))
            level = {k: statistics.median(c.cache_bytes_per_s.get(k, float("nan")) / 1e9
                                          for c in runs) for k in ("L2", "LLC")}
            lines.append(f"| {dtype} | {threads} | {statistics.median(fl):.1f} ({min(fl):.1f}-"
                         f"{max(fl):.1f}) | {statistics.median(bw):.2f} ({min(bw):.2f}-"
                         f"{max(bw):.2f}) | {level['L2']:.1f} | {level['LLC']:.1f} | "
                         f"{statistics.median(fl) / statistics.median(bw):.1f} |")
    base = found[(args.dtypes[0], args.threads[0])]
    lines += ["", "Ratios to the first row (FLOP/s, bytes/s): " + "; ".join(
        f"{d}/{t} threads: {f / base[0]:.2f}x, {b / base[1]:.2f}x"
        for (d, t), (f, b) in found.items())]
    return lines, found


def placement_table(args: argparse.Namespace, cache) -> list[str]:
    from hw_cost import MeasureSpec
    from hw_cost.api import cost_of

    lines = ["| space | batch | latency ms | GFLOP/s attained | intensity FLOP/B | roof share |"
             " working set in | binding ceiling |", "|---|---|---|---|---|---|---|---|"]
    for space in SPACES:
        arch = arch_of(space)
        for batch in (1, args.big_batch):
            spec = MeasureSpec(batch_size=batch, threads=args.threads[0],
                               max_seconds=args.max_seconds)
            r = cost_of(space, arch, input_shape=args.shape, num_classes=10, spec=spec,
                        cache=cache, refresh=True)
            lines.append(f"| {space} | {batch} | {r['latency_ms']:.3f} | "
                         f"{r['attained_flops'] / 1e9:.2f} | {r['arithmetic_intensity']:.1f} | "
                         f"{r['roof_fraction']:.1%} | {r['memory_level']} | {r['ceiling']} |")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtypes", nargs="+", default=["fp32", "bf16"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--big-batch", type=int, default=32)
    p.add_argument("--input-shape", default="1,28,28")
    p.add_argument("--max-seconds", type=float, default=5.0)
    p.add_argument("--cache", default=None)
    p.add_argument("--out", default=str(RESULTS / "hw_cost_roofline.md"))
    args = p.parse_args()
    args.shape = tuple(int(d) for d in args.input_shape.split(","))

    from hw_cost.cache import CostCache
    from hwnas.common.provenance import cpu_model, versions

    before = os.getloadavg()[0]
    ceil_lines, _ = ceilings_table(args)
    place_lines = placement_table(args, CostCache(args.cache))
    text = "\n".join([
        "## hw_cost: roofline ceilings and placement", "",
        f"Command: `python -m bench.hw_cost.roofline --dtypes {' '.join(args.dtypes)} --threads "
        f"{' '.join(map(str, args.threads))} --repeats {args.repeats}`", "",
        f"Device: {cpu_model()}; torch {versions()['torch']}; load average (1 min) before/after "
        f"{before:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", "",
        *ceil_lines, "",
        f"Placement (input {args.shape}, fp32, {args.threads[0]} thread(s); bytes = weights + "
        "activations written and read once):", "", *place_lines, ""])
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
