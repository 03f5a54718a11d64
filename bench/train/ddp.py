"""DDP on this machine: accuracy and scaling of 1 vs N processes at equal global batch.

    python -m bench.train.ddp [--nprocs 1 2] [--seeds 0 1 2] [--epochs 2] [--train-limit 20000]
                        [--batch 256] [--out bench/results/finalize.md]

Every run is the real launcher (``hwnas.train.ddp.run_job``: ``torchrun --standalone``, gloo on CPU,
NCCL on GPU) with one intra-op thread per process, so p processes use p cores; as a reference,
one process with ``max(nprocs)`` threads uses the same cores through intra-op parallelism.
Reported per setting: training time inside the job (no start-up), images/s, val and test
accuracy as mean +- std over seeds, and the scaling efficiency E = t1 / (p * tp) from median
times. Same model (``resnet`` space), data, recipe and global batch in every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from bench import RESULTS
from bench._results import replace_section
from hwnas.common.provenance import device_name, git_revision, versions
from hwnas.train.ddp import DDPJob, run_job
from search_spaces import get_space
from search_spaces.checkpoint import save_checkpoint

ARCH = "rn:s16-d1r1c16-d1r1c32-d1r1c64"


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--nprocs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=float, default=2)
    p.add_argument("--train-limit", type=int, default=20000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=str(RESULTS / "finalize.md"))
    return p.parse_args()


def run(args: argparse.Namespace, root: Path, nproc: int, threads: int, seed: int) -> dict:
    out = root / f"p{nproc}t{threads}s{seed}"
    job = DDPJob(model_factory="search_spaces.checkpoint:load_model",
                 model_kwargs={"path": str(root / "model.pt")}, out_dir=str(out),
                 data="fashion_mnist",
                 data_kwargs={"train_limit": args.train_limit, "seed": 0},
                 fit={"epochs": args.epochs, "batch_size": args.batch, "lr": args.lr,
                      "warmup_epochs": 0.2, "seed": seed, "device": args.device},
                 checkpoint_every=10**9, log_every=50, resume=False)
    t0 = time.perf_counter()
    result = run_job(job, nproc=nproc, threads=threads)
    result["command_s"] = time.perf_counter() - t0
    print(f"p={nproc} threads={threads} seed={seed}: {result['train_seconds']:.1f} s, "
          f"val {result['val_acc']:.4f}, test {result['test_acc']:.4f}", flush=True)
    return result


def main() -> None:
    args = parse()
    settings = [(p, 1) for p in args.nprocs]
    if max(args.nprocs) > 1:
        settings.append((1, max(args.nprocs)))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        torch.manual_seed(0)
        model = get_space("resnet").build(ARCH, in_chans=1, num_classes=10, img_size=28)
        save_checkpoint(root / "model.pt", space="resnet", arch=ARCH,
                        state_dict=model.state_dict(), data={"name": "fashion_mnist",
                                                             "in_chans": 1, "num_classes": 10,
                                                             "img_size": 28})
        results = {s: [run(args, root, *s, seed) for seed in args.seeds] for s in settings}
    write(args, results)


def _ms(values: list[float], fmt: str = ".4f") -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):{fmt}} ± {sd:{fmt}}"


def write(args: argparse.Namespace, results: dict) -> None:
    t1 = statistics.median(r["train_seconds"] for r in results[(1, 1)])
    lines = [
        "## DDP: 1 vs N processes at equal global batch (Fashion-MNIST)", "",
        f"`python {' '.join(sys.argv)}`", "",
        f"Device: {device_name(args.device)} (per-process threads as listed); git "
        f"{git_revision()}; torch {versions()['torch']}. `resnet` `{ARCH}`, global batch "
        f"{args.batch}, {args.epochs} epochs on {args.train_limit} images, seeds {args.seeds}. "
        "Times are training only (inside the job, after start-up); 1-minute load average at the "
        f"end {os.getloadavg()[0]:.2f} (this bench alone keeps it near 2).", "",
        "| processes x threads | train s (median, min-max) | images/s (median) | E = t1/(p tp) "
        "| val acc | test acc |", "|---|---|---|---|---|---|"]
    for (p, th), rs in results.items():
        ts = [r["train_seconds"] for r in rs]
        tp = statistics.median(ts)
        eff = f"{t1 / (p * tp):.2f}" if th == 1 else f"(x{t1 / tp:.2f} speed-up)"
        lines.append(
            f"| {p} x {th} | {tp:.1f} ({min(ts):.1f}-{max(ts):.1f}) | "
            f"{statistics.median(r['images_per_s'] for r in rs):.0f} | {eff} | "
            f"{_ms([r['val_acc'] for r in rs])} | {_ms([r['test_acc'] for r in rs])} |")
    lines.append("")
    replace_section(Path(args.out), "ddp", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
