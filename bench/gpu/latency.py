"""Latency, predictor and roofline parts of the GPU campaign.

* ``latency``: ``hw_cost.measure_latency`` (CUDA events, warm-up, the CPU's stop rule) at batch
  1/32/256 and fp32 (TF32 off)/fp16/bf16, each setting measured ``repeats`` times; its
  repeatability (CoV of the medians) against a bare event loop's in the same run (goal: at most
  1.2x). Every record carries peak device memory, TF32 and the GPU's clocks.
* ``predictors``: the regressor (and the block LUT) fitted on this device's measurements, scored
  on held-out archs (goal: within +-10% on at least 95%).
* ``roofline``: ceilings from matmuls (fp32 with TF32 off, bf16) and copies (HBM, L2); models
  placed under them (goal: fraction <= 1 everywhere).
"""

from __future__ import annotations

import statistics
import tempfile

import torch

from bench.gpu.context import Context, Goal, Report, bare_times_ms, cov, part
from hw_cost.cache import CostCache
from hw_cost.latency import measure_latency, prepare
from hw_cost.options import DTYPES
from hw_cost.predictors import Setting, build_lut, evaluate, measure_more
from hw_cost.roofline import measure_ceilings, roofline_point
from hw_cost.spec import MeasureSpec, StopRule
from hw_cost.static import static_costs
from hwnas.common.devices import tf32_block
from search_spaces import get_space

SHAPE = (1, 28, 28)
ARCHS = {"resnet": "rn:s16-d1r1c16-d1r1c32-d1r1c64", "mbconv": None}  # None: a seeded sample


def _arch(space: str, seed: int = 0) -> str:
    import random

    return ARCHS.get(space) or get_space(space).random_arch(random.Random(seed))


def _model(space: str, arch: str, shape: tuple[int, ...] = SHAPE) -> torch.nn.Module:
    torch.manual_seed(0)
    return get_space(space).build(arch, in_chans=shape[0], num_classes=10,
                                  img_size=shape[1]).eval()


def _rule(ctx: Context) -> StopRule:
    return ctx.pick(StopRule(max_seconds=3.0), StopRule(window=5, min_repeats=10, max_seconds=0.2,
                                                        warmup_seconds=0.02, warmup_calls=2))


def _bare_median(model: torch.nn.Module, ctx: Context, batch: int, dtype: str, calls: int) -> float:
    """The bare loop on the same deployed copy: warm-up, then ``calls`` timed calls' median."""
    fn = prepare(model, SHAPE, device=ctx.device, batch_size=batch, dtype=DTYPES[dtype],
                 channels_last=False, compile=False)
    with torch.inference_mode(), tf32_block(False):  # as measure_latency(tf32=False)
        bare_times_ms(fn, max(5, calls // 5), ctx.device)
        return statistics.median(bare_times_ms(fn, calls, ctx.device))


@part("latency")
def latency_part(ctx: Context) -> Report:
    batches, dtypes = ctx.pick((1, 32, 256), (1,)), ctx.pick(("fp32", "fp16", "bf16"), ("fp32",))
    repeats, calls = ctx.pick(5, 2), ctx.pick(200, 10)
    rows, ratios = [], []
    for space in ctx.pick(("resnet", "mbconv"), ("resnet",)):
        model = _model(space, _arch(space))
        for batch in batches:
            for dtype in dtypes:
                if ctx.left() < 30 and rows:
                    break
                spec = MeasureSpec(device=ctx.device, batch_size=batch, dtype=dtype,
                                   threads=1, rule=_rule(ctx), tf32=False)
                runs = [measure_latency(model, SHAPE, spec) for _ in range(repeats)]
                bare = [_bare_median(model, ctx, batch, dtype, calls) for _ in range(repeats)]
                medians = [r.median_ms for r in runs]
                ratio = cov(medians) / cov(bare) if cov(bare) > 0 else None
                ratios += [ratio] if ratio is not None else []
                rows.append({"space": space, "batch": batch, "dtype": dtype,
                             "median_ms": statistics.median(medians), "cov": cov(medians),
                             "bare_median_ms": statistics.median(bare), "bare_cov": cov(bare),
                             "cov_ratio": ratio, "stable": all(r.stable for r in runs),
                             "peak_memory_bytes": runs[0].peak_memory_bytes,
                             "tf32": runs[0].tf32, "gpu": runs[0].gpu})
    worst = max(ratios) if ratios else None
    return Report({"rows": rows, "repeats": repeats},
                  [Goal("latency CoV / bare loop CoV (worst setting)", worst, "<=", 1.2)],
                  {"dtypes": list(dtypes), "tf32": False, "batches": list(batches)})


@part("predictors")
def predictors_part(ctx: Context) -> Report:
    measured, lut_archs = ctx.pick(60, 6), ctx.pick(15, 2)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        cache = CostCache(f"{tmp}/costs.db")
        for space in ctx.pick(("resnet", "mbconv"), ("resnet",)):
            if ctx.left() < 60 and out:
                break
            setting = Setting(space, SHAPE, device=ctx.device, batch_size=1, threads=1,
                              block_rule=_rule(ctx), model_rule=_rule(ctx), tf32=False)
            lut = build_lut(setting, cache, n=lut_archs, seed=ctx.seed)
            # one arch's stable timing takes seconds on a GPU, so a fixed count can outrun a
            # short window: measure while the budget lasts, four archs at least (held out)
            measure_more(setting, cache, measured, seed=ctx.seed,
                         go_on=lambda done: done < 4 or ctx.left() >= 15)
            out[space] = {"lut_fit": lut, **evaluate(setting, cache, seed=ctx.seed)}
        cache.close()
    shares = [p["within_10"] for r in out.values() for p in r["predictors"].values()]
    return Report(out, [Goal("share of held-out archs within +-10% (best predictor, worst "
                             "space)", min(max(p["within_10"] for p in r["predictors"].values())
                                           for r in out.values()) if shares else None,
                             ">=", 0.95)],
                  {"dtype": "fp32", "tf32": False, "batch": 1})


@part("roofline")
def roofline_part(ctx: Context) -> Report:
    sizes = ctx.pick({}, {"matmul_n": (64,), "copy_bytes": 2**20, "warmup_s": 0.01,
                          "timed_s": 0.02})
    ceilings = {dtype: measure_ceilings(device=ctx.device, dtype=dtype, threads=1, tf32=False,
                                        **sizes) for dtype in ctx.pick(("fp32", "bf16"),
                                                                       ("fp32",))}
    placed = []
    for space in ctx.pick(("resnet", "mbconv"), ("resnet",)):
        model = _model(space, _arch(space))
        for batch in ctx.pick((1, 32, 256), (1,)):
            for dtype, ceil in ceilings.items():
                lat = measure_latency(model, SHAPE, MeasureSpec(
                    device=ctx.device, batch_size=batch, dtype=dtype, threads=1,
                    rule=_rule(ctx), tf32=False))
                static = static_costs(model, SHAPE, batch_size=batch, device=ctx.device,
                                      dtype=dtype)
                placed.append({"space": space, "batch": batch, "dtype": dtype,
                               **roofline_point(static, lat.median_ms, ceil)})
    worst = max(p["roof_fraction"] for p in placed)
    return Report({"ceilings": {k: c.to_dict() for k, c in ceilings.items()}, "placed": placed},
                  [Goal("roofline fraction (largest)", worst, "<=", 1.0)],
                  {"tf32": False, "dtypes": list(ceilings)})
