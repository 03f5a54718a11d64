"""`hwnas finalize runs/<study>`: prune, distill-train with DDP, re-measure and export the
Pareto winners (see ``nas.finalize``)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from hwnas.common.errors import ConfigError

_LATENCY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e-?[0-9]+)?)\s*(us|ms|s)?\s*$", re.I)
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmg])?\s*$", re.I)


def parse_latency_ms(text: str) -> float:
    """``2ms``, ``500us``, ``0.002s`` or a bare number of milliseconds."""
    m = _LATENCY.match(str(text))
    if not m or float(m[1]) <= 0:
        raise ConfigError.one("--latency-budget", "must be a positive time like 2ms, 500us, "
                              "0.002s", text, "write e.g. --latency-budget 2ms")
    return float(m[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3, None: 1.0}[(m[2] or "ms").lower()]


def parse_count(text: str) -> float:
    """``5M``, ``1.2G``, ``300k`` or a bare number."""
    m = _COUNT.match(str(text))
    if not m or float(m[1]) <= 0:
        raise ConfigError.one("--macs-budget", "must be a positive count like 5M, 1.2G, 300k",
                              text, "write e.g. --macs-budget 5M")
    return float(m[1]) * {"k": 1e3, "m": 1e6, "g": 1e9, None: 1.0}[
        m[2].lower() if m[2] else None]


def add_parser(sub: argparse._SubParsersAction) -> None:
    helptext = "prune, distill-train with DDP, re-measure and export the Pareto winners"
    p = sub.add_parser("finalize", help=helptext, description=helptext)
    p.add_argument("study_dir", help="runs/<study> (after `hwnas export`)")
    p.add_argument("--top", type=int, default=1, help="finalize the first K Pareto models")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--prune", type=float, help="channel ratio to prune, e.g. 0.3")
    target.add_argument("--latency-budget", help="prune until the measured latency is under "
                        "this, e.g. 2ms")
    target.add_argument("--macs-budget", help="prune until MACs per image are under this, "
                        "e.g. 5M")
    p.add_argument("--importance", default="magnitude", help="magnitude | taylor")
    p.add_argument("--distill", action="store_true", help="distill from a teacher")
    p.add_argument("--teacher", help="teacher checkpoint (default: most accurate Pareto model)")
    p.add_argument("--distill-mode", default="soft", help="soft (Hinton KD) | hard (DeiT)")
    p.add_argument("--alpha", type=float, default=0.5, help="weight of the label loss")
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--epochs", type=float, default=5.0, help="retraining epochs")
    p.add_argument("--lr", type=float, help="peak learning rate (default: the study's)")
    p.add_argument("--train-limit", type=int, help="train images (default: the whole split)")
    p.add_argument("--bn-images", type=int, help="training images that re-estimate the batch "
                   "norms after pruning or under an epoch of training (default: the study's "
                   "AdaBS images; 0: keep the trained statistics)")
    launch = p.add_mutually_exclusive_group()
    launch.add_argument("--nproc", type=int, default=1, help="DDP processes (torchrun)")
    launch.add_argument("--workers", type=int, help="Ray Train workers (with --backend ray)")
    p.add_argument("--backend", choices=("torchrun", "ray"), default="torchrun")
    p.add_argument("--no-onnx", dest="onnx", action="store_false")
    p.add_argument("--out", help="folder for the finalized models and summary.json "
                   "(default: STUDY_DIR/final)")
    p.set_defaults(func=_finalize)


def _finalize(args: argparse.Namespace) -> int:
    from nas.finalize import FinalizeConfig, finalize

    if args.workers is not None and args.backend != "ray":
        raise ConfigError.one("--workers", "is for --backend ray", args.workers,
                              "add --backend ray, or use --nproc N for torchrun")
    fc = FinalizeConfig(
        top=args.top, prune=args.prune,
        latency_budget_ms=parse_latency_ms(args.latency_budget) if args.latency_budget else None,
        macs_budget=parse_count(args.macs_budget) if args.macs_budget else None,
        importance=args.importance, distill=args.distill, teacher=args.teacher,
        distill_mode=args.distill_mode, alpha=args.alpha, temperature=args.temperature,
        epochs=args.epochs, lr=args.lr, nproc=args.nproc, backend=args.backend,
        workers=args.workers or 2, train_limit=args.train_limit, bn_images=args.bn_images,
        onnx=args.onnx)
    out = Path(args.out) if args.out else Path(args.study_dir) / "final"
    print_summary(finalize(args.study_dir, fc, out=out), out)
    return 0


def print_summary(summary: dict[str, Any], out: Path) -> None:
    """Each finalized model's before/after table, its legend, warnings and notes."""
    from nas.finalize import LEGEND, cell, ratio_cell

    ran = summary.get("ran") or {}
    print(f"finalized {ran.get('models')} model(s): {ran.get('backend')}, "
          f"{ran.get('processes')} training process(es)")
    for m in summary["models"]:
        print(f"\n{m['arch']} -> {out / m['folder']}")
        print(f"  {'metric':<30} {'unit':<8} {'before':>36}    {'after':<36} after/before")
        for r in m["table"]:
            print(f"  {r['label']:<30} {r['unit']:<8} {cell(r, 'before'):>36} -> "
                  f"{cell(r, 'after'):<36} {ratio_cell(r)}")
        print(f"  {LEGEND}")
        for w in m["warnings"]:
            print(f"  WARNING: {w}")
        for n in m["notes"]:
            print(f"  note: {n}")
