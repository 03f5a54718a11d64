"""Training parts of the GPU campaign.

* ``fit``: ``hwnas.train.loop.fit`` throughput against a bare AMP loop (same model, batch, SGD,
  autocast dtype, channels_last, TF32 off), interleaved (goal: at least 0.9x).
* ``ddp``: ``hwnas.train.ddp`` under ``torchrun``: NCCL on CUDA (gloo on the CPU dry run), world
  size 1 on one GPU and one rank per GPU where there are more, with scaling efficiency.
* ``study``: ``hwnas run quickstart_gpu`` end to end, with its report.
* ``supernet``: supernet rank fidelity at 900, 2,700 and 9,000 steps, as many as the budget
  allows (a milestone cut short resumes from its checkpoint in ``<out>/supernet-work`` when the
  part is run again on the same machine).
"""

from __future__ import annotations

import copy
import dataclasses
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from bench import ROOT
from bench.gpu.context import Context, Goal, Report, part
from hwnas.common.devices import tf32_block
from hwnas.common.errors import HwnasError
from hwnas.train.data import DataSplits, load_data
from hwnas.train.ddp import DDPJob, group_backend, run_job
from hwnas.train.loop import FitConfig, Precision, fit
from search_spaces import get_space

ARCH = "rn:s16-d1r1c16-d1r1c32-d1r1c64"


def _model(data: DataSplits, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return get_space("resnet").build(ARCH, in_chans=data.in_chans, num_classes=data.num_classes,
                                     img_size=data.img_size)


def bare_amp_images_per_s(model: torch.nn.Module, data: DataSplits, steps: int, batch: int,
                          device: str) -> float:
    """A hand-written AMP loop: channels_last, autocast in the dtype ``fit`` picks, SGD with
    Nesterov momentum, a random permutation per pass; images/s from the first step."""
    model = model.to(device, memory_format=torch.channels_last).train()
    x, y = data.x_train.to(device), data.y_train.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True,
                          weight_decay=5e-4)
    prec = Precision.for_device(device, True)
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    sync()
    start, done = time.perf_counter(), 0
    while done < steps:
        for idx in torch.randperm(len(x), device=device).split(batch):
            if done == steps or len(idx) < batch:
                break
            xb = x[idx].contiguous(memory_format=torch.channels_last)
            with prec.autocast(device):
                loss = F.cross_entropy(model(xb), y[idx])
            opt.zero_grad(set_to_none=True)
            if prec.scaler is not None:
                prec.scaler.scale(loss).backward()
                prec.scaler.step(opt)
                prec.scaler.update()
            else:
                loss.backward()
                opt.step()
            done += 1
    sync()
    return steps * batch / (time.perf_counter() - start)


@part("fit")
def fit_part(ctx: Context) -> Report:
    data = load_data(ctx.data, train_limit=ctx.pick(20000, 256), seed=ctx.seed,
                     **ctx.data_kwargs())
    steps, batch, repeats = ctx.pick(300, 3), ctx.pick(256, 64), ctx.pick(3, 1)
    base = _model(data, ctx.seed)
    cfg = FitConfig(steps=steps, batch_size=batch, device=ctx.device, augment=False,
                    validation="off", seed=ctx.seed, lr=0.05)
    runs: dict[str, list[float]] = {"bare AMP loop": [], "fit no-aug": [], "fit": []}
    with tf32_block(False):
        for _ in range(repeats):  # interleaved: a host's drift moves every variant alike
            runs["bare AMP loop"].append(bare_amp_images_per_s(copy.deepcopy(base), data,
                                                               steps, batch, ctx.device))
            runs["fit no-aug"].append(fit(copy.deepcopy(base), data, cfg).images_per_s)
            aug = dataclasses.replace(cfg, augment=True)
            runs["fit"].append(fit(copy.deepcopy(base), data, aug).images_per_s)
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["fit no-aug"] / med["bare AMP loop"]
    prec = Precision.for_device(ctx.device, True)
    return Report({"images_per_s": runs, "median": med, "fit_no_aug_x_bare": ratio,
                   "fit_x_bare": med["fit"] / med["bare AMP loop"], "steps": steps,
                   "batch": batch, "arch": ARCH},
                  [Goal("fit (no augmentation) / bare AMP loop images/s", ratio, ">=", 0.9)],
                  {"amp": str(prec.dtype), "grad_scaler": prec.scaler is not None,
                   "tf32": False, "channels_last": True})


