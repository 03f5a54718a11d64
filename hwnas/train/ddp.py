"""One training entry for a single process, ``torchrun`` workers or Ray Train workers.

    python -m hwnas.train.ddp --job job.json                                      # alone
    torchrun --standalone --nproc_per_node 2 -m hwnas.train.ddp --job job.json  # DDP, gloo on CPU

Like nanoGPT, a process reads ``RANK``/``WORLD_SIZE``/``LOCAL_RANK`` from the environment: set
means distributed (NCCL on CUDA, gloo on CPU), unset means one process. Every rank holds the whole
data set on its device and takes a disjoint shard of one seeded permutation per epoch
(``DeviceLoader(rank=, world_size=)``, the DistributedSampler of an on-device loader).
``fit.batch_size`` is the *global* batch, so the optimisation does not depend on the number of
processes. Rank 0 logs and writes checkpoints (model, optimizer, scheduler, grad scaler, step, the
loader's position and every rank's RNG state); rerunning the same job resumes from the last
checkpoint and replays the same batch sequence.

The job names its model and its loss as ``"module:function"`` factories (e.g.
``search_spaces.checkpoint:load_model`` reading a checkpoint with ``weights_only=True``, and
``hwnas.compress.distill:make_loss``), so this file depends on neither the search spaces nor
``compress``, and no rank unpickles a module from a file. The building blocks (optimizer,
schedule, precision, memory format, train step, step hook, evaluate) are ``hwnas.train.loop``'s:
one process here takes exactly the steps ``fit`` takes.
"""

from __future__ import annotations

import argparse
import faulthandler
import importlib
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from hwnas.common.checkpoint import load_torch_file
from hwnas.common.devices import is_cuda, require_device
from hwnas.common.errors import ConfigError, HwnasError
from hwnas.common.seeds import stream_seed
from hwnas.train.data import DataSplits, load_data
from hwnas.train.loader import Augment, DeviceLoader
from hwnas.train.loop import FitConfig, NonFiniteLoss, TrainRun, default_loss, evaluate, prepare


@dataclass(kw_only=True)
class DDPJob:
    """Everything one (possibly distributed) training run needs; round-trips through JSON."""

    model_factory: str
    """``"module:function"`` returning the ``nn.Module`` to train, called with ``model_kwargs``
    and ``device``; e.g. ``search_spaces.checkpoint:load_model`` with ``{"path": "student.pt"}``."""
    out_dir: str
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    """``checkpoint.pt``, ``log.jsonl``, ``final.pt`` (trained state dict), ``result.json``."""
    data: str = "fashion_mnist"
    data_kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments of ``load_data`` (seed, train_limit, val_fraction, ...)."""
    fit: dict[str, Any] = field(default_factory=dict)
    """``FitConfig`` fields; ``batch_size`` is the global batch over all ranks."""
    loss_factory: str | None = None
    """``"module:function"`` returning ``loss_fn(logits, targets, inputs)``; None: cross-entropy."""
    loss_kwargs: dict[str, Any] = field(default_factory=dict)
    step_hook: str | None = None
    """``"module:function"`` returning ``hook(model)``, run after every optimizer step as in
    ``fit`` (e.g. weight clipping); called with ``step_hook_kwargs`` and ``device``."""
    step_hook_kwargs: dict[str, Any] = field(default_factory=dict)
    checkpoint_every: int = 50
    log_every: int = 20
    resume: bool = True
    backend: str | None = None
    """Process-group backend; None picks NCCL on CUDA and gloo on CPU."""
    stop_after: int | None = None
    """Checkpoint and leave after this many steps, as a preempted job would (resume drills)."""

    def save(self, path: str | Path) -> Path:
        Path(path).write_text(json.dumps(asdict(self), indent=1))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path) -> DDPJob:
        return cls(**json.loads(Path(path).read_text()))


@dataclass(frozen=True)
class Dist:
    """This process's place in the run."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    device: str = "cpu"

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup(job: DDPJob) -> Dist:
    """Join the process group when launched distributed; a plain process is rank 0 of 1."""
    return join_group(FitConfig(**job.fit).device, job.backend)


