"""Accuracy under a hardware model, per drift time, as an estimate: mean, std, SE, repeats.

The drift experiment follows aihwkit's protocol: the model in eval mode; for each repeat
``program_analog_weights()`` (fresh programming noise; aihwkit re-programs on drift only when
nothing was programmed, so without it all repeats would share one draw), then
``drift_analog_weights(t)``, optionally AdaBS (``analog.adabs``: batch-norm statistics
re-estimated through the analog model), and a pass over the evaluation images for each time
``t``. Each step draws from its own seeded stream (``hwnas.common.seeds``). Programmings and
images can be sized for a target standard error (``analog.precision``).
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from analog.adabs import check_adabs, default_adabs, recalibrate, warn_without_bn
from analog.channels import dead_channels
from analog.coverage import coverage, warn_if_partial
from analog.fast import FastAnalogModel, fast_unsupported
from analog.hw import HardwareModel, get_hw
from analog.inference_options import ir_drop_t_layer_problems
from analog.input_ranges import has_learned_input_ranges
from analog.precision import PrecisionTarget, images_for, more_repeats, standard_error
from analog.protocol import ScoringProtocol
from analog.times import format_time, parse_times
from hwnas.common.errors import ConfigError, Problem
from hwnas.common.seeds import rng_devices, stream_seed
from hwnas.common.settings import settle


class FastPathWarning(UserWarning):
    """The fast analog path cannot emulate this configuration; aihwkit is used instead."""


class AnalogModeWarning(UserWarning):
    """An analog model was handed over in train mode and is switched to eval mode."""


class DeadChannelWarning(UserWarning):
    """Channels with all-zero weights feed a batch norm: on tiles they read amplified noise."""


def _warn_dead(model: nn.Module, hw: HardwareModel, notes: list[str]) -> None:
    n = dead_channels(model)
    if n:
        note = (f"{hw.name}: {n} dead channel(s) (all-zero weights, constant batch-norm input) "
                "read programming noise that the batch norm amplifies about 300x; "
                "analog.freeze_dead_channels(model) removes them without changing the digital "
                "function")
        warnings.warn(note, DeadChannelWarning, stacklevel=4)
        notes.append(note)


@dataclass
class TimePoint:
    """Accuracy at one drift time over all repeats: an estimate with its spread.

    ``acc_std``: sample std over programmings; ``acc_se``: standard error of ``acc_mean``, from
    the programmings and from scoring on ``images`` images (``analog.precision``).
    """

    t: float
    label: str
    acc_mean: float
    acc_std: float
    accs: list[float]
    acc_se: float = 0.0
    acc_median: float = math.nan
    images: int = 0
    correct: list[Tensor] | None = field(default=None, repr=False, compare=False)
    """Per repeat, which scored images were classified correctly (bool), when the protocol
    keeps them (``ScoringProtocol.keep_correct``): differences of two evaluations on the same
    images and seeds are then paired image by image (``analog.precision.paired_estimate``)."""

    @property
    def repeats(self) -> int:
        return len(self.accs)


@dataclass
class DriftResult:
    """Accuracies of one model under one hardware model, one ``TimePoint`` per drift time.

    ``coverage``: share of weights/MACs on analog tiles (0 for digital and quantized models).
    ``path``: ``digital``, ``quant``, ``fast`` (validated emulation) or ``aihwkit`` (its tiles).
    ``adabs``: training images that re-estimated the batch norms (0: digital statistics kept);
    ``images``: evaluation images per pass; ``target_se``: the precision asked for (or None).
    """

    hw: str
    path: str
    points: list[TimePoint]
    coverage: dict[str, Any]
    repeats: int
    seed: int
    compensation: bool
    seconds: float
    options: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    adabs: int = 0
    images: int = 0
    target_se: float | None = None
    hw_config: dict[str, Any] = field(default_factory=dict)
    """The hardware model exactly (``AnalogHW.describe``: rpu config, noise model, mapping,
    periphery) and the layers kept digital (``digital``)."""

    @property
    def times(self) -> list[float]:
        return [p.t for p in self.points]

    @property
    def acc_mean(self) -> list[float]:
        return [p.acc_mean for p in self.points]

    @property
    def acc_std(self) -> list[float]:
        return [p.acc_std for p in self.points]

    @property
    def acc_se(self) -> list[float]:
        return [p.acc_se for p in self.points]

    @property
    def accs(self) -> list[list[float]]:
        return [p.accs for p in self.points]

    def at(self, t: float | str) -> TimePoint:
        seconds = parse_times([t])[0]
        for point in self.points:
            if math.isclose(point.t, seconds):
                return point
        raise ConfigError.one("drift time", f"must be one of {[p.label for p in self.points]}",
                              t, "ask for a time that was evaluated")

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for point in out["points"]:
            point.pop("correct")  # per-image masks: kept in memory, not in records
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per time (for CSV/DataFrames)."""
        return [{"hw": self.hw, "path": self.path, "t_s": p.t, "t": p.label,
                 "acc_mean": p.acc_mean, "acc_std": p.acc_std, "acc_se": p.acc_se,
                 "acc_median": p.acc_median, "repeats": len(p.accs), "images": p.images,
                 "adabs": self.adabs, "compensation": self.compensation,
                 "weight_fraction": self.coverage.get("weight_fraction"),
                 "mac_fraction": self.coverage.get("mac_fraction")} for p in self.points]