@part("ddp")
def ddp_part(ctx: Context) -> Report:
    from search_spaces.checkpoint import save_checkpoint

    data = load_data(ctx.data, train_limit=ctx.pick(20000, 256), seed=ctx.seed,
                     **ctx.data_kwargs())
    gpus = torch.cuda.device_count() if ctx.cuda else 1
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.pt"
        save_checkpoint(path, space="resnet", arch=ARCH, state_dict=_model(data, 0).state_dict(),
                        data={"name": ctx.data, "in_chans": data.in_chans,
                              "num_classes": data.num_classes, "img_size": data.img_size})
        for nproc in sorted({1, gpus}):
            job = DDPJob(model_factory="search_spaces.checkpoint:load_model",
                         model_kwargs={"path": str(path)}, out_dir=f"{tmp}/p{nproc}",
                         data=ctx.data, data_kwargs={"train_limit": ctx.pick(20000, 256),
                                                     **ctx.data_kwargs()},
                         fit={"steps": ctx.pick(400, 4), "batch_size": ctx.pick(512, 64),
                              "device": ctx.device, "seed": ctx.seed},
                         checkpoint_every=10**9, log_every=ctx.pick(100, 2), resume=False)
            rows[nproc] = _run(job, nproc, ctx)
    t1 = rows[1]["train_seconds"]
    eff = {p: t1 / (p * r["train_seconds"]) for p, r in rows.items()}
    return Report({"runs": rows, "scaling_efficiency": eff, "gpus": gpus,
                   "backend": group_backend(ctx.device)},
                  [Goal("DDP run finished (ranks)", float(len(rows)), ">=", 1)],
                  {"amp": True, "backend": group_backend(ctx.device)})


def _run(job: DDPJob, nproc: int, ctx: Context) -> dict[str, Any]:
    """``run_job``, with the ranks' own error lines (not torchrun's summary) when it fails."""
    try:
        return run_job(job, nproc=nproc, threads=ctx.pick(None, 1), timeout=max(60.0, ctx.left()))
    except HwnasError:
        log = Path(job.out_dir) / "torchrun.log"
        lines = log.read_text().splitlines() if log.exists() else []
        raise HwnasError(" | ".join([ln for ln in lines if "Error" in ln][-5:])) from None


def _cli(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nas.cli", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=timeout, check=False)


def _study_sets(ctx: Context, tmp: str) -> list[str]:
    """Overrides of quickstart_gpu: a private cost cache (fresh figures, the user's cache
    untouched), the data root, and in smoke tiny sizes on the CPU."""
    sets = [f"latency.cache={tmp}/costs.db"]
    if not ctx.smoke:
        return sets + ([f"data.root={ctx.data_root}"] if ctx.data_root else [])
    return sets + [
        "latency.device=cpu", "train.device=cpu", "data.name=digits", "data.train_limit=200",
        "data.test_limit=100", "train.steps=2", "hw_eval.target_se=null", "hw_eval.repeats=1",
        "hw_eval.eval_limit=50", "hw_eval.adabs=0", "latency.max_seconds=0.1",
        # the GPU's 5 ms budget: a loaded CPU can time the one smoke candidate over it, which
        # leaves nothing to export (exit 1); the smoke checks the pipeline, not the budget
        "constraints=[{metric: latency, max: 1000.0}]"]


@part("study")
def study_part(ctx: Context) -> Report:
    with tempfile.TemporaryDirectory() as tmp:
        sets = [a for s in _study_sets(ctx, tmp) for a in ("--set", s)]
        t0 = time.perf_counter()
        proc = _cli(["run", "quickstart_gpu", "--out", tmp, "--no-progress",
                     "--n-trials", str(ctx.pick(10, 1)), *sets], timeout=max(60.0, ctx.left()))
        seconds = time.perf_counter() - t0
        run_dir = Path(tmp) / "quickstart_gpu"
        files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file()) \
            if run_dir.exists() else []
        trials = _trials(run_dir)
    return Report({"returncode": proc.returncode, "seconds": seconds, "trials": trials,
                   "files": files[:40], "report_html": "report.html" in files,
                   "log_tail": (proc.stdout + proc.stderr)[-3000:]},
                  [Goal("quickstart_gpu exit status", float(proc.returncode), "<=", 0)],
                  {"latency": "fp32, TF32 off, batch 1", "train": "AMP (FitConfig default)"})


