"""`hwnas train SPACE ARCH --data NAME --epochs E`: train one architecture, print test accuracy."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from hwnas.common.errors import ConfigError, Problem
from nas.commands.data import add_data_args, data_kwargs


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train one architecture and print test accuracy and images/s",
        description="Train SPACE/ARCH on a data set with the plain-PyTorch loop (train.loop.fit), "
                    "then evaluate on the test split.")
    p.add_argument("space", help="search space (see `hwnas spaces list`)")
    p.add_argument("arch", help="architecture string of that space")
    p.add_argument("--data", default="fashion_mnist", help="data set (see `hwnas data list`)")
    p.add_argument("--epochs", type=float, default=1.0, help="passes over the train split")
    p.add_argument("--steps", type=int, default=None, help="optimizer steps (overrides --epochs)")
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=None,
                   help="peak learning rate (default 0.1 for sgd, 1e-3 for adamw)")
    p.add_argument("--optimizer", default="sgd", help="sgd (Nesterov) or adamw")
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--label-smoothing", type=float, default=0.0)
    p.add_argument("--warmup-epochs", type=float, default=0.0)
    p.add_argument("--no-augment", action="store_true", help="no random translate/flip")
    p.add_argument("--seed", type=int, default=0,
                   help="seeds the weights, the val split, batch order and augmentation")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--no-amp", action="store_true", help="full fp32 on CUDA")
    p.add_argument("--threads", type=int, default=None,
                   help="torch CPU threads (default: torch's choice; 1 is steadier on a busy host)")
    add_data_args(p)
    p.add_argument("--save", default=None, metavar="PATH",
                   help="write the trained model as an hwnas checkpoint (model.pt format)")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="write the result (metrics, history, config, provenance) as JSON")
    p.set_defaults(func=cmd_train)


def _fit_config(args: argparse.Namespace):  # noqa: ANN202  (FitConfig, imported lazily)
    from hwnas.train.loop import FitConfig

    return FitConfig(
        epochs=args.epochs, steps=args.steps, batch_size=args.batch_size, lr=args.lr,
        optimizer=args.optimizer, weight_decay=args.weight_decay, momentum=args.momentum,
        label_smoothing=args.label_smoothing, warmup_epochs=args.warmup_epochs,
        augment=not args.no_augment, seed=args.seed, device=args.device, amp=not args.no_amp)


def _resolve(args: argparse.Namespace):  # noqa: ANN202
    """Check config, space, arch and data set together, so one run reports every problem."""
    from hwnas.train.datasets import get_dataset
    from search_spaces import get_space

    problems: list[Problem] = []
    cfg = space = None
    if args.threads is not None and args.threads < 1:
        problems.append(Problem("--threads", "must be >= 1", args.threads, "pass e.g. 1 or 2"))
    for step in ("cfg", "space", "data"):
        try:
            if step == "cfg":
                cfg = _fit_config(args)
            elif step == "space":
                space = get_space(args.space)
                space.decode(args.arch)
            else:
                get_dataset(args.data)
        except ConfigError as err:
            problems.extend(err.problems)
    if problems:
        raise ConfigError(problems)
    return cfg, space


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from hwnas.train.data import load_data
    from hwnas.train.loop import evaluate, fit

    cfg, space = _resolve(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    start = time.perf_counter()
    data = load_data(args.data, seed=args.seed, **data_kwargs(args))
    torch.manual_seed(args.seed)
    model = space.build_for(args.arch, data)
    params = sum(p.numel() for p in model.parameters())
    print(f"{space.name} {args.arch} | {args.data} {data.sizes()} | params {params:,} | "
          f"device {cfg.device}, {torch.get_num_threads()} threads")
    result = fit(model, data, cfg, on_epoch=_print_epoch)
    test = evaluate(model, data.x_test, data.y_test, batch_size=cfg.eval_batch_size,
                    device=cfg.device)
    wall = time.perf_counter() - start
    print(f"test acc {test['acc']:.4f} | val acc {result.val_acc:.4f} | "
          f"{result.images_per_s:,.0f} images/s | fit {result.seconds:.1f} s | "
          f"total {wall:.1f} s | params {params:,}")
    summary = {"space": space.name, "arch": args.arch, "data": args.data, "params": params,
               "test_acc": test["acc"], "test_loss": test["loss"], "wall_seconds": wall,
               "fit": asdict(result), "config": asdict(cfg)}
    if args.save:
        _save(Path(args.save), model, space.name, args.arch, data, cfg, summary)
    if args.json:
        _write_json(Path(args.json), summary, cfg.device)
    return 0


def _print_epoch(h: dict[str, float]) -> None:
    print(f"  epoch {h['epoch']:5.2f}  step {h['step']:6d}  loss {h['train_loss']:.4f}  "
          f"val acc {h['val_acc']:.4f}  {h['seconds']:7.1f} s", flush=True)


def _write_json(path: Path, summary: dict, device: str) -> None:
    from hwnas.common.provenance import provenance

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**summary, "provenance": provenance(device)}, indent=1,
                               default=str))
    print(f"wrote {path}")


def _save(path: Path, model, space: str, arch: str, data, cfg, summary: dict) -> None:  # noqa: ANN001
    from hwnas.common.checkpoint import write_checkpoint
    from hwnas.common.provenance import provenance

    meta = {"name": data.name, "in_chans": data.in_chans, "num_classes": data.num_classes,
            "img_size": data.img_size}
    metrics = {"test_acc": summary["test_acc"], "val_acc": summary["fit"]["val_acc"],
               "params": summary["params"], "images_per_s": summary["fit"]["images_per_s"]}
    config = {"train": asdict(cfg), "data": {**meta, "mean": data.mean, "std": data.std}}
    write_checkpoint(path, space=space, arch=arch, state_dict=model.state_dict(), data=meta,
                     hw="digital", metrics=metrics, config=config, prov=provenance(cfg.device))
    print(f"saved {path}")