def group_backend(device: str, backend: str | None = None) -> str:
    """The process-group backend for ``device``: ``backend`` when given, else NCCL on CUDA and
    gloo on CPU (NCCL moves CUDA tensors only; gloo is torch's CPU collective)."""
    return backend or ("nccl" if is_cuda(device) else "gloo")


def join_group(device: str = "cpu", backend: str | None = None) -> Dist:
    """This process's ``Dist``: under torchrun (``RANK`` set) it joins the process group
    (``group_backend``) on ``cuda:LOCAL_RANK`` when ``device`` is CUDA (world size 1 on one GPU,
    one rank per GPU on more); a plain process is rank 0 of 1. CUDA asked on a machine without
    it is a clear error before any work."""
    require_device(device, "fit.device")
    if "RANK" not in os.environ:
        return Dist(device=device)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", 0))
    if is_cuda(device):
        device = require_device(f"cuda:{local}", "LOCAL_RANK")  # more ranks than GPUs: clear
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group(backend=group_backend(device, backend))
    return Dist(rank=rank, world=world, local_rank=local, device=device)


def torchrun_command(nproc: int, module_args: list[str], *, max_restarts: int = 0) -> list[str]:
    """``python -m torch.distributed.run --standalone`` of ``nproc`` workers, each running
    ``python -m <module_args>``."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone",
            f"--nproc_per_node={nproc}", f"--max-restarts={max_restarts}", "-m", *module_args]


def thread_env(nproc: int, threads: int | None = None) -> dict[str, str]:
    """The environment of ``nproc`` workers sharing this machine's cores (torch would otherwise
    start one thread per core in every process and oversubscribe it)."""
    return {**os.environ,
            "OMP_NUM_THREADS": str(threads or max(1, (os.cpu_count() or 1) // nproc))}


class CheckpointStore(Protocol):
    """Where checkpoints live: a file for torchrun, Ray's checkpoint manager for Ray Train."""

    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        """Called on every rank at once; ``state`` is None except on rank 0."""


class FileStore:
    """``out_dir/checkpoint.pt``, replaced atomically so a kill mid-write keeps the last one."""

    def __init__(self, out_dir: str | Path):
        self.path = Path(out_dir) / "checkpoint.pt"

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        # A damaged file is an error naming it, not a traceback from torch's zip reader; tensors
        # go back to the device they were saved from, as a resume expects.
        return load_torch_file(self.path, where="DDP resume checkpoint", map_location=None,
                               fix=f"delete {self.path} to start this job from step 0")

    def save(self, state: dict[str, Any] | None, metrics: dict[str, Any]) -> None:
        if state is None:
            return
        tmp = self.path.with_suffix(".tmp")
        torch.save(state, tmp)
        os.replace(tmp, self.path)


def call_factory(where: str, spec: str, kwargs: dict[str, Any], device: str) -> Any:
    """Import ``"package.module:function"`` and call it with ``kwargs`` and ``device``."""
    module, _, name = spec.partition(":")
    if not name:
        raise ConfigError.one(where, "must be 'package.module:function'", spec,
                              "e.g. hwnas.compress.distill:make_loss")
    return getattr(importlib.import_module(module), name)(**kwargs, device=device)


def build_loss(job: DDPJob, device: str, label_smoothing: float = 0.0):
    if job.loss_factory is None:
        return default_loss(label_smoothing)
    return call_factory("loss_factory", job.loss_factory, job.loss_kwargs, device)


def _gather(obj: Any, d: Dist) -> list[Any]:
    if d.world == 1:
        return [obj]
    out: list[Any] = [None] * d.world
    dist.all_gather_object(out, obj)
    return out


def _mean(value: torch.Tensor, d: Dist) -> float:
    if d.world > 1:
        value = value.clone()
        dist.all_reduce(value)
        value /= d.world
    return float(value)


