"""Analog parts of the GPU campaign: the fast path and HWA training on the device, for every
registered analog hardware model.

* ``analog``: seconds per evaluation (programming, drift to 1 day, one pass over the test images)
  of the fast path on the device, against digital evaluation (goal: pcm at most 2x) and against
  aihwkit's own tile on the device where this aihwkit has one (speed, and agreement of the mean
  accuracies in standard errors). A model that fails is recorded with its error, not skipped.
* ``hwa``: HWA training throughput (images/s) of every analog model against plain ``fit``.
"""

from __future__ import annotations

import copy
import math
import statistics
import time
from typing import Any

import torch

import analog
from bench.gpu.context import Context, Goal, Report, part
from hwnas.train.data import DataSplits, load_data
from hwnas.train.loop import FitConfig, fit
from search_spaces import get_space

ARCH = "rn:s16-d1r1c16-d1r1c32"


def _data(ctx: Context) -> DataSplits:
    return load_data(ctx.data, train_limit=ctx.pick(5000, 256), test_limit=ctx.pick(2000, 64),
                     seed=ctx.seed, **ctx.data_kwargs())


def _trained(ctx: Context, data: DataSplits) -> torch.nn.Module:
    """A briefly trained model: accuracies to compare, not chance everywhere."""
    torch.manual_seed(ctx.seed)
    model = get_space("resnet").build(ARCH, in_chans=data.in_chans, num_classes=data.num_classes,
                                      img_size=data.img_size)
    fit(model, data, FitConfig(epochs=ctx.pick(2.0, 0.5), batch_size=128, device=ctx.device,
                               seed=ctx.seed, validation="off"))
    return model.eval()


def analog_names() -> list[str]:
    return [n for n in analog.list_hw() if analog.get_hw(n).kind == "analog"]


def _time(hw: Any) -> str:
    times = getattr(hw, "times", None)
    return "1d" if not times or analog.parse_time("1d") in times else times[-1]


def _timed_eval(ctx: Context, model: torch.nn.Module, data: DataSplits, name: str,
                fast: bool, repeats: int) -> dict[str, Any]:
    hw = analog.get_hw(name)
    ctx.sync()
    t0 = time.perf_counter()
    protocol = analog.ScoringProtocol(times=(_time(hw),), repeats=repeats, seed=ctx.seed,
                                      fast=fast, adabs=0, device=ctx.device)
    res = analog.evaluate(model, data.x_test, data.y_test, name, protocol,
                          calib=data.x_train[:256])
    ctx.sync()
    point = res.points[0]
    return {"seconds": time.perf_counter() - t0, "path": res.path, "acc_mean": point.acc_mean,
            "acc_se": point.acc_se, "repeats": res.repeats}


def _agreement(a: dict[str, Any], b: dict[str, Any]) -> float | None:
    """|difference of mean accuracies| in standard errors of the difference."""
    se = math.hypot(a.get("acc_se") or 0.0, b.get("acc_se") or 0.0)
    return abs(a["acc_mean"] - b["acc_mean"]) / se if se > 0 else None


@part("analog")
def analog_part(ctx: Context) -> Report:
    data = _data(ctx)
    model = _trained(ctx, data).to(ctx.device)
    repeats = ctx.pick(10, 2)
    digital = _timed_eval(ctx, model, data, "digital", True, 1)
    rows: dict[str, Any] = {}
    for name in ctx.pick(analog_names(), ["pcm", "pcm_custom_drift", "reram_cmo"]):
        if ctx.left() < 40 and rows:
            rows[name] = {"skipped": "part budget spent"}
            continue
        try:
            fast = _timed_eval(ctx, model, data, name, True, repeats)
            # per programming and pass: digital runs once, analog once per repeat
            rows[name] = {"fast": fast, "x_digital": fast["seconds"] / fast["repeats"]
                          / digital["seconds"]}
        except Exception as err:  # noqa: BLE001 - recorded: the campaign's job is to find these
            rows[name] = {"error": f"{type(err).__name__}: {err}"}
    for name in ("pcm", "pcm_hwa"):
        if name in rows and "fast" in rows[name]:
            try:
                tile = _timed_eval(ctx, model, data, name, False, repeats)
                rows[name].update(aihwkit=tile, x_aihwkit=rows[name]["fast"]["seconds"]
                                  / tile["seconds"], agreement_se=_agreement(
                                      rows[name]["fast"], tile))
            except Exception as err:  # noqa: BLE001 - no CUDA tile in this aihwkit, recorded
                rows[name]["aihwkit"] = {"error": f"{type(err).__name__}: {err}"}
    pcm = rows.get("pcm", {}).get("x_digital")
    failed = sorted(n for n, r in rows.items() if "error" in r)
    return Report({"digital": digital, "models": rows, "failed": failed, "arch": ARCH,
                   "images": len(data.y_test)},
                  [Goal("pcm fast path / digital evaluation time", pcm, "<=", 2.0),
                   Goal("analog models failing on the device", float(len(failed)), "<=", 0)],
                  {"dtype": "fp32", "tf32": None, "note": "analog tiles compute in fp32"})


@part("hwa")
def hwa_part(ctx: Context) -> Report:
    data = _data(ctx)
    steps = ctx.pick(100, 2)
    cfg = FitConfig(steps=steps, batch_size=128, device=ctx.device, seed=ctx.seed)
    torch.manual_seed(ctx.seed)
    base = get_space("resnet").build(ARCH, in_chans=data.in_chans, num_classes=data.num_classes,
                                     img_size=data.img_size)
    digital = fit(copy.deepcopy(base), data, cfg).images_per_s
    rows: dict[str, Any] = {}
    for name in ctx.pick(analog_names(), ["pcm_static", "reram_cmo"]):
        if ctx.left() < 30 and rows:
            rows[name] = {"skipped": "part budget spent"}
            continue
        try:
            # pcm_static/pcm_hwa train on the torch engine (fp32, TF32 off, no autocast)
            ips = analog.hwa_fit(copy.deepcopy(base), data, name, cfg).images_per_s
            engine = analog.hwa.hwa_target(name).engine
            rows[name] = {"images_per_s": ips, "x_digital": ips / digital, "engine": engine,
                          "precision": "fp32, TF32 off, no autocast" if engine == "torch"
                          else f"amp={cfg.amp}"}
        except Exception as err:  # noqa: BLE001 - recorded: the campaign's job is to find these
            rows[name] = {"error": f"{type(err).__name__}: {err}"}
    done = [r["x_digital"] for r in rows.values() if "x_digital" in r]
    failed = sorted(n for n, r in rows.items() if "error" in r)
    return Report({"digital_images_per_s": digital, "steps": steps, "models": rows,
                   "median_x_digital": statistics.median(done) if done else None,
                   "failed": failed},
                  [Goal("analog models failing HWA training on the device",
                        float(len(failed)), "<=", 0)],
                  {"amp": cfg.amp, "tf32": None,
                   "note": "the torch HWA engine trains in fp32 (TF32 and autocast off)"})
