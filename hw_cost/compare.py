"""Side-by-side latency: several models timed interleaved in one run, so they share the host.

Two figures taken minutes apart on a shared machine compare the host's two moments as much as
the models (a "before" timed while another job ran and an "after" on an idle CPU once read as a
3.7x speed-up). Here every model is prepared first, then rounds of ``window`` calls alternate
between the models (the order reversed every other round), so load that comes and goes hits
them alike. Each model gets its median, p10/p90 and CV; each model after the first gets its
ratio to the first: the median of per-round ratios, with their p10/p90.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from hw_cost.backends import get_backend
from hw_cost.latency import _quiet_gc, prepare
from hw_cost.options import validate
from hw_cost.spec import MeasureSpec
from hwnas.common.settings import settle

# A figure whose calls vary more than this, or a ratio whose rounds disagree by more, is flagged.
UNSTABLE_CV = 0.10
UNSTABLE_RATIO_SPREAD = 0.10


@dataclass(frozen=True)
class Timing:
    """One model's calls in a side-by-side run (milliseconds)."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    cv: float
    repeats: int

    @classmethod
    def of(cls, samples: Sequence[float]) -> Timing:
        a = np.asarray(samples)
        return cls(float(np.median(a)), float(np.percentile(a, 10)),
                   float(np.percentile(a, 90)), float(a.std() / a.mean()), len(a))


def _ratio(rounds: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    r = rounds / ref
    return {"ratio": float(np.median(r)), "ratio_p10": float(np.percentile(r, 10)),
            "ratio_p90": float(np.percentile(r, 90))}


def warnings_for(names: Sequence[str], timings: dict[str, Timing],
                 ratios: dict[str, dict[str, float]]) -> list[str]:
    """Plain-language warnings on figures too unsteady to trust."""
    out = [f"{n}: latency varies {timings[n].cv:.0%} between calls (CV > {UNSTABLE_CV:.0%}): "
           "the machine was busy; re-measure on an idle one" for n in names
           if timings[n].cv > UNSTABLE_CV]
    for n, r in ratios.items():
        spread = (r["ratio_p90"] - r["ratio_p10"]) / r["ratio"]
        if spread > UNSTABLE_RATIO_SPREAD:
            out.append(f"{n}/{names[0]}: the ratio varies {spread:.0%} between rounds "
                       f"(p10 {r['ratio_p10']:.3f}, p90 {r['ratio_p90']:.3f}): treat it as rough")
    return out


def compare_latency(models: dict[str, nn.Module], input_shape: Sequence[int],
                    spec: MeasureSpec | None = None, *, seconds: float = 4.0, window: int = 10,
                    warmup: int = 5, min_rounds: int = 10, forms: dict[str, str] | None = None,
                    **legacy: object) -> dict[str, object]:
    """Time ``models`` interleaved for about ``seconds`` in all; the first is the reference.
    ``spec`` (``hw_cost.spec.MeasureSpec``) gives the device, batch, dtype, threads and deployed
    form; its stop rule is not used (the rounds are). ``forms`` gives some models another
    deployed form than ``spec.form`` (e.g. eager vs int8). ``legacy``: the spec's fields as
    keywords, the earlier form (deprecated).

    Returns ``{"unit": "ms", "models": {name: Timing fields}, "ratios": {name: {ratio,
    ratio_p10, ratio_p90}}, "rounds", "warnings": [...]}``.
    """
    spec = settle(MeasureSpec, spec, legacy, "compare_latency")
    forms = {n: (forms or {}).get(n, spec.form) for n in models}
    targets = {f: validate(input_shape=input_shape, **{**spec.target(), "form": f})
               for f in set(forms.values())}
    target = targets[forms[next(iter(models))]]
    backend = get_backend(target.device)
    names = list(models)
    samples: dict[str, list[float]] = {n: [] for n in names}
    per_round: dict[str, list[float]] = {n: [] for n in names}
    with backend.session(target.device, spec.threads), torch.inference_mode():
        fns = {n: prepare(m, target.input_shape, device=target.place, batch_size=spec.batch_size,
                          dtype=targets[forms[n]].torch_dtype, channels_last=False,
                          compile=False, form=forms[n]) for n, m in models.items()}
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        backend.synchronize(target.device)
        start = time.perf_counter()
        with _quiet_gc():
            while len(per_round[names[0]]) < min_rounds or time.perf_counter() - start < seconds:
                order = names if len(per_round[names[0]]) % 2 == 0 else names[::-1]
                for n in order:
                    got = backend.time_ms(fns[n], window)
                    samples[n] += got
                    per_round[n].append(float(np.median(got)))
    timings = {n: Timing.of(samples[n]) for n in names}
    ref = np.asarray(per_round[names[0]])
    ratios = {n: _ratio(np.asarray(per_round[n]), ref) for n in names[1:]}
    return {"unit": "ms", "models": {n: asdict(t) for n, t in timings.items()}, "ratios": ratios,
            "rounds": len(ref), "window": window, "device": target.device, "forms": forms,
            "warnings": warnings_for(names, timings, ratios)}
