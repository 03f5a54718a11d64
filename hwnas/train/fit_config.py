"""``FitConfig``: how to train one model, the one training configuration of hwnas.

Each field is declared once, with ``setting(default, description, bounds)``: its type, default,
meaning and bounds. ``FitConfig`` checks the bounds itself, and the study file's ``train``
section (``nas.study.config.TrainCfg``) is built from the same declarations, so a study and a
library call train alike and the manual reads one description per field. It lives apart from the
loop (no torch import at module level) so that study files load without torch.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, Literal, NamedTuple

from hwnas.common.errors import ConfigError, Problem

Optimizer = Literal["sgd", "adamw"]
Validation = Literal["epoch", "end", "off"]
OPTIMIZERS: tuple[str, ...] = typing.get_args(Optimizer)
VALIDATION: tuple[str, ...] = typing.get_args(Validation)
_DEFAULT_LR = {"sgd": 0.1, "adamw": 1e-3}
_BOUNDS = ("gt", "ge", "lt")


def setting(default: Any, description: str, *, gt: float | None = None,
            ge: float | None = None, lt: float | None = None, example: Any = None) -> Any:
    """A ``FitConfig`` field: default, description and bounds (``gt``/``ge``/``lt``, as
    pydantic spells them). ``example`` is the value the fix of a bad input suggests (default:
    the default)."""
    bounds = {k: v for k, v in zip(_BOUNDS, (gt, ge, lt), strict=True) if v is not None}
    return field(default=default, metadata={"description": description, "bounds": bounds,
                                            "example": default if example is None else example})


class Setting(NamedTuple):
    """One declared field of a config dataclass, its annotation resolved."""

    name: str
    type: Any
    default: Any
    description: str
    bounds: dict[str, float]
    example: Any


@cache
def settings(cls: type) -> tuple[Setting, ...]:
    """The fields of a dataclass declared with ``setting`` (``FitConfig`` or a subclass)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        if "description" not in f.metadata:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with setting(): give it "
                            "a default, a description and its bounds there")
        out.append(Setting(f.name, hints[f.name], f.default, f.metadata["description"],
                           dict(f.metadata["bounds"]), f.metadata["example"]))
    return tuple(out)


@dataclass
class FitConfig:
    """How to train one model. Validated on construction: every bad field is reported at once."""

    epochs: float = setting(1.0, "passes over the train split (fractions allowed); ignored when "
                            "`steps` is set", gt=0)
    steps: int | None = setting(None, "optimizer steps budget instead of epochs (None: train "
                                "for `epochs`)", gt=0, example=100)
    batch_size: int = setting(128, "training batch size", gt=0)
    lr: float | None = setting(None, "peak learning rate; None picks 0.1 for sgd and 1e-3 for "
                               "adamw", gt=0, example=0.1)
    optimizer: Optimizer = setting("sgd", "sgd (Nesterov momentum) or adamw")
    weight_decay: float = setting(5e-4, "weight decay, applied to weights only: biases and norm "
                                  "parameters are not decayed", ge=0)
    momentum: float = setting(0.9, "SGD momentum, or AdamW's beta1", ge=0, lt=1)
    label_smoothing: float = setting(0.0, "label smoothing of the cross-entropy", ge=0, lt=1,
                                     example=0.1)
    warmup_epochs: float = setting(0.0, "linear warm-up from 0 to `lr`, then cosine decay to 0 "
                                   "over the rest of the budget", ge=0, example=0.5)
    augment: bool = setting(True, "the data set's own augmentation (random translate; flip "
                            "where it keeps the label)")
    seed: int = setting(0, "seeds the batch order, augmentation and randomness inside the model "
                        "(dropout), each from its own stream (hwnas.common.seeds)")
    device: str = setting("cpu", "cpu | cuda | cuda:N")
    amp: bool = setting(True, "mixed precision on CUDA (bf16 where supported, else fp16 with "
                        "loss scaling); off on CPU")
    tf32: bool = setting(False, "TF32 for fp32 matmuls and convolutions on CUDA, set explicitly "
                         "for the run and restored after (cuDNN's default is TF32, so fp32 "
                         "training without this is most likely TF32)")
    channels_last: bool = setting(True, "channels_last memory format for plain convs, on CPU "
                                  "too: oneDNN and cuDNN run it faster (1.3-1.4x training "
                                  "throughput on CPU for the CNN spaces, measured by the "
                                  "training-loop bench)")
    eval_batch_size: int = setting(1000, "images per batch when scoring (memory, not results)",
                                   gt=0)
    validation: Validation = setting("epoch", "when to score the val split while training: "
                                     "epoch (after every epoch, the history), end (after the "
                                     "last one only) or off (never; FitResult.val_acc is NaN), "
                                     "for a caller that scores the model itself afterwards")

    def __post_init__(self) -> None:
        if self.lr is None and self.optimizer in _DEFAULT_LR:
            self.lr = _DEFAULT_LR[self.optimizer]
        problems = self.problems()
        if problems:
            raise ConfigError(problems)

    def problems(self) -> list[Problem]:
        # epochs are not read when a steps budget is set, so they are not checked then
        skip = {"epochs"} if self.steps is not None else set()
        out = [p for s in settings(type(self)) if s.name not in skip
               for p in [_problem(s, getattr(self, s.name), type(self).__name__)] if p]
        if isinstance(self.device, str) and not device_ok(self.device):
            out.append(Problem(f"{type(self).__name__}.device",
                               "must be cpu or an available cuda device", self.device,
                               "pass --device cpu on a machine without GPU"))
        return out


