"""Supernet training (BigNAS): the sandwich rule with in-place distillation, optional HWA noise.

Each step draws one batch and runs the largest sub-network on the labels, then the smallest and
``k`` random ones on the largest one's soft predictions (in-place distillation), accumulating
the gradients of all of them into the shared bank before one optimizer step.

With ``hwa_noise`` > 0 the supernet trains analog-aware with ``analog.hwa``'s recipe for single
models (Rasch et al. 2023): the student sub-networks see Gaussian weight noise relative to each
output channel's max |w|, ramped linearly from 0 over the first ``hwa_ramp`` of the HWA phase
(full noise on a fresh bank slows its first steps); the bank's weights are clipped per output
channel at ``hwa_clip_sigma`` std after every step (fewer outliers, more of the conductance range
used); and the largest sub-network, the in-place teacher, runs noise-free, so the students learn
clean soft targets. ``hwa_start`` > 0 trains the digital supernet first and adds the HWA phase
on top of it. DAC/ADC quantization is left out: it would need the hardware model in the
functional forward, and the analog score of every sub-network still runs the full model.

Every random draw of step ``s`` (batch, augmentation, sub-networks, weight noise) comes from
generators seeded by ``(seed, s)``, so a resumed run continues exactly as an uninterrupted one.

Under ``torchrun`` (``hwnas supernet train --nproc N``) every rank draws the same global batch
and the same sub-networks, trains on its shard of the batch (``batch_size`` stays the global
batch), and the gradients are averaged over the ranks before the one optimizer step, so every
rank holds the same weights. The gradients are averaged by hand, not by
``DistributedDataParallel``: a sandwich step runs several sub-networks, each using a different
subset of the shared weights, before one step, while DDP reduces after every backward and
tracks unused parameters from the last forward only. Batch norm statistics are per rank (no
SyncBatchNorm), as in plain DDP. Rank 0 writes the checkpoints and reports progress.
Checkpoints hold tensors and plain metadata only: ``torch.load(path, weights_only=True)`` reads
them.

The recipe trains whatever supernet ``build`` returns (``search_spaces.supernet.build_supernet``):
it needs only the supernet's sampling API (``sandwich``, ``activate``, ``describe``,
``weight_noise``), so training stays below the spaces it trains. ``search_spaces.supernet.load``
rebuilds a trained one from its checkpoint.
"""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.seeds import rng_devices
from hwnas.train.data import DataSplits, load_data
from hwnas.train.ddp import join_group
from hwnas.train.fit_config import FitConfig, device_ok
from hwnas.train.loader import Augment, augment_batch
from hwnas.train.loop import build_optimizer, build_scheduler

Supernet = nn.Module  # a search_spaces.supernet.Supernet: sandwich(), activate(), describe()

FORMAT = "hwnas-supernet/1"


@dataclass(frozen=True, kw_only=True)
class SupernetTrainConfig:
    """How one supernet is trained; stored in its checkpoint and checked on resume."""

    space: str
    data: str = "fashion_mnist"
    train_limit: int | None = 5000
    """Training images used (None: the whole train split)."""
    steps: int = 300
    batch_size: int = 64
    k: int = 2
    """Random sub-networks per step, besides the largest and the smallest (sandwich rule)."""
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-5
    warmup_steps: int = 20
    distill: bool = True
    """In-place distillation: the non-largest sub-networks learn the largest one's outputs."""
    hwa_noise: float = 0.0
    """HWA weight-noise std relative to each output channel's max |w| (0: digital supernet)."""
    hwa_start: int = 0
    """First step of the HWA phase; the steps before it train the digital supernet."""
    hwa_ramp: float = 0.5
    """Fraction of the HWA phase over which the noise ramps linearly from 0 to ``hwa_noise``."""
    hwa_clip_sigma: float | None = 3.0
    """HWA: clip each output channel's weights at this many std after every step (None: off)."""
    augment: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        rules = [("steps", self.steps >= 1, "pass e.g. 300"),
                 ("batch_size", self.batch_size >= 2, "pass e.g. 64 (BN needs 2+ images)"),
                 ("k", self.k >= 0, "pass 0 or more random sub-networks per step"),
                 ("lr", self.lr > 0, "pass e.g. 0.05"),
                 ("hwa_noise", 0 <= self.hwa_noise < 1, "pass 0 (digital) or e.g. 0.05"),
                 # a bad `steps` is its own problem: hwa_start is checked against a good one
                 ("hwa_start", 0 <= self.hwa_start and (self.hwa_start < self.steps
                                                       or self.steps < 1),
                  "pass a step before the last (0: HWA from the start)"),
                 ("hwa_ramp", 0 <= self.hwa_ramp <= 1, "pass a fraction, e.g. 0.5 (0: no ramp)"),
                 ("hwa_clip_sigma", self.hwa_clip_sigma is None or self.hwa_clip_sigma > 0,
                  "pass e.g. 3.0, or None to switch clipping off"),
                 ("warmup_steps", 0 <= self.warmup_steps, "pass e.g. 20")]
        problems = [Problem(f"supernet train {name}", "is out of range", getattr(self, name), fix)
                    for name, ok, fix in rules if not ok]
        if problems:
            raise ConfigError(problems)


