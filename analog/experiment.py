"""The standard analog experiment: accuracy vs. drift time, with and without HWA training,
next to digital and quantized references. ``hwnas analog-eval`` is a thin shell around it."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from torch import nn

from analog import defaults
from analog.adabs import training_images
from analog.aimc import AnalogOptions
from analog.drift import DriftResult, evaluate
from analog.hw import get_hw
from analog.hwa import HwaOptions, hwa_fit, hwa_target
from analog.protocol import ScoringProtocol
from analog.sweep import SweepPoint, run_sweeps
from analog.times import parse_times
from hwnas.common.errors import ConfigError, Problem


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """One drift experiment; saved with its results."""

    hw: str = defaults.HW
    """Analog hardware model for the drift curves (``hwnas analog list``); by default the one
    the shipped studies score."""
    times: tuple[str, ...] = ("1s", "1h", "1d", "30d", "1y")
    repeats: int = defaults.REPEATS
    """Programming repeats per curve (fresh noise, seeded)."""
    seed: int = 0
    compensation: bool = defaults.COMPENSATION
    """Global drift compensation for the main curves."""
    compare_compensation: bool = False
    """Also draw each curve with the other compensation setting."""
    adabs: int = defaults.ADABS_IMAGES
    """AdaBS: training images that re-estimate the batch norms through the analog model after
    programming and each drift (``analog.adabs``; 0: the digital statistics are kept). The
    default is the studies' (``analog.defaults``)."""
    compare_adabs: bool = False
    """Also draw each curve without AdaBS (when ``adabs`` > 0)."""
    hwa_epochs: float = 0.0
    """> 0: also fine-tune a copy with HWA training for this many epochs and draw its curve."""
    hwa_lr: float | None = None
    """Peak learning rate of the HWA fine-tuning (default: a tenth of the training default)."""
    hwa_options: HwaOptions = field(default_factory=HwaOptions)
    references: tuple[str, ...] = ("digital", "fq8", "int8")
    """Deterministic hardware models drawn as horizontal lines."""
    fast: bool = defaults.FAST
    """Validated torch emulation of aihwkit (False: aihwkit's own tiles)."""
    calib_size: int = defaults.CALIB_IMAGES
    """Training images used to calibrate quantizers and input ranges (as studies do)."""
    batch_size: int = 500
    device: str = "cpu"
    digital: tuple[str, ...] = ()
    """Shell patterns of layers kept digital on the analog hardware (layer-wise mapping)."""
    options: dict[str, Any] = field(default_factory=dict)
    """Fixed hardware-model parameters (``AnalogOptions``), e.g. ``{"adc_bits": 8}``."""
    sweeps: dict[str, list[Any]] = field(default_factory=dict)
    """One-at-a-time parameter sweeps (``analog.sweep``), e.g. ``{"adc_bits": [6, 7, 8]}``."""

    def __post_init__(self) -> None:
        problems: list[Problem] = []
        checks = [("hw", lambda: get_hw(self.hw)), ("times", lambda: parse_times(list(self.times))),
                  *((f"reference {r}", lambda r=r: get_hw(r)) for r in self.references)]
        failed = set()
        for name, check in checks:
            try:
                check()
            except ConfigError as err:
                problems += err.problems
                failed.add(name)
        if "hw" not in failed and get_hw(self.hw).kind != "analog":
            problems.append(Problem("hw", "must be an analog hardware model for drift curves",
                                    self.hw, "use pcm (or see `hwnas analog list`)"))
        if not isinstance(self.repeats, int) or self.repeats < 1:
            problems.append(Problem("repeats", "must be an integer >= 1", self.repeats,
                                    "use >= 10 for figures"))
        try:
            AnalogOptions.parse("options", dict(self.options))
        except ConfigError as err:
            problems += err.problems
        else:
            if "hw" not in failed and get_hw(self.hw).kind == "analog":
                problems += self._model_problems()
        if not self.hwa_epochs >= 0:
            problems.append(Problem("hwa_epochs", "must be >= 0", self.hwa_epochs,
                                    "use 0 to skip HWA training"))
        if problems:
            raise ConfigError(problems)


    def _model_problems(self) -> list[Problem]:
        """What the hardware model itself refuses (``analog.option_checks``) in the fixed
        options and in every swept value, found before the first curve is scored."""
        hw, problems, seen = get_hw(self.hw), [], set()
        trials = [{}] + [{name: v} for name, values in self.sweeps.items() for v in values]
        for extra in trials:
            try:
                hw.rpu_config(**{**self.options, **extra})
            except ConfigError as err:
                problems += [p for p in err.problems if str(p) not in seen]
                seen.update(str(p) for p in err.problems)
        return problems


@dataclass
class Curve:
    label: str
    hwa: bool
    result: DriftResult


@dataclass
class ExperimentResult:
    config: ExperimentConfig
    curves: list[Curve]
    references: dict[str, DriftResult]
    hwa_fit: dict[str, Any] | None
    seconds: float
    sweep: list[SweepPoint] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"config": asdict(self.config), "seconds": self.seconds, "hwa_fit": self.hwa_fit,
                "references": {k: v.as_dict() for k, v in self.references.items()},
                "curves": [{"label": c.label, "hwa": c.hwa, **c.result.as_dict(),
                            "scoring": defaults.scoring_record(c.result)}
                           for c in self.curves],
                "scoring_defaults": {"adabs_images": defaults.ADABS_IMAGES,
                                     "fast": defaults.FAST,
                                     "compensation": defaults.COMPENSATION},
                "sweep": [{**asdict(p), "acc_se": p.acc_se} for p in self.sweep]}