def _problem(s: Setting, value: Any, owner: str) -> Problem | None:
    """The problem of one field's value against its declared type and bounds, or None."""
    optional, kind = _kind(s.type)
    if value is None and optional:
        return None
    where = f"{owner}.{s.name}"
    if typing.get_origin(kind) is Literal:
        choices = list(typing.get_args(kind))
        return None if value in choices else Problem(
            where, f"must be one of {choices}", value, f"pass one of {', '.join(choices)}")
    if _fits(kind, value) and _in_bounds(value, s.bounds):
        return None
    return Problem(where, _rule(kind, s.bounds, optional), value,
                   f"pass e.g. {s.name}={s.example!r}")


def _kind(annotation: Any) -> tuple[bool, Any]:
    """(None allowed, the type without None); a field is one type, optionally with None."""
    args = typing.get_args(annotation)
    if type(None) in args:
        return True, next(a for a in args if a is not type(None))
    return False, annotation


def _fits(kind: Any, value: Any) -> bool:
    if kind is float:
        return not math.isnan(_num(value))
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind) if isinstance(kind, type) else True


def _in_bounds(value: Any, bounds: dict[str, float]) -> bool:
    v = _num(value)
    checks = {"gt": lambda b: v > b, "ge": lambda b: v >= b, "lt": lambda b: v < b}
    return all(checks[k](b) for k, b in bounds.items())


def _rule(kind: Any, bounds: dict[str, float], optional: bool) -> str:
    """``must be an int > 0``, ``must be a number in [0, 1)``, ``must be true or false``, ..."""
    noun = {int: "an int", float: "a number", bool: "true or false", str: "a string"}.get(
        kind, getattr(kind, "__name__", str(kind)))
    low = (f"[{bounds['ge']}" if "ge" in bounds else f"({bounds['gt']}" if "gt" in bounds
           else None)
    if low and "lt" in bounds:
        span = f" in {low}, {bounds['lt']})"
    else:
        span = "".join(f" {op} {bounds[k]}" for k, op in (("gt", ">"), ("ge", ">="), ("lt", "<"))
                       if k in bounds)
    return f"must be {'None or ' if optional else ''}{noun}{span}"


def _num(v: object) -> float:
    """A number to compare, or NaN for anything else (so every check on it fails)."""
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan


def device_ok(device: str) -> bool:
    """Whether ``device`` names the CPU or a CUDA device this machine has."""
    import torch  # deferred: study files validate without loading torch

    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        return False
    return dev.type == "cpu" or (dev.type == "cuda" and torch.cuda.is_available())
