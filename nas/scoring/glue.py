"""Thin adapters from a study config to the other packages' public APIs.

Kept in one place so the evaluator reads as a recipe and each call into ``hw_cost``, ``train`` or
``analog`` (with its keyword arguments) is easy to find when one of those APIs changes.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

import analog
import hw_cost
from analog import defaults as analog_defaults
from analog import hwa as analog_hwa
from analog.adabs import training_images
from hw_cost.analog_cost import analog_cost, flat_analog
from hw_cost.backends import get_backend
from hw_cost.spec import ChipSpec, MeasureSpec
from hwnas.common.seeds import stream_seed
from hwnas.train.fit_config import FitConfig
from nas.study.config import StudyConfig
from nas.study.hardware import Hardware
from nas.study.objectives import METRICS

# Cost fields that are text, not metrics: kept in the trial's info, not as numbers.
_INFO_KEYS = ("device", "dtype", "form", "bound", "ceiling", "memory_level", "fingerprint_hash",
              "cached")


def measure_spec(cfg: StudyConfig) -> MeasureSpec:
    """How the study times a candidate, as one ``hw_cost.MeasureSpec``: every ``latency`` field
    the spec has, and the deployed form the study implies (``latency_form``). A timing option
    added to both is carried here without another line."""
    names = {f.name for f in dataclasses.fields(MeasureSpec)}
    fields = {k: v for k, v in cfg.latency.model_dump().items() if k in names}
    return MeasureSpec(**{**fields, "form": latency_form(cfg)})


def costs(cfg: StudyConfig, space: str, arch: str, input_shape: tuple[int, ...],
          num_classes: int) -> tuple[dict[str, float], dict[str, Any]]:
    """Measured latency, static and analog costs (cached); numbers split from descriptions."""
    lat = cfg.latency
    hw, hw_options = cost_hw(cfg)
    raw = hw_cost.cost_of(space, arch, input_shape=input_shape, num_classes=num_classes,
                          spec=measure_spec(cfg), chip=ChipSpec(hw, hw_options),
                          cache=lat.cache)
    metrics = {k: float(v) for k, v in raw.items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    info = {k: raw[k] for k in _INFO_KEYS if k in raw}
    info["device_name"] = (raw.get("provenance") or {}).get("device", lat.device)
    if hw is not None:  # trial info keeps scalars: the options as sorted JSON text
        info["analog_cost_hw"] = hw
        if hw_options:
            info["analog_cost_options"] = json.dumps(hw_options, sort_keys=True)
    if _needs(cfg, "pred_latency_ms"):
        metrics["pred_latency_ms"] = predicted_latency(cfg, space, arch, input_shape, num_classes)
    return metrics, info


def cost_hw(cfg: StudyConfig) -> tuple[str | None, dict[str, Any]]:
    """The analog hardware model (and its ``hw_eval.options``) the analog cost estimate
    describes: the first analog model the study scores, so cost and accuracy see one tile size,
    ADC and read mode. None when the study scores no analog model."""
    for item in [*cfg.objectives_resolved(), *cfg.budgets()]:
        if item.hw and analog.get_hw(item.hw).kind == "analog":
            return item.hw, dict(cfg.hw_eval.options.get(item.hw, {}))
    return None, {}


def mapped_costs(cfg: StudyConfig, model,  # noqa: ANN001 - an nn.Module
                 input_shape: tuple[int, ...], digital: list[str],
                 hardware: Hardware | None = None) -> dict[str, float]:
    """The analog cost metrics of ``model`` with the ``digital`` layers kept digital (layer-wise
    mapping); they replace ``cost_of``'s all-analog ones, on the same hardware model, or on the
    trial's sampled ``hardware`` (its device, tile, ADC bits and read mode)."""
    hw, hw_options = cost_hw(cfg)
    if hardware is None:
        return flat_analog(analog_cost(model, input_shape, hw=hw, hw_options=hw_options,
                                       digital=digital))
    est = analog_cost(model, input_shape, hw=hardware.scored_hw(hw or "pcm_static"),
                      hw_options=hardware.cost_options(), figures=hardware.figures(),
                      digital=digital)
    return {**flat_analog(est), "analog_one_phase": float(est["read_mode"] == "one_phase")}


def latency_form(cfg: StudyConfig) -> str:
    """The deployed form a study times: ``latency.form``, else the one its hardware models
    imply: an int8 accuracy objective deploys the int8 model (torchao's x86 int8, so on a CPU);
    anything else, eager."""
    if cfg.latency.form:
        return cfg.latency.form
    int8 = any(o.hw == "int8" for o in cfg.objectives_resolved())
    runs_int8 = get_backend(cfg.latency.device).unsupported_form("int8") is None
    return "int8" if int8 and runs_int8 else "eager"


def _needs(cfg: StudyConfig, key: str) -> bool:
    return any(o.key == key for o in cfg.objectives_resolved()) or any(
        b.key == key for b in cfg.budgets())


def predicted_latency(cfg: StudyConfig, space: str, arch: str, input_shape: tuple[int, ...],
                      num_classes: int) -> float:
    return float(hw_cost.predict_latency(space, arch, input_shape=input_shape,
                                         num_classes=num_classes, spec=measure_spec(cfg),
                                         cache=cfg.latency.cache))


def fit_config(cfg: StudyConfig, **changes: Any) -> FitConfig:
    fields = {k: v for k, v in cfg.train.model_dump(exclude={"threads"}).items() if v is not None}
    return FitConfig(**{**fields, "seed": cfg.seed, **changes})