@torch.no_grad()
def correct_mask(model: nn.Module, x: Tensor, y: Tensor, *, batch_size: int = 500,
                 device: str | torch.device = "cpu") -> Tensor:
    """Whether ``model`` classifies each image of (x, y) correctly (top-1), in batches,
    without switching modes."""
    hits = [model(x[start:start + batch_size].to(device)).argmax(-1).cpu()
            == y[start:start + batch_size] for start in range(0, len(x), batch_size)]
    return torch.cat(hits) if hits else torch.zeros(0, dtype=torch.bool)


def accuracy(model: nn.Module, x: Tensor, y: Tensor, *, batch_size: int = 500,
             device: str | torch.device = "cpu") -> float:
    """Top-1 accuracy of ``model`` on (x, y), in batches, without switching modes."""
    hits = correct_mask(model, x, y, batch_size=batch_size, device=device)
    return int(hits.sum()) / max(len(x), 1)


def is_aihwkit_model(model: nn.Module) -> bool:
    from aihwkit.nn.modules.base import AnalogLayerBase

    return any(isinstance(m, AnalogLayerBase) for m in model.modules())


@torch.no_grad()
def program_and_drift(model: nn.Module, t: float, *, reprogram: bool) -> None:
    """aihwkit/fast drift step; refuses a model in train mode (aihwkit would apply training
    modifiers and skip drift compensation in its forward)."""
    if model.training:
        raise ConfigError.one(
            "analog model mode", "drift evaluation needs eval mode", "train",
            "call model.eval() first (analog.evaluate does it for you)")
    if reprogram:
        model.program_analog_weights()
    model.drift_analog_weights(t)


def _problems(x: Tensor, y: Tensor, repeats: int) -> list[Problem]:
    problems = []
    if len(x) != len(y) or len(x) == 0:
        problems.append(Problem("evaluation data", "x and y must be non-empty and equally long",
                                (len(x), len(y)), "pass matching test images and labels"))
    if not isinstance(repeats, int) or repeats < 1:
        problems.append(Problem("repeats", "must be an integer >= 1", repeats,
                                "use >= 10 for a mean +- std worth reporting"))
    return problems


def _parse_all(times: Iterable[str | float], x: Tensor, y: Tensor,
               repeats: int) -> list[float]:
    """Drift times in seconds; every problem with the arguments is raised at once."""
    problems, seconds = _problems(x, y, repeats), []
    try:
        seconds = parse_times(list(times))
    except ConfigError as err:
        problems = err.problems + problems
    if problems:
        raise ConfigError(problems)
    return seconds


def _calib(hw: HardwareModel, x: Tensor, calib: Tensor | None, needed: bool) -> Tensor | None:
    if calib is not None or not needed:
        return calib
    warnings.warn(f"{hw.name}: no calib= images given; calibrating on the first 256 evaluation "
                  "images (pass training images to keep the test set unseen)", stacklevel=3)
    return x[:256]


def _deterministic(model, x, y, hw, times, calib, batch_size, device, options) -> DriftResult:
    start = time.perf_counter()
    applied = hw.apply(model, calib=_calib(hw, x, calib, hw.needs_calibration), **options)
    applied = applied.to(device)
    acc = accuracy(applied, x, y, batch_size=batch_size, device=device)
    points = [_point(t, [acc], len(x)) for t in times]
    return DriftResult(hw.name, hw.kind, points, {"weight_fraction": 0.0, "mac_fraction": 0.0},
                       1, 0, False, time.perf_counter() - start, dict(options), images=len(x))


