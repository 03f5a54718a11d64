"""The analog report's measurements: drift curves on several devices with paired programmings,
per-layer sensitivity and the digital layers that meet an accuracy-loss budget.

One meaning of SE everywhere: ``se`` is the standard error of a mean accuracy, from the spread
over programmings and from scoring on a finite image set (``analog.precision.standard_error``);
the 95% band is ``mean +- 1.96 se``. ``std`` is the spread over programmings itself (how much
one programmed chip varies), drawn separately. Paired differences between devices use common
random numbers: repeat ``r`` draws from the same seeded streams on every device
(``analog.evaluate``'s ``seed``), so their SE is that of the per-repeat differences. The
sensitivity's losses and gains and the recommendation's verified loss score the same images on
the same seeds too, and are paired image by image (``analog.precision.paired_estimate``): an
image both evaluations get right, or both wrong, adds no sampling error to their difference.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import Tensor, nn

from analog import defaults
from analog.adabs import recalibrate, training_images
from analog.coverage import mappable_layers
from analog.drift import DriftResult, TimePoint, accuracy, correct_mask, evaluate
from analog.hw import get_hw
from analog.precision import paired_estimate, sampling_se
from analog.protocol import ScoringProtocol
from analog.times import parse_times
from analog.wpo import WpoResult, WpoSettings, optimize_programming
from hwnas.common.errors import ConfigError
from hwnas.train.data import DataSplits

Z95 = 1.96


@dataclass(frozen=True, kw_only=True)
class ReportConfig:
    """What one report measures; saved with it."""

    hw: tuple[str, ...] = (defaults.HW,)
    """Analog hardware models compared (``hwnas analog list``), on the same programming seeds."""
    times: tuple[str, ...] = ("1s", "1h", "1d", "30d", "1y")
    repeats: int = 3
    """Programmings per device and drift time (the SE shows what they buy)."""
    images: int = 500
    """Test images per pass of the drift curves."""
    seed: int = 0
    adabs: int = defaults.ADABS_IMAGES
    """AdaBS training images (0: off); the curves are drawn with and without it."""
    sensitivity_time: str = "1d"
    sensitivity_images: int = 300
    sensitivity_repeats: int = 2
    sensitivity: bool = True
    """Per-layer sensitivity and the recommended digital layers."""
    sensitivity_top: int | None = 8
    """Layers whose gain when kept digital is measured: the ``sensitivity_top`` with the
    largest loss when only they are analog (None: every layer). The loss pass is cheap (one
    layer emulated, the rest digital); a gain needs every other layer emulated."""
    budget: float = 1.0
    """Accuracy loss (points) allowed at ``sensitivity_time``, against the digital model with
    the sensitivity's AdaBS (``ReportResult.sensitivity_reference``)."""
    max_verify: int = 4
    """Evaluations that verify (and grow) the recommended digital set."""
    wpo: WpoSettings | None = None
    """Weight-programming optimisation (``analog.wpo``): each device is also drawn as
    ``<device>+wpo``, programmed with the table aihwkit's optimiser finds for this model over
    ``times``, paired against the device on the same seeds (None: off)."""
    fast: bool = defaults.FAST
    calib_size: int = defaults.CALIB_IMAGES
    batch_size: int = 500
    device: str = "cpu"

    def __post_init__(self) -> None:
        if len(set(self.hw)) != len(self.hw) or not self.hw:
            raise ConfigError.one("hw", "must list one or more distinct hardware models",
                                  list(self.hw), "name each device once, e.g. pcm_static,pcm")
        if self.sensitivity_top is not None and self.sensitivity_top < 1:
            raise ConfigError.one("sensitivity_top", "must be >= 1 (or None: every layer)",
                                  self.sensitivity_top, "pass e.g. 8")


@dataclass
class Estimate:
    mean: float
    se: float
    std: float
    repeats: int

    @classmethod
    def of(cls, point: TimePoint) -> Estimate:
        return cls(point.acc_mean, point.acc_se, point.acc_std, len(point.accs))


@dataclass
class LayerSensitivity:
    layer: str
    weights: int
    loss_only_analog: Estimate
    """Digital accuracy minus the accuracy with only this layer analog (points x 0.01)."""
    gain_only_digital: Estimate | None
    """Accuracy with only this layer digital minus the all-analog accuracy (None: not
    measured, its loss alone was below that of the ``sensitivity_top`` layers)."""


