"""Proxy training across successive-halving rungs: a promoted candidate continues from its rung.

**One schedule spans the top rung** (Hyperband with checkpoints). The learning rate warms up and
then decays by cosine to 0 at the *top* rung's last step, from the first step of rung 0; a rung's
training stops at its own step count (``ceil(budget * batches per epoch)``). A cosine over each
rung's own budget would anneal to 0 at every rung, and a run continued from there could never
match one trained straight to the larger budget. With one schedule, rung k+1 resumes rung k's run
exactly (weights, optimiser and scheduler state, the epoch's batch order and augmentation draws,
the dropout stream), so training rung 0 and then continuing to rung 1 gives the weights that
training straight to rung 1 gives, and every step is spent once. The price is that a low rung is
scored mid-schedule, before its learning rate has annealed; promotion compares candidates of one
rung with each other only, all at the same point of the same schedule.

**Rung states** are saved at the end of every rung below the top, one file per arch, seed and
rung (``RungStore``). A promotion whose parent state is missing (another host's disk, a
deleted folder) or was made by another recipe trains from step 0 to the same weights, only
slower: the state saves time, never changes a result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hwnas.common.devices import tf32_block
from hwnas.common.errors import Problem
from hwnas.common.seeds import rng_devices, stream_seed
from hwnas.train.data import DataSplits
from hwnas.train.fit_config import FitConfig
from hwnas.train.loader import Augment, DeviceLoader
from hwnas.train.loop import NonFiniteLoss, TrainRun, prepare


@dataclass
class RungFit:
    """What one rung's training did; ``history`` covers the whole run from step 0."""

    epochs: float
    steps: int
    resumed_from: int
    train_loss: float
    seconds: float
    images_per_s: float
    history: list[dict[str, float]] = field(default_factory=list)

    @property
    def steps_trained(self) -> int:
        """Steps this call trained (the rung's extra budget when it continued)."""
        return self.steps - self.resumed_from


@dataclass
class _Position:
    """Where a run stands: steps done, the loader's generators at the start of the current
    epoch and the batches of that epoch already trained (a resumed epoch replays its draws)."""

    step: int
    epoch_rng: dict[str, torch.Tensor]
    batch: int = 0
    losses: list[float] = field(default_factory=list)
    """The current epoch's losses so far: a history entry is one whole epoch, whichever
    rungs trained it, so a continued run's history is a straight run's."""


class RungStore:
    """Rung states in a folder: ``<sha1(arch)[:16]>-s<seed>-r<rung>.pt``."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path(self, arch: str, seed: int, rung: int) -> Path:
        digest = hashlib.sha1(arch.encode()).hexdigest()[:16]
        return self.folder / f"{digest}-s{seed}-r{rung}.pt"

    def load(self, arch: str, seed: int, rung: int) -> dict[str, Any] | None:
        path = self.path(arch, seed, rung)
        if not path.is_file():
            return None
        state = torch.load(path, map_location="cpu", weights_only=True)
        return state if state.get("arch") == arch else None  # a hash collision is no state

    def save(self, arch: str, seed: int, rung: int, state: dict[str, Any]) -> Path:
        path = self.path(arch, seed, rung)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save({**state, "arch": arch}, tmp)
        os.replace(tmp, path)  # atomic: a worker reading it sees the old file or the new one
        return path


def rung_steps(budget_epochs: float, batches_per_epoch: int) -> int:
    """Optimizer steps of a rung of ``budget_epochs`` (the loop's own rounding)."""
    return max(1, math.ceil(budget_epochs * batches_per_epoch))


def fit_rung(model: nn.Module, data: DataSplits, cfg: FitConfig, *, epochs: float,
             top_epochs: float, state: dict[str, Any] | None = None
             ) -> tuple[RungFit, dict[str, Any]]:
    """Train ``model`` to ``epochs`` on the schedule of ``top_epochs``; with ``state`` (a
    lower rung's, from ``fit_rung``) continue from it. Returns the result and the state at the
    end (to save for the next rung). The model is left in eval mode."""
    aug = Augment(data.crop_pad, data.flip) if cfg.augment else None
    loader = DeviceLoader(data.x_train, data.y_train, batch_size=cfg.batch_size,
                          device=cfg.device, augment=aug, seed=cfg.seed)
    top_cfg = dataclasses.replace(cfg, epochs=top_epochs, steps=None)
    run, total = prepare(model, top_cfg, len(loader))
    stop = min(total, rung_steps(epochs, len(loader)))
    mark = fingerprint(top_cfg, len(loader), len(data.y_train))
    history: list[dict[str, float]] = []
    pos = _Position(0, loader.rng_state())
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=rng_devices(cfg.device)), tf32_block(cfg.tf32):
        torch.manual_seed(stream_seed(cfg.seed, "dropout"))
        if state is not None and state.get("fingerprint") == mark and state["step"] <= stop:
            pos, history = _restore(state, model, run, cfg.device), list(state["history"])
        start = pos.step
        _train(model, loader, run, pos, stop, history)
        end_state = _snapshot(model, run, pos, history, mark, cfg.device)
    model.eval()
    seconds = time.perf_counter() - t0
    done = pos.step - start
    if pos.losses:  # the epoch this rung ends in, so far
        history = [*history, _entry(pos, len(loader), run)]
    return RungFit(epochs=pos.step / len(loader), steps=pos.step, resumed_from=start,
                   train_loss=history[-1]["train_loss"] if history else math.nan,
                   seconds=seconds, images_per_s=done * loader.batch_size / max(seconds, 1e-9),
                   history=history), end_state