@dataclass
class _State:
    """The mutable parts a checkpoint captures."""

    model: nn.Module
    run: TrainRun
    loader: DeviceLoader
    step: int = 0
    epoch_gen: dict[str, torch.Tensor] | None = None
    """The loader's RNG state at the start of the current epoch (it draws the permutation)."""
    batch: int = 0
    """Batches of the current epoch already trained."""

    @property
    def opt(self) -> torch.optim.Optimizer:
        return self.run.optimizer

    @property
    def sched(self) -> torch.optim.lr_scheduler.LRScheduler:
        return self.run.scheduler

    def capture(self, d: Dist) -> dict[str, Any] | None:
        rngs = _gather(torch.get_rng_state(), d)  # every rank calls: collective
        if not d.main:
            return None
        scaler = self.run.precision.scaler
        return {"format": "hwnas-ddp/1", "step": self.step, "world": d.world,
                "model": self.model.state_dict(), "optimizer": self.opt.state_dict(),
                "scheduler": self.sched.state_dict(),
                "scaler": scaler.state_dict() if scaler else None,
                "loader": {"gen": self.epoch_gen, "batch": self.batch},
                "rng": rngs}

    def restore(self, ck: dict[str, Any], d: Dist) -> None:
        self.model.load_state_dict(ck["model"])
        self.opt.load_state_dict(ck["optimizer"])
        self.sched.load_state_dict(ck["scheduler"])
        scaler = self.run.precision.scaler
        if scaler is not None and ck["scaler"]:
            scaler.load_state_dict(ck["scaler"])
        self.step = ck["step"]
        self.epoch_gen, self.batch = ck["loader"]["gen"], ck["loader"]["batch"]
        self.loader.set_rng_state(self.epoch_gen)
        if ck["world"] == d.world:  # another world size: the new ranks keep fresh seeds
            torch.set_rng_state(ck["rng"][d.rank])


def _log(d: Dist, out: Path, record: dict[str, Any]) -> None:
    if d.main:
        line = json.dumps(record)
        print(line, flush=True)
        with open(out / "log.jsonl", "a") as fh:
            fh.write(line + "\n")


def _setup_state(job: DDPJob, cfg: FitConfig, d: Dist, data: DataSplits) -> tuple[_State, int]:
    if cfg.batch_size % d.world:
        raise ConfigError.one("batch_size", f"the global batch must divide by {d.world} ranks",
                              cfg.batch_size, f"use a multiple of {d.world}")
    model = call_factory("model_factory", job.model_factory, job.model_kwargs, d.device)
    aug = Augment(data.crop_pad, data.flip) if cfg.augment else None
    loader = DeviceLoader(data.x_train, data.y_train, batch_size=cfg.batch_size // d.world,
                          device=d.device, augment=aug, seed=cfg.seed, rank=d.rank,
                          world_size=d.world)
    hook = (call_factory("step_hook", job.step_hook, job.step_hook_kwargs, d.device)
            if job.step_hook else None)
    run, total = prepare(model, cfg, len(loader), loss_fn=build_loss(job, d.device,
                                                                      cfg.label_smoothing),
                         step_hook=hook, device=d.device)
    return _State(model, run, loader), total


def train(job: DDPJob, d: Dist, store: CheckpointStore) -> dict[str, Any]:
    """Train ``job`` as rank ``d.rank``; rank 0 writes ``final.pt`` and ``result.json``."""
    cfg = FitConfig(**job.fit)
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    data = load_data(job.data, **job.data_kwargs)
    st, total = _setup_state(job, cfg, d, data)
    # as fit on rank 0 (its "dropout" stream); the other ranks draw their own
    torch.manual_seed(stream_seed(cfg.seed, "dropout", *([d.rank] if d.rank else [])))
    ck = store.load() if job.resume else None
    if ck is not None:
        st.restore(ck, d)
        _log(d, out, {"event": "resumed", "step": st.step, "from_world": ck["world"]})
    resumed_from = st.step
    net = DistributedDataParallel(st.model) if d.world > 1 else st.model
    if d.world > 1:
        dist.barrier()
    t0, stop = time.perf_counter(), min(total, job.stop_after or total)
    losses: list[torch.Tensor] = []
    while st.step < stop:
        if ck is None:  # a fresh epoch; a restored one carries its start state and position
            st.epoch_gen, st.batch = st.loader.rng_state(), 0
        ck, skip = None, st.batch
        net.train()
        for i, (x, y) in enumerate(st.loader):
            if i < skip:
                continue  # replay the epoch's random draws up to the checkpoint's position
            losses.append(st.run.step(net, x, y, st.model))
            st.step, st.batch = st.step + 1, i + 1
            _after_step(job, d, st, store, losses, out, stop)
            if st.step >= stop:
                break
    if torch.device(d.device).type == "cuda":
        torch.cuda.synchronize(d.device)
    return _finish(job, cfg, d, st, data, out, time.perf_counter() - t0, total, resumed_from)


