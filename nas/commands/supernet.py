"""`hwnas supernet train SPACE`: train a weight-sharing supernet (sandwich rule, in-place
distillation, optional HWA noise) with checkpoints and resume; `hwnas supernet score` scores
sub-networks with inherited weights."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

HWA_NOISE = 0.05  # analog.hwa.HwaOptions' default weight noise


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("supernet", help="train and score weight-sharing supernets")
    groups = p.add_subparsers(dest="supernet_command", required=True, metavar="ACTION")
    t = groups.add_parser("train", help="train SPACE's supernet (sandwich rule, distillation)")
    t.add_argument("space", help="search space with a supernet (resnet, mbconv, vit)")
    t.add_argument("--data", default="fashion_mnist")
    t.add_argument("--train-limit", type=int, default=5000,
                   help="training images (0: the whole train split)")
    t.add_argument("--steps", type=int, default=300)
    t.add_argument("--batch-size", type=int, default=64)
    t.add_argument("--k", type=int, default=2, help="random sub-networks per step (sandwich)")
    t.add_argument("--lr", type=float, default=0.05)
    t.add_argument("--warmup-steps", type=int, default=20)
    t.add_argument("--no-distill", action="store_true", help="labels for every sub-network")
    t.add_argument("--hwa", action="store_true",
                   help=f"analog-aware: weight noise {HWA_NOISE} of each channel's max |w|")
    t.add_argument("--hwa-noise", type=float, default=None, help="HWA noise (implies --hwa)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--out", default=None, help="checkpoint (default runs/supernet/SPACE[-hwa].pt)")
    t.add_argument("--resume", action="store_true", help="continue from --out")
    t.add_argument("--checkpoint-every", type=int, default=50)
    t.add_argument("--threads", type=int, default=None, help="torch CPU threads (per process)")
    t.add_argument("--device", default="cpu",
                   help="cpu or cuda (with --nproc, each worker takes cuda:LOCAL_RANK)")
    t.add_argument("--nproc", type=int, default=1,
                   help="data-parallel processes under torchrun (gloo on CPU); the batch size "
                        "stays the global batch")
    t.set_defaults(func=cmd_train)
    s = groups.add_parser("score", help="digital accuracy of sub-networks with inherited weights")
    s.add_argument("checkpoint")
    s.add_argument("arch", nargs="+")
    s.add_argument("--bn-images", type=int, default=500, help="BN recalibration images")
    s.add_argument("--eval-limit", type=int, default=2000, help="validation images scored")
    s.set_defaults(func=cmd_score)
    r = groups.add_parser("refine", help="fine-tune a supernet study's top front members "
                          "standalone and export them to runs/<study>/refined/")
    r.add_argument("study_dir", help="runs/<study> of an `evaluator: supernet` study")
    r.add_argument("--top", type=int, default=None, help="members (default supernet.refine_top)")
    r.add_argument("--epochs", type=float, default=None,
                   help="fine-tuning epochs (default supernet.refine_epochs)")
    r.set_defaults(func=cmd_refine)


def _config(args: argparse.Namespace):  # noqa: ANN202 - SupernetTrainConfig
    from hwnas.train.supernet import SupernetTrainConfig
    from search_spaces.supernet import SUPERNETS

    SUPERNETS.get(args.space)
    noise = args.hwa_noise if args.hwa_noise is not None else (HWA_NOISE if args.hwa else 0.0)
    return SupernetTrainConfig(
        space=args.space, data=args.data, train_limit=args.train_limit or None,
        steps=args.steps, batch_size=args.batch_size, k=args.k, lr=args.lr,
        warmup_steps=args.warmup_steps,
        distill=not args.no_distill, hwa_noise=noise, seed=args.seed)


def _out(args: argparse.Namespace, hwa_noise: float) -> Path:
    return Path(args.out or f"runs/supernet/{args.space}{'-hwa' if hwa_noise else ''}.pt")


def _worker_argv(args: argparse.Namespace, hwa_noise: float) -> list[str]:
    """The same ``supernet train`` command for each torchrun worker (without ``--nproc``)."""
    argv = ["supernet", "train", args.space, "--data", args.data,
            "--train-limit", str(args.train_limit or 0), "--steps", str(args.steps),
            "--batch-size", str(args.batch_size), "--k", str(args.k), "--lr", str(args.lr),
            "--warmup-steps", str(args.warmup_steps), "--hwa-noise", str(hwa_noise),
            "--seed", str(args.seed), "--out", str(_out(args, hwa_noise)),
            "--checkpoint-every", str(args.checkpoint_every), "--device", args.device]
    flags = (("--no-distill", args.no_distill), ("--resume", args.resume))
    return argv + [flag for flag, on in flags if on] + (
        ["--threads", str(args.threads)] if args.threads else [])


def _launch(args: argparse.Namespace, hwa_noise: float) -> int:
    from hwnas.common.errors import ConfigError
    from hwnas.train.ddp import thread_env, torchrun_command

    if args.nproc < 1:
        raise ConfigError.one("--nproc", "must be an integer >= 1", args.nproc,
                              "pass e.g. --nproc 2")
    cmd = torchrun_command(args.nproc, ["nas.cli", *_worker_argv(args, hwa_noise)])
    return subprocess.run(cmd, env=thread_env(args.nproc, args.threads), check=False).returncode


def cmd_train(args: argparse.Namespace) -> int:
    import torch

    from hwnas.train.supernet import train_supernet
    from search_spaces.supernet import build_supernet

    cfg = _config(args)
    if args.nproc != 1 and "RANK" not in os.environ:
        return _launch(args, cfg.hwa_noise)
    if args.threads:
        torch.set_num_threads(args.threads)
    out = _out(args, cfg.hwa_noise)
    every = max(1, cfg.steps // 20)

    def progress(p: dict) -> None:
        if p["step"] % every == 0 or p["step"] == p["steps"]:
            print(f"  step {p['step']:5d}/{p['steps']}  loss largest {p['loss_largest']:.3f}  "
                  f"smallest {p['loss_smallest']:.3f}  {p['seconds']:7.1f} s", flush=True)

    main_rank = os.environ.get("RANK", "0") == "0"  # under torchrun, rank 0 speaks
    if main_rank:
        print(f"supernet {cfg.space} | {cfg.data} {cfg.train_limit or 'all'} images | "
              f"{cfg.steps} steps x (2 + {cfg.k}) sub-networks | hwa noise {cfg.hwa_noise} | "
              f"{torch.get_num_threads()} threads x {os.environ.get('WORLD_SIZE', 1)} "
              f"process(es) | {args.device}")
    summary = train_supernet(cfg, out, build=build_supernet, resume=args.resume,
                             on_progress=progress,
                             checkpoint_every=args.checkpoint_every, device=args.device)
    if main_rank:
        print(f"trained in {summary['seconds']:.1f} s -> {out}")
        print(json.dumps(summary))
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from hwnas.train.loop import evaluate
    from hwnas.train.supernet import SupernetTrainConfig, load_data_for
    from search_spaces.supernet.load import inherit, load_supernet

    net, meta = load_supernet(args.checkpoint)
    data = load_data_for(SupernetTrainConfig(**meta["config"]))
    for arch in args.arch:
        model = inherit(net, arch, data.x_train[:args.bn_images])
        acc = evaluate(model, data.x_val[:args.eval_limit], data.y_val[:args.eval_limit])["acc"]
        print(f"{arch}  acc_digital {acc:.4f}")
    return 0


def cmd_refine(args: argparse.Namespace) -> int:
    from nas.refine import refine_front

    rows = refine_front(args.study_dir, top=args.top, epochs=args.epochs)
    return 0 if rows else 1
