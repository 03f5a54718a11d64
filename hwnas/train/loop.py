"""The training and evaluation loop: plain PyTorch, small reusable pieces, no trainer framework.

``fit(model, data, FitConfig(epochs=5))`` trains with SGD (Nesterov) or AdamW, a linear warm-up
then cosine schedule over the step budget, optional label smoothing, channels_last convolutions,
and AMP on CUDA. The pieces (``build_optimizer``, ``build_scheduler``, ``train_step``,
``evaluate``) are public so a distributed entry point can reuse them around its DDP model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.common.devices import tf32_block
from hwnas.common.errors import ConfigError, Problem
from hwnas.common.seeds import rng_devices, stream_seed
from hwnas.train.data import DataSplits
from hwnas.train.fit_config import FitConfig
from hwnas.train.loader import Augment, DeviceLoader

LossFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
StepHook = Callable[[nn.Module], None]

@dataclass
class FitResult:
    """What ``fit`` measured. ``images_per_s`` counts training steps only (no evaluation)."""

    epochs: float
    steps: int
    train_loss: float
    val_acc: float
    seconds: float
    images_per_s: float
    history: list[dict[str, float]]
    val_loss: float = math.nan
    train_seconds: float = 0.0


class NonFiniteLoss(ConfigError):
    """Training diverged (NaN/inf loss); the search records the trial as failed with this."""


def build_optimizer(model: nn.Module, cfg: FitConfig) -> torch.optim.Optimizer:
    """SGD (Nesterov) or AdamW; weight decay on weights only (decaying norms and biases hurts)."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.ndim > 1], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0}]
    if cfg.optimizer == "adamw":
        return torch.optim.AdamW(groups, lr=cfg.lr, betas=(cfg.momentum, 0.999))
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0)


def build_scheduler(optimizer: torch.optim.Optimizer, total_steps: int,
                    warmup_steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """Per-step factor: linear warm-up to 1 over ``warmup_steps``, then cosine decay to 0."""
    warmup_steps = min(warmup_steps, total_steps - 1)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / (warmup_steps + 1)
        progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def default_loss(label_smoothing: float = 0.0) -> LossFn:
    def loss_fn(logits: torch.Tensor, targets: torch.Tensor, inputs: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.float(), targets, label_smoothing=label_smoothing)

    return loss_fn


@dataclass
class Precision:
    """Autocast settings for one device: bf16 or fp16 (with a grad scaler) on CUDA, none on CPU."""

    dtype: torch.dtype | None = None
    scaler: torch.amp.GradScaler | None = None

    @classmethod
    def for_device(cls, device: str, amp: bool) -> Precision:
        if not (amp and torch.device(device).type == "cuda"):
            return cls()
        if torch.cuda.is_bf16_supported():
            return cls(torch.bfloat16)
        return cls(torch.float16, torch.amp.GradScaler("cuda"))

    def autocast(self, device: str) -> torch.autocast:
        return torch.autocast(torch.device(device).type, dtype=self.dtype,
                              enabled=self.dtype is not None)


def train_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
               optimizer: torch.optim.Optimizer, loss_fn: LossFn, precision: Precision,
               device: str) -> torch.Tensor:
    """One optimizer step; returns the detached loss (no host sync, so CUDA keeps running)."""
    with precision.autocast(device):
        loss = loss_fn(model(x), y, x)
    optimizer.zero_grad(set_to_none=True)
    if precision.scaler is not None:
        precision.scaler.scale(loss).backward()
        precision.scaler.step(optimizer)
        precision.scaler.update()
    else:
        loss.backward()
        optimizer.step()
    return loss.detach()


@torch.inference_mode()
def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, *, batch_size: int = 1000,
             device: str = "cpu") -> dict[str, float]:
    """Accuracy and mean cross-entropy of ``model`` on ``(x, y)``, in eval mode."""
    model.eval()
    if len(y) == 0:
        return {"acc": math.nan, "loss": math.nan}
    fmt = _memory_format(model)
    correct = torch.zeros((), device=device)
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    for i in range(0, len(y), batch_size):
        xb = x[i:i + batch_size].to(device, non_blocking=True, memory_format=fmt)
        yb = y[i:i + batch_size].to(device, non_blocking=True)
        logits = model(xb).float()
        loss_sum += F.cross_entropy(logits, yb, reduction="sum").double()
        correct += (logits.argmax(1) == yb).sum()
    return {"acc": correct.item() / len(y), "loss": loss_sum.item() / len(y)}