def _analog_model(model, hw, x, calib, fast, device, options, notes,
                  digital=()) -> tuple[nn.Module, str]:
    if is_aihwkit_model(model):
        if model.training:
            warnings.warn("analog.evaluate got an aihwkit model in train mode; switching it to "
                          "eval mode (train mode applies weight modifiers and skips drift "
                          "compensation)", AnalogModeWarning, stacklevel=3)
        return model.eval(), "aihwkit"
    rpu = hw.rpu_config(**options)
    if options.get("ir_drop_t") is not None:
        if problems := ir_drop_t_layer_problems(f"{hw.name} options", model, x[:1], digital):
            raise ConfigError(problems)
    _warn_dead(model, hw, notes)
    reasons = fast_unsupported(model, rpu)
    calib = _calib(hw, x, calib, rpu.pre_post.input_range.enable
                   and not has_learned_input_ranges(model))
    model = hw.calibrated(model, rpu, calib, digital)  # static ranges, set once for all repeats
    if fast and not reasons:
        warn_if_partial(coverage(model, x[:1]), model, hw.name)
        return FastAnalogModel(model, rpu, device=device, calib=calib,
                               digital=digital).eval(), "fast"
    if fast:
        note = f"{hw.name}: fast path cannot emulate {', '.join(reasons)}; using aihwkit tiles"
        warnings.warn(note, FastPathWarning, stacklevel=3)
        notes.append(note)
    extra = {"digital": digital} if digital else {}
    return hw.apply(model, calib=calib, **extra, **options).to(device), "aihwkit"


def evaluate(model: nn.Module, x: Tensor, y: Tensor, hw: str | HardwareModel,
             protocol: ScoringProtocol | None = None, *, calib: Tensor | None = None,
             adabs_images: Tensor | None = None,
             progress: Callable[[str], None] | None = None, **legacy: Any) -> DriftResult:
    """Accuracy of the digital ``model`` on (x, y) under hardware model ``hw``, estimated as
    ``protocol`` says (``analog.protocol.ScoringProtocol``: times, programmings, precision
    target, seed, compensation, fast path, options, AdaBS, digital layers, batch, device).

    Analog models are programmed ``repeats`` times (fresh noise each); digital and quantized
    models are deterministic and run once. With ``target_se``, programmings grow (up to
    ``max_repeats``) until the standard error of the mean at every time is at most
    ``target_se``, on images sized for it (up to ``max_images``; ``analog.precision`` states the
    rule). AdaBS re-estimates every batch norm's statistics through the analog model on
    ``protocol.adabs`` of ``adabs_images`` (training images, never test images) after
    programming and after each drift, in every repeat (``analog.adabs``); the default (None) is
    the studies' and the CLI's: ``analog.defaults.ADABS_IMAGES`` of ``adabs_images`` when they
    are passed, off (stated in ``notes``) when they are not. ``DriftResult.adabs`` records the
    count used. The fast path is the validated torch emulation of aihwkit (falls back to aihwkit
    with a ``FastPathWarning`` when it cannot emulate the config). ``calib``: training images
    for quantizer/input-range calibration.
    Repeat ``r`` draws programming and drift noise from stream ``program`` and periphery noise
    from stream ``periphery`` of ``seed`` (``hwnas.common.seeds``), re-seeded at every drift time
    and phase, so a repeat's numbers do not depend on how many images were scored before.
    ``progress``: called with one line after each repeat (e.g. ``print``). ``legacy``: the
    protocol's fields as keywords, the earlier form (deprecated, ``settle``).
    The caller's ``model`` is never modified, except an aihwkit model passed in directly.
    """
    p = settle(ScoringProtocol, protocol, legacy, "analog.evaluate")
    hw_model = hw if isinstance(hw, HardwareModel) else get_hw(hw)
    seconds = _parse_all(p.times, x, y, p.repeats)
    target = PrecisionTarget(target_se=p.target_se, min_repeats=p.repeats,
                             max_repeats=max(p.repeats, p.max_repeats or p.repeats),
                             max_images=p.max_images)
    notes: list[str] = []
    adabs = default_adabs(p.adabs, adabs_images, model, notes)
    check_adabs(adabs, adabs_images)
    options = dict(p.options or {})
    if hw_model.kind != "analog":
        n = images_for(0.5, PrecisionTarget(max_images=p.max_images), len(x))
        return _deterministic(model, x[:n], y[:n], hw_model, seconds, calib, p.batch_size,
                              p.device, options)
    options.setdefault("compensation", p.compensation)
    digital = list(p.digital)
    if problems := hw_model.time_problems(seconds):
        raise ConfigError(problems)
    start = time.perf_counter()
    cov = None
    if is_aihwkit_model(model):
        notes.append("coverage unknown: the model was converted before; pass the digital model")
    else:
        cov = coverage(model, x[:1], digital)
    hw_config = {**hw_model.describe(**options), "digital": digital}
    if adabs and not warn_without_bn(model, hw_model.name, notes):
        adabs = 0
    n_img = len(x)
    if target.target_se is not None or p.max_images is not None:
        n_img = images_for(_rough_accuracy(model, x, y, p.batch_size, p.device), target, len(x))
    analog, path = _analog_model(model, hw_model, x, calib, p.fast, p.device, options, notes,
                                 digital)
    run = _Repeats(analog, path, x[:n_img], y[:n_img], seconds, p.seed,
                   adabs_images[:adabs] if adabs else None, p.batch_size, p.device,
                   [[] for _ in seconds] if p.keep_correct else None)
    accs = _programmings(run, target, n_img, progress, f"{hw_model.name}", start)
    points = [_point(t, a, n_img) for t, a in zip(seconds, accs, strict=True)]
    for point, masks in zip(points, run.correct or [], strict=False):
        point.correct = masks
    return DriftResult(hw_model.name, path, points, cov.as_dict() if cov else {},
                       len(accs[0]), p.seed, bool(options["compensation"]),
                       time.perf_counter() - start, options, notes, adabs=adabs, images=n_img,
                       target_se=target.target_se, hw_config=hw_config)


