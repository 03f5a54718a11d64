"""The standard analog experiment on Fashion-MNIST, for the figures in bench/results/analog.md.

A dense ``resnet``-space model is trained digitally, then evaluated digitally, with fq8/int8,
and on ``pcm`` at several drift times (mean +- std over repeats, fast path validated against
aihwkit by tests/analog/test_fast.py), with and without global drift compensation, before and
after HWA fine-tuning. Same code path as ``hwnas analog-eval`` (analog.experiment).

    .venv/bin/python -m bench.analog.drift_study --epochs 3 --hwa-epochs 2 --hwa-noise 0.1 \
        --repeats 10

Writes analog_eval.{csv,png,json} to --out and prints a markdown table (append it to
bench/results/analog.md). The trained digital model is saved as an hwnas checkpoint in --out.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from analog.experiment import ExperimentConfig, run_experiment
from analog.hwa import HwaOptions
from analog.report import write_all
from bench import command_line
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from hwnas.train.loop import FitConfig, evaluate, fit
from search_spaces import get_space


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r1c32")
    p.add_argument("--data", default="fashion_mnist")
    p.add_argument("--epochs", type=float, default=3.0)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--hwa-epochs", type=float, default=2.0)
    p.add_argument("--hwa-lr", type=float, default=0.01)
    p.add_argument("--hwa-noise", type=float, default=0.1)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--adabs", type=int, default=512,
                   help="AdaBS training images (0: off); each curve is also drawn without it")
    p.add_argument("--times", default="1s,1h,1d,30d,1y")
    p.add_argument("--train-limit", type=int, default=None)
    p.add_argument("--test-limit", type=int, default=None)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/analog/drift_study")
    return p.parse_args()


def train(args: argparse.Namespace, data):  # noqa: ANN201
    torch.manual_seed(args.seed)
    model = get_space("resnet").build(args.arch, in_chans=data.in_chans,
                                      num_classes=data.num_classes, img_size=data.img_size)
    cfg = FitConfig(epochs=args.epochs, lr=args.lr, seed=args.seed)
    result = fit(model, data, cfg, on_epoch=lambda h: print(
        f"  epoch {h['epoch']:.2f} loss {h['train_loss']:.4f} val {h['val_acc']:.4f} "
        f"{h['seconds']:.0f} s", flush=True))
    return model, cfg, result


def table(result, digital_train_s: float) -> str:  # noqa: ANN001
    cfg = result.config
    head = ["curve", *cfg.times]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, ref in result.references.items():
        acc = f"{100 * ref.acc_mean[0]:.2f}"
        lines.append(f"| {name} (deterministic) | " + " | ".join([acc] * len(cfg.times)) + " |")
    for curve in result.curves:
        cells = [f"{100 * p.acc_mean:.2f} +- {100 * p.acc_std:.2f}" for p in curve.result.points]
        lines.append(f"| {curve.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\n(test accuracy %, mean +- std over {cfg.repeats} " \
        f"programming repeats; digital training {digital_train_s:.0f} s)"


def main() -> None:
    args = parse()
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    data = load_data(args.data, seed=args.seed, train_limit=args.train_limit,
                     test_limit=args.test_limit)
    print(f"{args.arch} on {data.name} {data.sizes()}, {torch.get_num_threads()} threads")
    model, fit_cfg, fitted = train(args, data)
    test_acc = evaluate(model, data.x_test, data.y_test)["acc"]
    print(f"digital test acc {100 * test_acc:.2f} ({fitted.seconds:.0f} s)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.save({"format": "hwnas-checkpoint/1", "space": "resnet", "arch": args.arch,
                "state_dict": model.state_dict(),
                "data": {"name": data.name, "in_chans": data.in_chans,
                         "num_classes": data.num_classes, "img_size": data.img_size},
                "hw": "digital", "metrics": {"test_acc": test_acc}, "config": vars(args),
                "provenance": provenance("cpu")}, out / "model.pt")
    cfg = ExperimentConfig(hw="pcm", times=tuple(args.times.split(",")), repeats=args.repeats,
                           seed=args.seed, compare_compensation=True,
                           hwa_epochs=args.hwa_epochs, hwa_lr=args.hwa_lr,
                           adabs=args.adabs, compare_adabs=args.adabs > 0,
                           hwa_options=HwaOptions(weight_noise=args.hwa_noise))
    result = run_experiment(model, data, cfg, fit_cfg=fit_cfg)
    meta = {"model": {"space": "resnet", "arch": args.arch, "digital_test_acc": test_acc,
                      "epochs": args.epochs, "lr": args.lr},
            "data": {"name": data.name, **data.sizes()}, "wall_seconds": 0.0,
            "provenance": provenance("cpu", seeds={"seed": args.seed},
                                     command=command_line())}
    meta["wall_seconds"] = time.perf_counter() - start
    title = f"{args.arch} on {data.name} | pcm | {torch.get_num_threads()} threads, cpu"
    for path in write_all(result, out, title=title, meta=meta).values():
        print(f"wrote {path}")
    print()
    print(table(result, fitted.seconds))
    print(json.dumps({"wall_seconds": round(meta["wall_seconds"]), "device": meta[
        "provenance"]["device"]}))


if __name__ == "__main__":
    main()
