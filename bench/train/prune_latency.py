"""Structured pruning: what a channel ratio buys per space, and a latency-budget run.

    python -m bench.train.prune_latency [--ratios 0.1 0.3 0.5 0.7] [--budget-frac 0.5] [--threads 1]
                                  [--repeats 5] [--out bench/results/finalize.md]

1. For one mid-size member of every registered space (28x28x1 input, 10 classes): params, MACs
   and measured latency (batch 1, fp32, fixed threads) after pruning at each ratio, as fractions
   of the unpruned model, next to the (1 - r)^2 that a uniform channel ratio predicts.
2. A latency-budget run on a ``resnet`` model: budget = ``budget-frac`` x its measured latency;
   ``compress.prune`` prunes in steps and re-measures until under budget. The final model is then
   measured ``repeats`` more times from scratch to check that it is under budget (median, spread).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

from bench import RESULTS
from bench._results import replace_section
from hw_cost import MeasureSpec, measure_latency, static_costs
from hwnas.common.provenance import device_name, git_revision, versions
from hwnas.compress.prune import PruneConfig, prune
from search_spaces import get_space, list_spaces

SHAPE = (1, 28, 28)
ARCHS = {"mbconv": "mb:hs-s16-k3e3c16d1se-k5e4c24d2-k5e4c40d2se-k3e6c64d2-k5e6c96d2se",
         "nb201": "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|skip_connect~0|"
                  "nor_conv_3x3~1|avg_pool_3x3~2|",
         "resnet": "rn:s32-d1r2c48-d2r2c96-d1r1c128",
         "vit": "vit:p4-e128-d4-h4-m2"}
BUDGET_ARCH = "rn:s32-d1r2c48-d2r2c96-d1r1c128"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ratios", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7])
    p.add_argument("--budget-frac", type=float, default=0.5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=2.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--out", default=str(RESULTS / "finalize.md"))
    return p.parse_args()


def build(space: str, arch: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return get_space(space).build(arch, in_chans=1, num_classes=10, img_size=SHAPE[-1])


def measure(lat: MeasureSpec | None = None) -> Callable[[torch.nn.Module], dict[str, float]]:
    """What pruning re-measures after each step: params and MACs, and with ``lat`` (latency
    settings) the median latency, which a latency budget needs."""

    def costs(model: torch.nn.Module) -> dict[str, float]:
        static = static_costs(model, SHAPE)
        out = {"params": float(static["params"]), "macs": float(static["macs"])}
        if lat is not None:
            out["latency_ms"] = measure_latency(model, SHAPE, lat).median_ms
        return out

    return costs


def ratio_table(args: argparse.Namespace, lat: MeasureSpec) -> list[str]:
    lines = ["| space | arch | r | (1-r)^2 | params | MACs | latency (ms, median) | "
             "latency / unpruned |", "|---|---|---|---|---|---|---|---|"]
    for space in list_spaces():
        arch = ARCHS.get(space)
        if arch is None:
            continue
        base = measure_latency(build(space, arch), SHAPE, lat).median_ms
        for r in args.ratios:
            res = prune(build(space, arch), SHAPE, PruneConfig(ratio=r), measure=measure())
            ms = measure_latency(res.model, SHAPE, lat).median_ms
            lines.append(f"| {space} | `{arch}` | {r} | {(1 - r) ** 2:.3f} | "
                         f"{res.after.params / res.before.params:.3f} | "
                         f"{res.after.macs / res.before.macs:.3f} | {ms:.3f} | "
                         f"{ms / base:.3f} |")
            print(lines[-1], flush=True)
    return lines


def budget_run(args: argparse.Namespace, lat: MeasureSpec) -> list[str]:
    model = build("resnet", BUDGET_ARCH)
    base = measure_latency(model, SHAPE, lat).median_ms
    budget = args.budget_frac * base
    res = prune(model, SHAPE, PruneConfig(latency_budget_ms=budget, step=0.05),
                measure=measure(lat))
    lines = [f"Budget run: `resnet` `{BUDGET_ARCH}`, unpruned {base:.3f} ms, budget "
             f"{args.budget_frac} x = {budget:.3f} ms; reached: {res.reached} after "
             f"{len(res.steps)} steps.", "",
             "| step | channel ratio | params | MACs | measured latency (ms) |",
             "|---|---|---|---|---|", f"| 0 | 0 | {res.before.params} | {res.before.macs:.3g} | "
             f"{res.before.latency_ms:.3f} |"]
    lines += [f"| {i} | {s.ratio} | {s.params} | {s.macs:.3g} | {s.latency_ms:.3f} |"
              for i, s in enumerate(res.steps, 1)]
    again = [measure_latency(copy.deepcopy(res.model), SHAPE, lat).median_ms
             for _ in range(args.repeats)]
    lines += ["", f"Re-measured {args.repeats} times afterwards: median "
              f"{statistics.median(again):.3f} ms (min {min(again):.3f}, max {max(again):.3f}); "
              f"{sum(a <= budget for a in again)}/{len(again)} under the budget."]
    return lines


def main() -> None:
    args = parse()
    lat = MeasureSpec(threads=args.threads, max_seconds=args.max_seconds)
    head = ["## Pruning: ratio -> costs, and a latency budget", "",
            f"`python {' '.join(sys.argv)}`", "",
            f"Device: {device_name('cpu')}, latency with {args.threads} thread(s), batch 1, "
            f"fp32 (hw_cost.measure_latency); git {git_revision()}; torch "
            f"{versions()['torch']}, torch-pruning {versions()['torch-pruning']}. "
            "Magnitude importance, round_to 4, classifier kept. Measured on a shared, busy "
            "machine: latencies are noisy.", ""]
    lines = head + ratio_table(args, lat) + [""] + budget_run(args, lat) + [""]
    replace_section(Path(args.out), "prune_latency", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