def _programmings(run: _Repeats, target: PrecisionTarget, n_img: int,
                  progress: Callable[[str], None] | None, name: str,
                  start: float) -> list[list[float]]:
    """Accuracy per drift time and programming: the minimum count, then more until the
    precision target holds (``analog.precision.more_repeats``)."""
    accs: list[list[float]] = [[] for _ in run.seconds]
    add = target.min_repeats
    while add:
        for r in range(len(accs[0]), len(accs[0]) + add):
            for i, acc in enumerate(run.repeat(r)):
                accs[i].append(acc)
            if progress is not None:
                progress(f"{name} programming {r + 1}: " + ", ".join(
                    f"{format_time(t)} {100 * a[r]:.1f}%" for t, a in zip(run.seconds, accs,
                                                                        strict=True))
                    + f" [{run.path}, {time.perf_counter() - start:.0f} s]")
        add = more_repeats(accs, n_img, target)
    return accs


def _rough_accuracy(model: nn.Module, x: Tensor, y: Tensor, batch_size: int, device: str) -> float:
    """Digital accuracy on at most 500 images: enough to size the evaluation set (its binomial
    error there is under 2.3 points), at a fraction of a full pass."""
    if is_aihwkit_model(model):
        return 0.5  # the worst case for p (1 - p)
    return accuracy(model.eval(), x[:500], y[:500], batch_size=batch_size, device=device)


def _point(t: float, accs: list[float], images: int) -> TimePoint:
    return TimePoint(t, format_time(t), _mean(accs), _std(accs), accs,
                     acc_se=standard_error(accs, images), acc_median=statistics.median(accs),
                     images=images)


@dataclass
class _Repeats:
    """One programming per call, scored at every drift time (with AdaBS when asked)."""

    analog: nn.Module
    path: str
    x: Tensor
    y: Tensor
    seconds: list[float]
    seed: int
    adabs_x: Tensor | None
    batch_size: int
    device: str
    correct: list[list[Tensor]] | None = None
    """Per drift time, each repeat's per-image hits (None: not kept)."""

    def _reseed(self, stream: str, *index: int | str) -> None:
        value = stream_seed(self.seed, stream, *index)
        torch.manual_seed(value)
        if self.path == "fast":
            self.analog.manual_seed(value)

    def repeat(self, r: int) -> list[float]:
        out = []
        with torch.random.fork_rng(devices=rng_devices(self.device)):
            for i, t in enumerate(self.seconds):
                self._reseed("program", r, i)
                program_and_drift(self.analog, t, reprogram=(i == 0))
                if self.adabs_x is not None:
                    self._reseed("adabs", r, i)
                    recalibrate(self.analog, self.adabs_x, device=self.device)
                self._reseed("periphery", r, i)
                hits = correct_mask(self.analog, self.x, self.y, batch_size=self.batch_size,
                                    device=self.device)
                out.append(int(hits.sum()) / max(len(self.x), 1))
                if self.correct is not None:
                    self.correct[i].append(hits)
        return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _std(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
