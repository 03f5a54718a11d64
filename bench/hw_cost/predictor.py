"""Latency-predictor accuracy on held-out measured architectures (per space, this device).

For each space: build the per-block LUT from ``--lut-archs`` random archs (their whole-model
measurements calibrate it), measure random archs until ``--archs`` are in the cost cache, then
score the LUT and the regressors on the same held-out half (never the calibration archs): share
within +-10% of measured, MAPE and Kendall tau. Measurements stay in the cost cache, so a rerun
only adds what is missing (``--cache`` to choose the file).

    python -m bench.hw_cost.predictor --spaces mbconv resnet --archs 200 --lut-archs 30
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from bench import RESULTS


def run_space(space: str, args: argparse.Namespace, cache) -> list[dict]:
    from hw_cost.predictors import Setting, build_lut, evaluate, measured_rows

    setting = Setting(space, args.shape, 10, threads=args.threads, max_seconds=args.max_seconds,
                      clock=args.clock)
    start = time.perf_counter()
    built = build_lut(setting, cache, n=args.lut_archs, seed=args.seed)
    missing = max(0, args.archs - len(measured_rows(setting, cache)))
    rows = []
    for target in args.targets:
        for i, kind in enumerate(args.regressors):
            res = evaluate(setting, cache, measure=missing, holdout=args.holdout,
                           regressor=kind, seed=args.seed, target=target)
            missing = 0
            for name, s in res["predictors"].items():
                if not name.startswith("lut") or i == 0:
                    rows.append({"space": space, "target": target, "predictor": name, **s,
                                 "measured": res["measured"], "train": res["train"],
                                 "stable": res["stable_test"],
                                 "lut_blocks": built["blocks_in_cache"]})
            print(res, flush=True)
    print(f"{space}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def report(args: argparse.Namespace, rows: list[dict], device: str, load: tuple) -> str:
    lines = [
        "## hw_cost: latency predictors on held-out measured archs", "",
        f"Command: `python -m bench.hw_cost.predictor --spaces {' '.join(args.spaces)} --archs "
        f"{args.archs} --lut-archs {args.lut_archs} --threads {args.threads} "
        f"--max-seconds {args.max_seconds} --clock {args.clock}`", "",
        f"Device: {device}; input {args.shape}, batch 1, fp32, {args.threads} thread(s), "
        f"{args.clock} clock; "
        f"load average (1 min) before/after {load[0]:.2f} / {load[1]:.2f} on "
        f"{os.cpu_count()} cores", "",
        "Target `median` is the measured median latency; `p10` its 10th percentile, which "
        "other processes on a busy machine inflate less.", "",
        "| space | target | predictor | held-out n | within +-10% | MAPE % | Kendall tau | "
        "measured | regressor train n | held-out stable |", "|---" * 10 + "|",
    ]
    for r in rows:
        lines.append(f"| {r['space']} | {r['target']} | {r['predictor']} | {r['n']} | "
                     f"{r['within_10']:.1%} | {r['mape']:.1f} | {r['kendall_tau']:.3f} | "
                     f"{r['measured']} | {r['train'] if r['predictor'] != 'lut' else '-'} | "
                     f"{r['stable']} |")
    lines.append("")
    for space in args.spaces:
        by = {r["predictor"]: r for r in rows if r["space"] == space and r["target"] == "median"}
        if "lut" in by and "gbr" in by:
            ratio = by["lut"]["mape"] / by["gbr"]["mape"]
            lines.append(f"{space}: MAPE ratio LUT / gbr (median) = {ratio:.2f}; LUT blocks in "
                         f"cache: {by['lut']['lut_blocks']}.")
    lines.append("")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spaces", nargs="+", default=["mbconv", "resnet"])
    p.add_argument("--archs", type=int, default=200, help="measured archs per space (total)")
    p.add_argument("--lut-archs", type=int, default=30, help="archs that calibrate the LUT")
    p.add_argument("--regressors", nargs="+", default=["gbr", "ridge"])
    p.add_argument("--targets", nargs="+", default=["median", "p10"])
    p.add_argument("--holdout", type=float, default=0.5)
    p.add_argument("--input-shape", default="1,28,28")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--max-seconds", type=float, default=3.0)
    p.add_argument("--clock", default="wall", help="wall or thread (CPU time, 1 thread)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache", default=None, help="cost cache (default: hw_cost's)")
    p.add_argument("--out", default=str(RESULTS / "hw_cost_predictor.md"))
    args = p.parse_args()
    args.shape = tuple(int(d) for d in args.input_shape.split(","))

    import torch

    from hw_cost.cache import CostCache
    from hwnas.common.provenance import device_name

    cache = CostCache(args.cache)
    before = os.getloadavg()[0]
    rows = [r for space in args.spaces for r in run_space(space, args, cache)]
    torch.set_num_threads(args.threads)
    text = report(args, rows, device_name("cpu"), (before, os.getloadavg()[0]))
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