def _after_step(job: DDPJob, d: Dist, st: _State, store: CheckpointStore,
                losses: list[torch.Tensor], out: Path, stop: int) -> None:
    if st.step % job.log_every == 0 or st.step == stop:
        loss = _mean(torch.stack(losses[-job.log_every:]).float().mean(), d)
        if not math.isfinite(loss):
            raise NonFiniteLoss.one("training", "the loss must stay finite", loss,
                                    "lower the learning rate or add warm-up")
        _log(d, out, {"step": st.step, "loss": round(loss, 5),
                      "lr": st.opt.param_groups[0]["lr"]})
    if st.step % job.checkpoint_every == 0 or st.step == stop:
        state = st.capture(d)
        store.save(state, {"step": st.step, "loss": float(losses[-1])})


def _finish(job: DDPJob, cfg: FitConfig, d: Dist, st: _State, data: DataSplits, out: Path,
            seconds: float, total: int, resumed_from: int) -> dict[str, Any]:
    result: dict[str, Any] = {"steps": st.step, "total_steps": total, "world": d.world,
                              "global_batch": cfg.batch_size, "device": d.device,
                              "resumed_from": resumed_from, "train_seconds": seconds,
                              "images_per_s": (st.step - resumed_from) * cfg.batch_size
                              / max(seconds, 1e-9),
                              "epochs": st.step / len(st.loader), "stopped": st.step < total}
    if d.main and not result["stopped"]:
        for split in ("val", "test"):
            x, y = getattr(data, f"x_{split}"), getattr(data, f"y_{split}")
            result[f"{split}_acc"] = evaluate(st.model, x, y, batch_size=cfg.eval_batch_size,
                                              device=d.device)["acc"]
        torch.save(st.model.state_dict(), out / "final.pt")
        (out / "result.json").write_text(json.dumps(result, indent=1))
    if d.world > 1:
        dist.barrier()
    return result


def run_job(job: DDPJob, *, nproc: int = 1, threads: int | None = None, max_restarts: int = 0,
            timeout: float | None = None) -> dict[str, Any]:
    """Run ``job`` under ``torchrun --standalone`` with ``nproc`` processes; return result.json.

    ``threads`` per process defaults to the CPU cores shared out (``thread_env``).
    """
    out = Path(job.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = job.save(out / "job.json")
    cmd = torchrun_command(nproc, ["hwnas.train.ddp", "--job", str(path)],
                           max_restarts=max_restarts)
    proc = subprocess.run(cmd, env=thread_env(nproc, threads), capture_output=True, text=True,
                          timeout=timeout, check=False)
    (out / "torchrun.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not (out / "result.json").exists():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise HwnasError(f"torchrun exited with {proc.returncode} (log: {out}/torchrun.log): "
                         + " | ".join(tail))
    return json.loads((out / "result.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one DDPJob (alone or under torchrun).")
    parser.add_argument("--job", required=True, help="DDPJob JSON file")
    job = DDPJob.load(parser.parse_args(argv).job)
    faulthandler.enable()  # a rank that crashes in C++ (gloo, NCCL) still prints its Python stack
    d = setup(job)
    (Path(job.out_dir) / "pids").mkdir(parents=True, exist_ok=True)
    (Path(job.out_dir) / "pids" / f"rank{d.rank}").write_text(str(os.getpid()))
    try:
        train(job, d, FileStore(job.out_dir))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


def exit_rank(code: int) -> NoReturn:
    """End a torchrun rank whose work is saved: leave the process group, then exit without
    interpreter teardown. At teardown a C++ thread left joinable (seen under load on CPU ranks,
    gloo) aborts a finished rank with SIGABRT, which torchrun reports as a failed job."""
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_rank(main())