def _curves(model: nn.Module, data, cfg: ExperimentConfig, *, hwa: bool,
            log: Callable[[str], None]) -> list[Curve]:
    settings = [cfg.compensation] + ([not cfg.compensation] if cfg.compare_compensation else [])
    ada = [cfg.adabs] + ([0] if cfg.compare_adabs and cfg.adabs else [])
    out = []
    for comp, n_ada in ((c, a) for a in ada for c in settings):
        label = (cfg.hw + (" + HWA" if hwa else "") + (" + AdaBS" if n_ada else "")
                 + ("" if comp else " (no compensation)"))
        log(f"{label}: {cfg.repeats} programmings x {len(cfg.times)} drift times on "
            f"{len(data.y_test)} test images ...")
        result = _evaluate(model, data, cfg, {"compensation": comp}, log, adabs=n_ada)
        log(f"{label:<34} " + "  ".join(f"{p.label}: {100 * p.acc_mean:.2f}+-"
                                        f"{100 * p.acc_std:.2f}" for p in result.points)
            + f"  [{defaults.scoring_label(result)}; {result.seconds:.1f} s]")
        out.append(Curve(label, hwa, result))
    return out


def _evaluate(model: nn.Module, data, cfg: ExperimentConfig, options: dict[str, Any],
              log: Callable[[str], None], *, adabs: int = 0) -> DriftResult:
    protocol = ScoringProtocol(times=cfg.times, repeats=cfg.repeats, seed=cfg.seed,
                               fast=cfg.fast, options={**cfg.options, **options},
                               adabs=adabs, digital=cfg.digital, batch_size=cfg.batch_size,
                               device=cfg.device)
    return evaluate(model, data.x_test, data.y_test, cfg.hw, protocol,
                    calib=data.x_train[:cfg.calib_size],
                    adabs_images=training_images(data.x_train, adabs, cfg.seed),
                    progress=lambda line: log(f"  {line}"))


def _hwa_model(model: nn.Module, data, cfg: ExperimentConfig, fit_cfg):
    from hwnas.train.loop import FitConfig

    base = asdict(fit_cfg) if fit_cfg is not None else {}
    base.update(epochs=cfg.hwa_epochs, steps=None, device=cfg.device, seed=cfg.seed)
    base["lr"] = cfg.hwa_lr if cfg.hwa_lr is not None else (base.get("lr") or 0.1) / 10
    tuned = copy.deepcopy(model)
    # trained on what the curves score: the fixed options and the layers kept digital
    target = hwa_target(cfg.hw, options=cfg.options, digital=cfg.digital, hwa=cfg.hwa_options)
    result = hwa_fit(tuned, data, target, FitConfig(**base))
    return tuned, {"val_acc": result.val_acc, "epochs": result.epochs, "steps": result.steps,
                   "seconds": result.seconds, "lr": base["lr"],
                   "options": asdict(cfg.hwa_options), "engine": target.engine,
                   "hw_options": dict(cfg.options), "digital": list(cfg.digital)}


def run_experiment(model: nn.Module, data, cfg: ExperimentConfig, *, fit_cfg=None,
                   log: Callable[[str], None] = print) -> ExperimentResult:
    """References, drift curves of ``model`` and, with ``hwa_epochs``, of an HWA-tuned copy.

    ``data`` is a ``hwnas.train.data.DataSplits``; ``fit_cfg`` the digital ``FitConfig`` whose
    settings the HWA fine-tuning reuses (epochs and learning rate replaced).
    """
    start = time.perf_counter()
    refs = {}
    for name in cfg.references:
        refs[name] = evaluate(model, data.x_test, data.y_test, name,
                              ScoringProtocol(batch_size=cfg.batch_size, device=cfg.device),
                              calib=data.x_train[:cfg.calib_size])
        log(f"{name:<34} {100 * refs[name].acc_mean[0]:.2f}")
    curves = _curves(model, data, cfg, hwa=False, log=log)
    hwa_info = None
    if cfg.hwa_epochs > 0:
        tuned, hwa_info = _hwa_model(model, data, cfg, fit_cfg)
        log(f"HWA fine-tuning: {cfg.hwa_epochs:g} epochs, val acc "
            f"{100 * hwa_info['val_acc']:.2f}, {hwa_info['seconds']:.1f} s")
        curves += _curves(tuned, data, cfg, hwa=True, log=log)
    # every swept point is scored as the main curve is (AdaBS included): at the hardware
    # model's own value a sweep reproduces that curve
    sweep = run_sweeps(lambda opts: _evaluate(
        model, data, cfg, {"compensation": cfg.compensation, **opts}, log, adabs=cfg.adabs),
        cfg.sweeps, log=log)
    return ExperimentResult(cfg, curves, refs, hwa_info, time.perf_counter() - start, sweep)