def hwa_target(cfg: StudyConfig, hw: str, digital: Sequence[str] = ()) -> analog_hwa.HwaTarget:
    """What HWA trains for before ``hw`` is scored: the study's ``hw_eval.options`` for ``hw``
    (the overrides scoring applies) and the candidate's layers kept digital. Studies and
    finalize both train through it, so HWA and scoring see one periphery, device and mapping."""
    he = cfg.hw_eval
    return analog_hwa.hwa_target(hw, options=he.options.get(hw), digital=digital,
                                 hwa=analog_hwa.HwaOptions(recipe=he.hwa_recipe,
                                                           engine=he.hwa_engine))


def hw_accuracy(cfg: StudyConfig, model, data, hw: str, times: list[str | None],  # noqa: ANN001
                x, y, digital: list[str] | None = None,  # noqa: ANN001
                precision: Any = None, hardware: Hardware | None = None) -> dict[str, float]:
    """``acc_<hw>[@t]`` with its estimate (``_std``, ``_se``, ``_median``, ``_repeats``,
    ``_images``), the analog coverage, and for analog models ``<hw>_adabs`` and ``<hw>_hwa_s``.

    Every draw comes from the study seed's streams (``hwnas.common.seeds``): HWA fine-tuning
    from ``hwa``, AdaBS images from ``adabs``, programming and periphery noise inside
    ``analog.evaluate``. The same (config, arch, seed) gives the same numbers. ``digital``:
    layers an analog model keeps digital (``nas.study.mapping``). ``precision``: the rung's target
    SE and programmings cap (``nas.study.schedule.rung_precision``); None: ``hw_eval``'s.
    ``hardware``: the trial's sampled chip (``nas.study.hardware``); its device is scored in
    place of ``hw`` and its options replace ``hw_eval.options``, under ``hw``'s keys.
    """
    if hardware is not None and analog.get_hw(hw).kind == "analog":
        scored_hw = hardware.scored_hw(hw)
        out = _hw_accuracy(cfg, model, data, scored_hw, times, x, y, digital, precision,
                           hardware.options(hw))
        return {k.replace(scored_hw, hw, 1): v for k, v in out.items()}
    return _hw_accuracy(cfg, model, data, hw, times, x, y, digital, precision,
                        cfg.hw_eval.options.get(hw))


def scoring_protocol(cfg: StudyConfig, hw: str, times: Sequence[str | None], *,
                     options: dict[str, Any] | None = None, digital: Sequence[str] | None = None,
                     precision: Any = None) -> analog.ScoringProtocol:
    """How the study estimates an accuracy on ``hw``, as one ``analog.ScoringProtocol``: its
    times, programmings, precision target (the rung's ``precision`` where given), seed,
    compensation, fast path, AdaBS, the chip's ``options`` and the layers kept ``digital``.
    Digital and quantized models take no noise settings (they run once)."""
    he = cfg.hw_eval
    is_analog = analog.get_hw(hw).kind == "analog"
    target_se = precision.target_se if precision else he.target_se
    return analog.ScoringProtocol(
        times=tuple(analog.parse_time(t) if t else 0.0 for t in times), repeats=he.repeats,
        seed=cfg.seed, compensation=he.compensation, fast=he.fast, options=options,
        adabs=he.adabs if is_analog else 0, target_se=target_se if is_analog else None,
        max_repeats=precision.max_repeats if precision else he.max_repeats,
        digital=tuple(digital or ()) if is_analog else (), device=cfg.train.device)


def _hw_accuracy(cfg: StudyConfig, model, data, hw: str, times: list[str | None],  # noqa: ANN001
                 x, y, digital: list[str] | None, precision: Any,  # noqa: ANN001
                 options: dict[str, Any] | None) -> dict[str, float]:
    he = cfg.hw_eval
    is_analog = analog.get_hw(hw).kind == "analog"
    scored = copy.deepcopy(model)  # hardware models and HWA tuning must not touch the weights
    out: dict[str, float] = {}
    if is_analog and he.hwa_epochs > 0:
        t0 = time.perf_counter()
        analog.hwa_fit(scored, data, analog_hwa.hwa_target(hw, options=options,
                                                           digital=digital or []),
                       fit_config(cfg, epochs=he.hwa_epochs, seed=stream_seed(cfg.seed, "hwa")))
        out[f"{hw}_hwa_s"] = round(time.perf_counter() - t0, 3)
    protocol = scoring_protocol(cfg, hw, times, options=options, digital=digital,
                                precision=precision)
    res = analog.evaluate(scored.eval(), x, y, hw, protocol,
                          calib=data.x_train[:analog_defaults.CALIB_IMAGES],
                          adabs_images=training_images(data.x_train, protocol.adabs or 0,
                                                       cfg.seed))
    for label, point in zip(times, res.points, strict=True):
        key = METRICS.get("accuracy").key(hw, label)
        out[key] = float(point.acc_mean)
        out.update({f"{key}_std": float(point.acc_std), f"{key}_se": float(point.acc_se),
                    f"{key}_median": float(point.acc_median),
                    f"{key}_repeats": float(point.repeats), f"{key}_images": float(point.images)})
    if is_analog:
        out[f"{hw}_adabs"] = float(res.adabs)
    for name in ("weight_fraction", "mac_fraction"):
        if isinstance(res.coverage.get(name), int | float):
            out[f"{hw}_analog_{name}"] = float(res.coverage[name])
    return out