def _step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step) % (2**63)


def _batch(data: DataSplits, cfg: SupernetTrainConfig, step: int
           ) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(_step_seed(cfg.seed, step))
    idx = torch.randperm(len(data.y_train), generator=gen)[:cfg.batch_size]
    x = data.x_train[idx]
    if cfg.augment:
        x = augment_batch(x, Augment(data.crop_pad, data.flip), gen)
    return x, data.y_train[idx]


def hwa_noise_at(cfg: SupernetTrainConfig, step: int) -> float:
    """The students' weight noise at ``step``: 0 before ``hwa_start``, then a linear ramp from
    0 (at ``hwa_start``) to ``hwa_noise`` over ``hwa_ramp`` of the HWA phase."""
    if cfg.hwa_noise <= 0 or step < cfg.hwa_start:
        return 0.0
    ramp = cfg.hwa_ramp * (cfg.steps - cfg.hwa_start)
    if ramp <= 0:
        return cfg.hwa_noise
    return cfg.hwa_noise * min(1.0, (step - cfg.hwa_start) / ramp)


@torch.no_grad()
def clip_bank(net: Supernet, cfg: SupernetTrainConfig, step: int) -> None:
    """HWA clipping: each output channel of every bank weight (2+ dims) at ``hwa_clip_sigma``
    std of that channel; only in the HWA phase, so a digital supernet is untouched."""
    if cfg.hwa_noise <= 0 or cfg.hwa_clip_sigma is None or step < cfg.hwa_start:
        return
    for name, w in net.named_parameters():
        if name.endswith("weight") and w.dim() >= 2 and w[0].numel() > 1:
            bound = cfg.hwa_clip_sigma * w.flatten(1).std(1)
            bound = bound.view(-1, *([1] * (w.dim() - 1)))
            w.copy_(torch.maximum(torch.minimum(w, bound), -bound))


def sandwich_step(net: Supernet, x: torch.Tensor, y: torch.Tensor, cfg: SupernetTrainConfig,
                  rng: random.Random) -> list[float]:
    """Accumulate the gradients of one sandwich (largest, smallest, k random); their losses.

    The largest sub-network is the in-place teacher and runs noise-free; the others see
    ``net.weight_noise`` (``hwa_noise_at`` of the step)."""
    teacher, losses, noise = None, [], net.weight_noise
    for arch in net.sandwich(rng, cfg.k):
        net.activate(arch)
        net.weight_noise = noise if teacher is not None else 0.0
        try:
            logits = net(x)
        finally:
            net.weight_noise = noise
        if teacher is None or not cfg.distill:
            loss = F.cross_entropy(logits, y)
        else:
            loss = F.kl_div(F.log_softmax(logits, 1), F.softmax(teacher, 1),
                            reduction="batchmean")
        if teacher is None:
            teacher = logits.detach()
        loss.backward()
        losses.append(loss.item())
    return losses


def _optimizer(net: Supernet, cfg: SupernetTrainConfig):  # noqa: ANN202
    opt = build_optimizer(net, FitConfig(lr=cfg.lr, momentum=cfg.momentum,
                                         weight_decay=cfg.weight_decay))
    return opt, build_scheduler(opt, cfg.steps, cfg.warmup_steps)


def load_data_for(cfg: SupernetTrainConfig, **kwargs: Any) -> DataSplits:
    return load_data(cfg.data, train_limit=cfg.train_limit, seed=cfg.seed, **kwargs)


def _average(net: Supernet, losses: list[float], world: int) -> list[float]:
    """Average every gradient and the losses over the ranks (one all-reduce each)."""
    # Every rank ran the same sub-networks, so the same weights have gradients, in one order;
    # a weight none of them used keeps no gradient, as in one process (no weight decay step).
    params = [p for p in net.parameters() if p.grad is not None]
    flat = torch.cat([p.grad.reshape(-1) for p in params]
                     + [torch.tensor(losses, dtype=params[0].grad.dtype,
                                     device=params[0].grad.device)])
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    for p in params:
        p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
        offset += p.numel()
    return flat[offset:].tolist()