def fingerprint(cfg: FitConfig, batches_per_epoch: int, n_images: int) -> str:
    """The recipe a state belongs to: a state of another recipe is not continued."""
    fields = {k: v for k, v in dataclasses.asdict(cfg).items() if k != "device"}
    return json.dumps({**fields, "batches": batches_per_epoch, "images": n_images},
                      sort_keys=True, default=str)


def _train(model: nn.Module, loader: DeviceLoader, run: TrainRun, pos: _Position,
           stop: int, history: list[dict[str, float]]) -> None:
    """Steps up to ``stop``, epoch by epoch; each completed epoch goes into ``history``."""
    while pos.step < stop:
        model.train()
        loader.set_rng_state(pos.epoch_rng)  # replays the epoch's permutation and draws
        for b, (x, y) in enumerate(loader):
            if b < pos.batch:  # trained before the rung ended; drawn again to stay in step
                continue
            if pos.step == stop:
                break
            pos.losses.append(_step(run, model, x, y, pos.step).item())
            pos.step, pos.batch = pos.step + 1, b + 1
        if pos.batch == len(loader):  # the epoch is complete: the next starts from here
            history.append(_entry(pos, len(loader), run))
            pos.epoch_rng, pos.batch, pos.losses = loader.rng_state(), 0, []


def _entry(pos: _Position, batches_per_epoch: int, run: TrainRun) -> dict[str, float]:
    return {"epoch": pos.step / batches_per_epoch, "step": pos.step,
            "train_loss": sum(pos.losses) / len(pos.losses),
            "lr": run.optimizer.param_groups[0]["lr"]}


def _step(run: TrainRun, model: nn.Module, x: torch.Tensor, y: torch.Tensor,
          step: int) -> torch.Tensor:
    loss = run.step(model, x, y).float()
    if not bool(torch.isfinite(loss)):
        lr = run.optimizer.param_groups[0].get("initial_lr")
        raise NonFiniteLoss(Problem("training", "the loss must stay finite",
                                    f"{loss.item()} at step {step + 1}",
                                    f"lower the learning rate (peak lr {lr:g}) or add warm-up"))
    return loss


def _snapshot(model: nn.Module, run: TrainRun, pos: _Position,
              history: list[dict[str, float]], mark: str, device: str) -> dict[str, Any]:
    return {"model": {k: v.detach().cpu().clone() for k, v in model.state_dict().items()},
            "optimizer": run.optimizer.state_dict(), "scheduler": run.scheduler.state_dict(),
            "step": pos.step, "batch": pos.batch, "epoch_rng": pos.epoch_rng,
            "losses": list(pos.losses),
            "torch_rng": _rng_state(device), "history": history, "fingerprint": mark}


def _restore(state: dict[str, Any], model: nn.Module, run: TrainRun,
             device: str) -> _Position:
    # optimizer before scheduler: the optimizer's groups carry the lr the scheduler reached
    model.load_state_dict(state["model"])
    run.optimizer.load_state_dict(state["optimizer"])
    run.scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["torch_rng"], device)
    return _Position(int(state["step"]), state["epoch_rng"], int(state["batch"]),
                     list(state["losses"]))


def _rng_state(device: str) -> dict[str, torch.Tensor]:
    out = {"cpu": torch.get_rng_state()}
    if torch.device(device).type == "cuda":  # dropout on CUDA draws from the device's stream
        out["cuda"] = torch.cuda.get_rng_state(device)
    return out


def _set_rng_state(state: dict[str, torch.Tensor], device: str) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.device(device).type == "cuda":
        torch.cuda.set_rng_state(state["cuda"], device)


__all__ = ["RungFit", "RungStore", "fingerprint", "fit_rung", "rung_steps"]