@dataclass
class Recommendation:
    digital: list[str]
    predicted_loss: float
    verified: Estimate | None
    verified_loss: float | None
    meets_budget: bool
    tries: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ReportResult:
    config: ReportConfig
    digital_acc: Estimate
    num_classes: int
    curves: dict[str, dict[str, Any]]
    """``{hw: {"adabs": DriftResult, "no_adabs": DriftResult}}``."""
    paired: dict[str, list[dict[str, float]]]
    sensitivity: list[LayerSensitivity]
    all_analog: Estimate | None
    recommendation: Recommendation | None
    sensitivity_reference: Estimate | None
    """What the sensitivity's losses are measured from: the digital model on the sensitivity
    images, its batch norms re-estimated on the same AdaBS images as every analog score (the
    re-estimate alone moves a model's accuracy, and would otherwise count as every layer's
    loss); as trained where AdaBS is off."""
    warnings: list[str]
    seconds: dict[str, float]
    wpo: list[WpoResult] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        curves = {hw: {k: v.as_dict() | {"scoring": defaults.scoring_record(v)}
                       for k, v in c.items()} for hw, c in self.curves.items()}
        return {"config": asdict(self.config), "digital_acc": asdict(self.digital_acc),
                "num_classes": self.num_classes, "curves": curves, "paired": self.paired,
                "sensitivity": [asdict(s) for s in self.sensitivity],
                "all_analog": None if self.all_analog is None else asdict(self.all_analog),
                "recommendation": None if self.recommendation is None
                else asdict(self.recommendation),
                "sensitivity_reference": None if self.sensitivity_reference is None
                else asdict(self.sensitivity_reference),
                "warnings": self.warnings, "seconds": self.seconds,
                "wpo": [w.as_dict() for w in self.wpo],
                "se_meaning": __doc__.split("\n\n")[1].replace("\n", " ")}


@dataclass
class _Scored:
    """An evaluation at the sensitivity time: its estimate and each repeat's per-image hits."""

    est: Estimate
    hits: list[Tensor]

    def minus(self, other: _Scored) -> Estimate:
        """``self - other``, paired image by image and repeat by repeat: every sensitivity
        evaluation scores the same images on the same seeds (``paired_estimate``)."""
        mean, se, std = paired_estimate(self.hits, other.hits)
        return Estimate(mean, se, std, max(self.est.repeats, other.est.repeats))


@dataclass
class _Scorer:
    model: nn.Module
    data: DataSplits
    cfg: ReportConfig
    log: Callable[[str], None]
    ready: nn.Module | None = None
    """The model with its sensitivity device's static input ranges set (``_calibrated_once``)."""
    variants: dict[str, WpoResult] = field(default_factory=dict)
    """Curves drawn on a device with options: ``<device>+wpo`` -> its optimised programming."""

    def run(self, name: str, times: tuple[str, ...], *, images: int, repeats: int,
            adabs: int, digital: list[str] | tuple[str, ...] = (),
            keep: bool = False) -> DriftResult:
        d, c = self.data, self.cfg
        variant = self.variants.get(name)
        hw, options = (name, None) if variant is None else (variant.hw, variant.options)
        protocol = ScoringProtocol(times=times, repeats=repeats, seed=c.seed, fast=c.fast,
                                   adabs=adabs, digital=list(digital), options=options,
                                   batch_size=c.batch_size, device=c.device, keep_correct=keep)
        return evaluate(self.model, d.x_test[:images], d.y_test[:images], hw, protocol,
                        calib=d.x_train[:c.calib_size],
                        adabs_images=training_images(d.x_train, adabs, c.seed))

    def at(self, digital: list[str] | tuple[str, ...], *, shared: bool = False) -> _Scored:
        """Accuracy at the sensitivity time with ``digital`` kept digital. ``shared``: on the
        all-analog model's static input ranges (``_calibrated_once``) instead of ranges
        calibrated for this digital set."""
        c = self.cfg
        model = self.model
        if shared:
            if self.ready is None:
                self.ready = _calibrated_once(self.model, self.data, c)
            model = self.ready
        result = _Scorer(model, self.data, c, self.log).run(
            c.hw[0], (c.sensitivity_time,), images=c.sensitivity_images,
            repeats=c.sensitivity_repeats, adabs=c.adabs if _has_bn(self.model) else 0,
            digital=digital, keep=True)
        return _Scored(Estimate.of(result.points[0]), result.points[0].correct)