def train_supernet(cfg: SupernetTrainConfig, out: str | Path, *,
                   build: Callable[..., Supernet], resume: bool = False,
                   checkpoint_every: int = 50, device: str = "cpu",
                   on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Train (or resume) the supernet of ``cfg.space``; checkpoints to ``out``; a summary.

    ``build(space, in_chans=, num_classes=, img_size=)`` makes the untrained supernet
    (``search_spaces.supernet.build_supernet``). ``device`` is not part of the config: a run
    may resume on another device. Batches and sub-network draws come from CPU generators, so
    the steps are the same on every device.
    Launched by torchrun, each rank trains on its shard of every batch (module docstring)."""
    if not device_ok(device):
        raise ConfigError.one("supernet train device", "must be cpu or an available cuda device",
                              device, "pass --device cpu on a machine without GPU")
    out = Path(out)
    d = join_group(device)
    if cfg.batch_size % d.world or cfg.batch_size // d.world < 2:
        raise ConfigError.one("supernet train batch_size", f"must split into {d.world} equal "
                              "shards of 2+ images (the global batch over the ranks)",
                              cfg.batch_size, f"pass a multiple of {d.world}, e.g. "
                              f"{max(2, cfg.batch_size // d.world) * d.world}")
    data = load_data_for(cfg)
    torch.manual_seed(cfg.seed)  # the bank's initialisation
    net = build(cfg.space, in_chans=data.in_chans, num_classes=data.num_classes,
                img_size=data.img_size)
    net.to(d.device)
    opt, sched = _optimizer(net, cfg)
    start, seconds = 0, 0.0
    if resume and out.exists():
        ck = read_checkpoint(out, space=cfg.space)
        check_same_config(ck["config"], asdict(cfg), out)
        net.load_state_dict(ck["state_dict"])
        opt.load_state_dict(ck["optimizer"])
        sched.load_state_dict(ck["scheduler"])
        start, seconds = ck["step"], ck["seconds"]
    for step in range(start, cfg.steps):
        t0 = time.perf_counter()
        net.train()
        opt.zero_grad(set_to_none=True)
        x, y = _batch(data, cfg, step)
        x, y = x[d.rank::d.world].to(d.device), y[d.rank::d.world].to(d.device)  # rank's shard
        net.weight_noise = hwa_noise_at(cfg, step)
        with torch.random.fork_rng(devices=rng_devices(d.device)):
            torch.manual_seed(_step_seed(cfg.seed, step))  # the HWA noise stream
            losses = sandwich_step(net, x, y, cfg, random.Random(_step_seed(cfg.seed, step)))
        if d.world > 1:  # before the check, so every rank stops together on a bad loss
            losses = _average(net, losses, d.world)
        if not all(math.isfinite(v) for v in losses):
            raise ConfigError.one("supernet training", "the loss must stay finite",
                                  f"{losses} at step {step + 1}", "lower --lr or add warm-up")
        opt.step()
        clip_bank(net, cfg, step)
        sched.step()
        seconds += time.perf_counter() - t0
        done = step + 1
        if d.main and (done % checkpoint_every == 0 or done == cfg.steps):
            save_checkpoint(out, net, cfg, opt, sched, done, seconds)
        if d.main and on_progress is not None:
            on_progress({"step": done, "steps": cfg.steps, "loss_largest": losses[0],
                         "loss_smallest": losses[1], "seconds": seconds})
    return {"space": cfg.space, "steps": cfg.steps, "seconds": seconds, "checkpoint": str(out),
            "resumed_from": start, "world": d.world, "device": str(d.device)}



def check_same_config(stored: dict[str, Any], wanted: dict[str, Any], path: Path) -> None:
    # A digital run ignores the HWA recipe, so a digital checkpoint written before its keys
    # existed still resumes; an HWA checkpoint without them trained another recipe.
    digital = stored.get("hwa_noise") == wanted.get("hwa_noise") == 0
    changed = {k: (stored.get(k), v) for k, v in wanted.items() if stored.get(k) != v
               and not (digital and k.startswith("hwa_") and k not in stored)}
    if changed:
        raise ConfigError([Problem(f"resume {path}", f"{k} must match the checkpoint's config",
                                   f"{new!r} (checkpoint: {old!r})",
                                   "resume with the same settings, or train to a new --out")
                           for k, (old, new) in changed.items()])


def save_checkpoint(path: Path, net: Supernet, cfg: SupernetTrainConfig, opt, sched,  # noqa: ANN001
                    step: int, seconds: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save({"format": FORMAT, **net.describe(), "config": asdict(cfg), "step": step,
                "seconds": seconds, "state_dict": net.state_dict(),
                "optimizer": opt.state_dict(), "scheduler": sched.state_dict()}, tmp)
    os.replace(tmp, path)  # a crash mid-write never leaves a truncated checkpoint


def read_checkpoint(path: str | Path, *, space: str | None = None) -> dict[str, Any]:
    """A supernet checkpoint's contents (weights-only load); checks format and space."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError.one("supernet checkpoint", "must be an existing file", str(path),
                              "train one with `hwnas supernet train SPACE --out PATH`")
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(ck, dict) or ck.get("format") != FORMAT:
        raise ConfigError.one("supernet checkpoint", f"must be a {FORMAT} file", str(path),
                              "pass a file written by `hwnas supernet train`")
    if space is not None and ck["space"] != space:
        raise ConfigError.one("supernet checkpoint", f"must be a {space} supernet",
                              f"{path} holds a {ck['space']} supernet",
                              f"train one with `hwnas supernet train {space}` or pick its file")
    return ck


__all__ = ["FORMAT", "SupernetTrainConfig", "check_same_config", "clip_bank", "hwa_noise_at",
           "read_checkpoint", "sandwich_step", "train_supernet"]