def _trials(run_dir: Path) -> dict[str, int]:
    path = run_dir / "trials.parquet"
    if not path.exists():
        return {}
    import pandas as pd

    df = pd.read_parquet(path)
    return {str(k): int(v) for k, v in df["state"].value_counts().items()} \
        if "state" in df else {"rows": len(df)}


def _truth_subset(tmp: str, n: int) -> Path:
    """The first ``n`` resnet archs of the fidelity truth set (the dry run's tiny yardstick)."""
    lines = (ROOT / "bench/data/fidelity/truth.csv").read_text().splitlines()
    rows = [line for line in lines[1:] if line.startswith("resnet,") and ",digital," in line]
    path = Path(tmp) / "truth.csv"
    path.write_text("\n".join([lines[0], *rows[:n]]) + "\n")
    return path


@part("supernet")
def supernet_part(ctx: Context) -> Report:
    work = ctx.out / "supernet-work" if not ctx.smoke else Path(tempfile.mkdtemp())
    rows: dict[int, Any] = {}
    for steps in ctx.pick((900, 2700, 9000), (2,)):
        if ctx.left() < ctx.pick(120, 0):
            rows[steps] = {"skipped": "part budget spent: rerun --part supernet to resume"}
            continue
        rows[steps] = _milestone(ctx, work, steps)
    taus = [r["taus"].get("acc_pcm@1d") for r in rows.values() if r.get("taus")]
    return Report({"milestones": rows},
                  [Goal("milestones scored", float(len(taus)), ">=", 1)],
                  {"amp": True, "tf32": "FitConfig default"})


def _milestone(ctx: Context, work: Path, steps: int) -> dict[str, Any]:
    ck = work / f"resnet-{steps}.pt"
    train = ["supernet", "train", "resnet", "--steps", str(steps), "--out", str(ck),
             "--device", ctx.device, "--batch-size", str(ctx.pick(256, 16)),
             "--train-limit", str(ctx.pick(0, 200)), "--seed", str(ctx.seed),
             *(["--resume"] if ck.exists() else [])]  # a milestone cut short goes on
    t0 = time.perf_counter()
    try:
        proc = _cli(train, timeout=max(30.0, ctx.left() - ctx.pick(90, 0)))
    except subprocess.TimeoutExpired:
        return {"incomplete": "training hit the part budget; rerun to resume", "checkpoint":
                str(ck)}
    if proc.returncode != 0:
        return {"error": (proc.stdout + proc.stderr)[-2000:]}
    trained = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        md = Path(tmp) / "supernet.md"
        score = [sys.executable, "-m", "bench.fidelity.supernet", "--checkpoint", str(ck),
                 "--device", ctx.device, "--out", str(md), "--times", "1d",
                 *ctx.pick([], ["--truth", str(_truth_subset(tmp, 3)), "--eval-limit", "32",
                                "--bn-images", "16", "--repeats", "1", "--train-limit", "200"])]
        proc = subprocess.run(score, cwd=ROOT, text=True, capture_output=True, check=False,
                              timeout=max(30.0, ctx.left()))
        text = md.read_text() if md.exists() else ""
    taus = {m[1]: float(m[2]) for m in re.finditer(r"\| digital \| (\S+) \| (-?[\d.]+|nan) ",
                                                      text)}
    return {"train_seconds": trained, "taus": taus, "report": text[-3000:],
            "error": None if proc.returncode == 0 else (proc.stderr or proc.stdout)[-2000:]}