def _calibrated_once(model: nn.Module, data: DataSplits, cfg: ReportConfig) -> nn.Module:
    """The model with the first device's static input ranges of the all-analog mapping, set
    once for the 2 evaluations per layer of the sensitivity (``evaluate`` keeps them, as it
    keeps HWA ranges, instead of calibrating again). aihwkit's quantile calibration reads each
    layer's inputs through the layers before it with their clipping, so a layer kept digital
    moves the ranges after it slightly (under 1% on the tests' CNN): every layer is ranked on
    the same ranges, and the recommendation is verified on ranges calibrated for its own set."""
    hw = get_hw(cfg.hw[0])
    return hw.calibrated(model, hw.rpu_config(), data.x_train[:cfg.calib_size])


def _digital(model: nn.Module, data: DataSplits, cfg: ReportConfig, images: int) -> Estimate:
    acc = accuracy(model.eval().to(cfg.device), data.x_test[:images], data.y_test[:images],
                   batch_size=cfg.batch_size, device=cfg.device)
    return Estimate(acc, sampling_se(acc, images), 0.0, 1)


def _reference(model: nn.Module, data: DataSplits, cfg: ReportConfig) -> _Scored:
    """The digital accuracy the sensitivity's losses start from (``sensitivity_reference``)."""
    ref = model
    if cfg.adabs and _has_bn(model):
        ref = copy.deepcopy(model).to(cfg.device)
        recalibrate(ref, training_images(data.x_train, cfg.adabs, cfg.seed),
                    batch_size=cfg.batch_size, device=cfg.device)
    n = cfg.sensitivity_images
    hits = correct_mask(ref.eval().to(cfg.device), data.x_test[:n], data.y_test[:n],
                        batch_size=cfg.batch_size, device=cfg.device)
    acc = int(hits.sum()) / max(len(hits), 1)
    return _Scored(Estimate(acc, sampling_se(acc, len(hits)), 0.0, 1), [hits])


def paired_differences(base: DriftResult, other: DriftResult) -> list[dict[str, float]]:
    """Per drift time, ``other - base`` over repeats drawn on the same seeds (mean, se, n)."""
    out = []
    for p, q in zip(base.points, other.points, strict=True):
        diffs = [b - a for a, b in zip(p.accs, q.accs, strict=False)]
        se = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else math.nan
        out.append({"t": p.label, "t_s": p.t, "mean": statistics.fmean(diffs), "se": se,
                    "repeats": len(diffs)})
    return out


def _has_bn(model: nn.Module) -> bool:
    """AdaBS re-estimates batch norms: without one the AdaBS curve would repeat the other."""
    return any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())


def _optimized(s: _Scorer) -> None:
    """Each device's optimised programming (``ReportConfig.wpo``), as a curve to draw."""
    for hw in s.cfg.hw:
        res = optimize_programming(s.model, hw, parse_times(s.cfg.times), s.cfg.wpo)
        s.variants[f"{hw}+wpo"] = res
        s.log(f"{hw}: programming optimised in {res.seconds:.0f} s, weight error (TNMSE) "
              f"{res.baseline_tnmse:.4f} -> {res.optimized_tnmse:.4f}"
              + ("" if res.beats_baseline else " (not below the device's own programming)"))


def _curves(s: _Scorer) -> dict[str, dict[str, DriftResult]]:
    c, out = s.cfg, {}
    for hw in (*c.hw, *s.variants):
        out[hw] = {}
        for key, n in (("adabs", c.adabs), ("no_adabs", 0)):
            if key == "adabs" and not (n and _has_bn(s.model)):
                continue
            start = time.perf_counter()
            out[hw][key] = s.run(hw, c.times, images=c.images, repeats=c.repeats, adabs=n)
            s.log(f"{hw} {'AdaBS ' + str(n) if n else 'AdaBS off'}: " + "  ".join(
                f"{p.label} {100 * p.acc_mean:.1f}+-{100 * p.acc_se:.1f}"
                for p in out[hw][key].points) + f" [{time.perf_counter() - start:.0f} s]")
    return out


