"""Does distillation help a pruned student? Fashion-MNIST, equal epochs, several seeds.

    python -m bench.train.distill [--seeds 0 1 2] [--teacher-epochs 4] [--epochs 1] [--ratio 0.6]
                            [--threads 2] [--out bench/results/finalize.md]

A teacher (``resnet`` space) is trained once; the student is the teacher pruned to ``ratio`` of
its channels (Torch-Pruning, magnitude). Per seed, two copies of the same student train for the
same epochs with the same recipe: cross-entropy only, and Hinton KD from the teacher
(alpha 0.5, T 4). Reported: test accuracy (10,000 images) of each, mean +- std over seeds, the
per-seed gain, and the wall time of each training.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

from bench import RESULTS
from bench._results import replace_section
from hw_cost import static_costs
from hwnas.common.provenance import device_name, git_revision, versions
from hwnas.compress.distill import DistillConfig, Distiller
from hwnas.compress.prune import PruneConfig, prune
from hwnas.train.data import load_data
from hwnas.train.loop import FitConfig, evaluate, fit
from search_spaces import get_space

TEACHER = "rn:s16-d1r1c16-d1r1c32-d1r1c64"  # the bench/train/fmnist.py net (>= 91%)
RECIPE = {"batch_size": 256, "lr": 0.2, "label_smoothing": 0.0, "warmup_epochs": 0.2}


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--teacher-epochs", type=float, default=4)
    p.add_argument("--epochs", type=float, default=1)
    p.add_argument("--ratio", type=float, default=0.6)
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--temperature", type=float, default=4.0)
    p.add_argument("--train-limit", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(RESULTS / "finalize.md"))
    return p.parse_args()


def test_acc(model, data) -> float:  # noqa: ANN001
    return evaluate(model, data.x_test, data.y_test)["acc"]


def main() -> None:
    args = parse()
    torch.set_num_threads(args.threads)
    data = load_data("fashion_mnist", train_limit=args.train_limit)
    torch.manual_seed(0)
    teacher = get_space("resnet").build(TEACHER, in_chans=1, num_classes=10, img_size=28)
    t0 = time.perf_counter()
    fit(teacher, data, FitConfig(epochs=args.teacher_epochs, seed=0, **RECIPE))
    teacher_s, teacher_acc = time.perf_counter() - t0, test_acc(teacher, data)
    student = copy.deepcopy(teacher)
    shape = data.input_shape
    pr = prune(student, shape, PruneConfig(ratio=args.ratio),
               measure=lambda m: {k: float(static_costs(m, shape)[k]) for k in ("params", "macs")})
    print(f"teacher {teacher_acc:.4f} ({teacher_s:.0f} s); student {pr.after.params} params "
          f"({pr.after.params / pr.before.params:.2%}), pruned acc {test_acc(student, data):.4f}")
    rows = []
    for seed in args.seeds:
        row = {"seed": seed}
        for name in ("ce", "kd"):
            s = copy.deepcopy(student)
            loss = Distiller(teacher, DistillConfig(alpha=args.alpha,
                                                    temperature=args.temperature))
            t0 = time.perf_counter()
            fit(s, data, FitConfig(epochs=args.epochs, seed=seed, **RECIPE),
                loss_fn=loss if name == "kd" else None)
            row[name], row[f"{name}_s"] = test_acc(s, data), time.perf_counter() - t0
        rows.append(row)
        print(row, flush=True)
    write(args, rows, teacher_acc, teacher_s, pr)


def _ms(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.4f} ± {sd:.4f}"


def write(args: argparse.Namespace, rows: list[dict], teacher_acc: float, teacher_s: float,
          pr) -> None:  # noqa: ANN001
    gains = [r["kd"] - r["ce"] for r in rows]
    lines = [
        "## Distillation of a pruned student (Fashion-MNIST)", "",
        f"`python {' '.join(sys.argv)}`", "",
        f"Device: {device_name('cpu')}; git {git_revision()}; torch {versions()['torch']}, "
        f"torch-pruning {versions()['torch-pruning']}. Timings are from a shared, busy machine.",
        "",
        f"Teacher `{TEACHER}`: {pr.before.params} params, test acc {teacher_acc:.4f} after "
        f"{args.teacher_epochs} epochs ({teacher_s:.0f} s). Student: the teacher pruned at "
        f"ratio {args.ratio} -> {pr.after.params} params ({pr.after.params / pr.before.params:.1%}"
        f"), MACs {pr.after.macs / pr.before.macs:.1%} of the teacher's. Both students train "
        f"{args.epochs} epoch(s), same recipe, same seed; KD alpha {args.alpha}, "
        f"T {args.temperature}.", "",
        "| seed | test acc, CE only | test acc, KD | KD - CE | s (CE) | s (KD) |",
        "|---|---|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['ce']:.4f} | {r['kd']:.4f} | {r['kd'] - r['ce']:+.4f} | "
              f"{r['ce_s']:.0f} | {r['kd_s']:.0f} |" for r in rows]
    lines += [f"| mean ± std | {_ms([r['ce'] for r in rows])} | {_ms([r['kd'] for r in rows])}"
              f" | {_ms(gains)} | | |", ""]
    replace_section(Path(args.out), "distill", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