def channels_last_convs(model: nn.Module) -> torch.memory_format:
    """Put the weights of plain ``nn.Conv2d`` layers in channels_last; return the input format.

    Only plain convs: analog layers (aihwkit tiles) refuse a memory-format change, and a layer
    that refuses is left as it is. Activations then flow in channels_last from the first conv.
    """
    converted = False
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            try:
                m.to(memory_format=torch.channels_last)
                converted = True
            except Exception:  # noqa: BLE001 - a layer that cannot convert stays as it is
                continue
    return torch.channels_last if converted else torch.contiguous_format


def _memory_format(model: nn.Module) -> torch.memory_format:
    """channels_last when any conv weight is unambiguously stored so (1-channel convs are
    contiguous in both formats, so every conv is looked at, not just the first)."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d) and not m.weight.is_contiguous() \
                and m.weight.is_contiguous(memory_format=torch.channels_last):
            return torch.channels_last
    return torch.contiguous_format


def fit(model: nn.Module, data: DataSplits, cfg: FitConfig | None = None, *,
        loss_fn: LossFn | None = None, optimizer: torch.optim.Optimizer | None = None,
        step_hook: StepHook | None = None,
        on_epoch: Callable[[dict[str, float]], None] | None = None) -> FitResult:
    """Train ``model`` in place on ``data.x_train`` and evaluate on the val split every epoch.

    ``loss_fn(logits, targets, inputs)`` replaces cross-entropy (distillation); ``optimizer``
    replaces the built one (e.g. analog SGD) and still gets the warm-up/cosine schedule;
    ``step_hook(model)`` runs after every optimizer step (e.g. weight clipping); ``on_epoch`` gets
    each epoch's history entry as it is made (progress output). The global RNG is
    seeded with ``cfg.seed`` inside and restored after, so the caller's random state is untouched.
    The model is left in eval mode. A NaN/inf loss raises ``NonFiniteLoss`` naming the step.
    """
    cfg = cfg or FitConfig()
    aug = Augment(data.crop_pad, data.flip) if cfg.augment else None
    loader = DeviceLoader(data.x_train, data.y_train, batch_size=cfg.batch_size,
                          device=cfg.device, augment=aug, seed=cfg.seed)
    run, total = prepare(model, cfg, len(loader), loss_fn=loss_fn, optimizer=optimizer,
                         step_hook=step_hook, on_epoch=on_epoch)
    x_val, y_val = data.x_val.to(cfg.device), data.y_val.to(cfg.device)
    with torch.random.fork_rng(devices=rng_devices(cfg.device)), tf32_block(cfg.tf32):
        torch.manual_seed(stream_seed(cfg.seed, "dropout"))
        return _fit_epochs(model, loader, total, run, (x_val, y_val), cfg)


@dataclass
class TrainRun:
    """What every training step needs; ``fit`` and ``hwnas.train.ddp`` both step through it."""

    loss_fn: LossFn
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    precision: Precision
    device: str
    memory_format: torch.memory_format
    step_hook: StepHook | None
    on_epoch: Callable[[dict[str, float]], None] | None = None

    def step(self, net: nn.Module, x: torch.Tensor, y: torch.Tensor,
             model: nn.Module | None = None) -> torch.Tensor:
        """One step: input memory format, optimizer step, schedule, then ``step_hook(model)``
        (``model`` is the bare module when ``net`` wraps it in DDP)."""
        x = x.contiguous(memory_format=self.memory_format)
        loss = train_step(net, x, y, self.optimizer, self.loss_fn, self.precision, self.device)
        self.scheduler.step()
        if self.step_hook is not None:
            self.step_hook(model if model is not None else net)
        return loss


def prepare(model: nn.Module, cfg: FitConfig, batches_per_epoch: int, *,
            loss_fn: LossFn | None = None, optimizer: torch.optim.Optimizer | None = None,
            step_hook: StepHook | None = None,
            on_epoch: Callable[[dict[str, float]], None] | None = None,
            device: str | None = None) -> tuple[TrainRun, int]:
    """Move ``model`` to ``device`` (channels_last convs when ``cfg.channels_last``) and build
    its optimizer, schedule and precision; returns the run and its total step budget."""
    device = device or cfg.device
    model.to(device)
    fmt = channels_last_convs(model) if cfg.channels_last else torch.contiguous_format
    total = cfg.steps or max(1, math.ceil(cfg.epochs * batches_per_epoch))
    opt = optimizer or build_optimizer(model, cfg)
    sched = build_scheduler(opt, total, round(cfg.warmup_epochs * batches_per_epoch))
    run = TrainRun(loss_fn or default_loss(cfg.label_smoothing), opt, sched,
                   Precision.for_device(device, cfg.amp), device, fmt, step_hook, on_epoch)
    return run, total


def _fit_epochs(model: nn.Module, loader: DeviceLoader, total: int, run: TrainRun,
                val_split: tuple[torch.Tensor, torch.Tensor], cfg: FitConfig) -> FitResult:
    start, train_s, step, history = time.perf_counter(), 0.0, 0, []
    skipped = {"acc": math.nan, "loss": math.nan}
    while step < total:
        t0 = time.perf_counter()
        done, loss = _train_epoch(model, loader, total - step, run, step)
        _sync(run.device)
        train_s += time.perf_counter() - t0
        step += done
        due = cfg.validation == "epoch" or (cfg.validation == "end" and step >= total)
        val = evaluate(model, *val_split, batch_size=cfg.eval_batch_size,
                       device=run.device) if due else skipped
        history.append({"epoch": step / len(loader), "step": step, "train_loss": loss,
                        "val_acc": val["acc"], "val_loss": val["loss"],
                        "lr": run.optimizer.param_groups[0]["lr"],
                        "seconds": time.perf_counter() - start})
        if run.on_epoch is not None:
            run.on_epoch(history[-1])
    model.eval()  # as promised, also when no validation pass put it there
    last = history[-1]
    return FitResult(epochs=step / len(loader), steps=step, train_loss=last["train_loss"],
                     val_acc=last["val_acc"], val_loss=last["val_loss"],
                     seconds=time.perf_counter() - start, train_seconds=train_s,
                     images_per_s=step * loader.batch_size / max(train_s, 1e-9), history=history)


def _train_epoch(model: nn.Module, loader: DeviceLoader, max_steps: int, run: TrainRun,
                 first_step: int) -> tuple[int, float]:
    """At most ``max_steps`` steps of one pass over the loader; returns (steps, mean loss)."""
    model.train()
    # Checking the loss syncs with the device: every step on CPU (free), every 50 on CUDA.
    check_every = 50 if torch.device(run.device).type == "cuda" else 1
    losses: list[torch.Tensor] = []
    for x, y in loader:
        if len(losses) == max_steps:
            break
        losses.append(run.step(model, x, y))
        if len(losses) % check_every == 0:
            _check_finite(losses[-check_every:], first_step + len(losses) - check_every, run)
    _check_finite(losses, first_step, run)
    return len(losses), torch.stack(losses).float().mean().item()


def _check_finite(losses: list[torch.Tensor], first_step: int, run: TrainRun) -> None:
    finite = torch.isfinite(torch.stack(losses).float())
    if not bool(finite.all()):
        bad = int((~finite).nonzero()[0, 0])
        lr = run.optimizer.param_groups[0].get("initial_lr", run.optimizer.param_groups[0]["lr"])
        raise NonFiniteLoss(Problem(
            "training", "the loss must stay finite", f"{losses[bad].item()} at step "
            f"{first_step + bad + 1}", f"lower the learning rate (peak lr {lr:g}) or add warm-up"))


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


__all__ = ["FitConfig", "FitResult", "NonFiniteLoss", "Precision", "TrainRun", "build_optimizer",
           "build_scheduler", "channels_last_convs", "default_loss", "evaluate", "fit", "prepare",
           "train_step"]