def _sensitivity(s: _Scorer, layers: list[str], all_analog: _Scored,
                 digital: _Scored) -> list[LayerSensitivity]:
    """Every layer's loss when only it is analog; then, for the ``sensitivity_top`` largest
    losses, the gain when only it is kept digital. Ranked by gain, the unmeasured after the
    measured in the order of their loss."""
    modules, losses = dict(s.model.named_modules()), {}
    for i, name in enumerate(layers):
        losses[name] = digital.minus(s.at([n for n in layers if n != name], shared=True))
        s.log(f"layer {i + 1}/{len(layers)} {name}: loss alone "
              f"{100 * losses[name].mean:.1f} pt")
    by_loss = sorted(layers, key=lambda n: -losses[n].mean)
    top = by_loss if s.cfg.sensitivity_top is None else by_loss[:s.cfg.sensitivity_top]
    out = []
    for i, name in enumerate(by_loss):
        gain = s.at([name], shared=True).minus(all_analog) if name in top else None
        out.append(LayerSensitivity(name, modules[name].weight.numel(), losses[name], gain))
        if gain is not None:
            s.log(f"kept digital {i + 1}/{len(top)} {name}: gain {100 * gain.mean:.1f} pt")
    return sorted(out, key=lambda x: math.inf if x.gain_only_digital is None
                  else -x.gain_only_digital.mean)


def recommend(s: _Scorer, ranked: list[LayerSensitivity], all_analog: _Scored,
              digital: _Scored) -> Recommendation:
    """Greedy on the gains (largest first, assumed additive) until the predicted loss meets the
    budget; then evaluated, and grown one layer per try while the measured loss misses it."""
    budget = s.cfg.budget / 100
    loss = digital.est.mean - all_analog.est.mean
    chosen: list[str] = []
    for layer in ranked:
        if loss <= budget or layer.gain_only_digital is None \
                or layer.gain_only_digital.mean <= 0:
            break
        chosen.append(layer.layer)
        loss -= layer.gain_only_digital.mean
    rest = [r.layer for r in ranked if r.layer not in chosen]
    rec = Recommendation(list(chosen), loss * 100, None, None, False)
    for attempt in range(s.cfg.max_verify):
        measured = s.at(rec.digital) if rec.digital else all_analog
        loss_est = digital.minus(measured)
        rec.verified, rec.verified_loss = measured.est, loss_est.mean * 100
        rec.tries.append({"digital": list(rec.digital), "loss": rec.verified_loss,
                          "se": 100 * loss_est.se})
        rec.meets_budget = rec.verified_loss <= s.cfg.budget
        if rec.meets_budget or not rest or attempt == s.cfg.max_verify - 1:
            break  # the set reported is the last one measured
        rec.digital.append(rest.pop(0))
    return rec


def _warnings(digital: Estimate, num_classes: int) -> list[str]:
    chance = 1 / max(num_classes, 1)
    if digital.mean < chance + 3 * max(digital.se, 0.01) or digital.mean < 1.5 * chance:
        return [f"the digital reference scores {100 * digital.mean:.1f}% on {num_classes} "
                f"classes (chance {100 * chance:.1f}%): the weights are untrained or do not "
                "belong to this model or data set; analog losses measured from it mean nothing"]
    return []


def run_report(model: nn.Module, data: DataSplits, cfg: ReportConfig, *,
               log: Callable[[str], None] = print) -> ReportResult:
    """Everything the report shows, measured on ``model`` (digital, eval mode) and ``data``
    (``hwnas.train.data.DataSplits``: test images scored, training images for AdaBS and
    calibration)."""
    s, secs = _Scorer(model.eval(), data, cfg, log), {}
    start = time.perf_counter()
    digital = _digital(model, data, cfg, cfg.images)
    warn = _warnings(digital, data.num_classes)
    for line in warn:
        log(f"WARNING: {line}")
    if cfg.wpo is not None:
        _optimized(s)
    curves = _curves(s)
    key = "adabs" if "adabs" in curves[cfg.hw[0]] else "no_adabs"
    # every device against the first; an optimised programming against its own device
    against = {hw: cfg.hw[0] for hw in cfg.hw[1:]} | {n: v.hw for n, v in s.variants.items()}
    paired = {hw: [d | {"against": base} for d in
                   paired_differences(curves[base][key], curves[hw][key])]
              for hw, base in against.items()}
    secs["curves"] = time.perf_counter() - start
    sens, rec, all_analog, digital_s = [], None, None, None
    if cfg.sensitivity:
        start = time.perf_counter()
        digital_s = _reference(model, data, cfg)
        all_analog = s.at([])
        sens = _sensitivity(s, mappable_layers(model), all_analog, digital_s)
        rec = recommend(s, sens, all_analog, digital_s)
        secs["sensitivity"] = time.perf_counter() - start
    return ReportResult(cfg, digital, data.num_classes, curves, paired, sens,
                        all_analog and all_analog.est, rec, digital_s and digital_s.est, warn,
                        secs, list(s.variants.values()))
