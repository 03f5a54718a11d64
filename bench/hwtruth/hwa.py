"""The HWA truth: the hardware truth's archs HWA-trained for the scored model, ``pcm_static``.

Per arch, from its truth weights (``units.weights``): one ``digital`` unit scores those weights as
they are, two ``hwa`` units (seeds 0 and 1) fine-tune a copy with ``analog.hwa_fit`` for
``pcm_static`` as a study does (its default HWA options and engine) and score it. Every unit is
scored the same way: ``pcm_static`` as shipped, 1 d and 30 d, all 10,000 test images, 5
programmings, AdaBS on 512 training images (the hardware truth's precision). The two HWA seeds
measure the fine-tuning's own seed noise, which enters the gain's SE beside the programming
SEs (``bench.hwtruth.hwa_report``).

    python -m bench.hwtruth hwa-work [--archs a,b] [--hours H]   # resumable, lock files
    python -m bench.hwtruth hwa-report --write
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import torch

from bench.fidelity import truth
from bench.hwtruth.units import ADABS, REPEATS, StoredUnit, run_units

HW = "pcm_static"
TIMES = ("1d", "30d")
SEEDS = (0, 1)
RECIPE: dict[str, Any] = {"epochs": 0.5, "batch_size": 256, "lr": 0.02,
                          "label_smoothing": 0.1}
"""The fine-tuning: the study files' ``hwa_epochs: 0.5`` at the fidelity truth's HWA learning
rate (a tenth of its digital one)."""


@dataclass(frozen=True)
class HwaUnit(StoredUnit):
    arch: str
    kind: str  # "digital" or "hwa"
    seed: int = 0
    folder = "hwa"

    @property
    def stem(self) -> str:
        return f"{self.arch.replace(':', '_')}__{self.kind}{self.seed}"

    @property
    def claim_key(self) -> truth.Unit:
        return truth.Unit("resnet", self.arch, f"hwa-{self.kind}{self.seed}")


def plan(archs: tuple[str, ...]) -> list[HwaUnit]:
    """Arch by arch (one arch's truth weights serve its three units)."""
    return [HwaUnit(a, k, s) for a in archs
            for k, s in [("digital", 0), *(("hwa", s) for s in SEEDS)]]


def fine_tune(model: torch.nn.Module, seed: int) -> dict[str, Any]:
    """HWA for ``pcm_static`` in place, as a study runs it; the fine-tuning's figures."""
    import analog
    from hwnas.common.seeds import stream_seed
    from hwnas.train.loop import FitConfig, evaluate

    data = truth.truth_data()
    cfg = FitConfig(**RECIPE, seed=stream_seed(seed, "hwa"), device=truth.DEVICE, amp=False)
    result = analog.hwa_fit(model, data, HW, cfg)
    acc = evaluate(model, data.x_test, data.y_test, device=truth.DEVICE)["acc"]
    return {"hwa_seconds": round(result.seconds, 1), "hwa_steps": result.steps,
            "acc_digital_after_hwa": acc}


def score(model: torch.nn.Module) -> dict[str, Any]:
    """Accuracy on ``HW`` at ``TIMES``: mean, SE, spread and every programming per time."""
    import analog
    from analog.adabs import training_images
    from analog.defaults import CALIB_IMAGES

    data = truth.truth_data()
    start = time.perf_counter()
    protocol = analog.ScoringProtocol(times=TIMES, repeats=REPEATS, seed=0, fast=True,
                                      adabs=ADABS, device=truth.DEVICE)
    res = analog.evaluate(model, data.x_test, data.y_test, HW, protocol,
                          calib=data.x_train[:CALIB_IMAGES],
                          adabs_images=training_images(data.x_train, ADABS, 0))
    out: dict[str, Any] = {"repeats": res.repeats, "images": res.images, "path": res.path}
    for label, point in zip(TIMES, res.points, strict=True):
        out[f"acc@{label}"] = point.acc_mean
        out[f"acc@{label}_se"] = point.acc_se
        out[f"acc@{label}_std"] = point.acc_std
        out[f"acc@{label}_accs"] = point.accs
    out["score_seconds"] = round(time.perf_counter() - start, 1)
    return out


def measure(unit: HwaUnit, base: torch.nn.Module) -> dict[str, Any]:
    """One unit on a copy of the arch's truth weights: fine-tuned first for an ``hwa`` unit."""
    model = copy.deepcopy(base)
    out: dict[str, Any] = {"arch": unit.arch, "kind": unit.kind, "seed": unit.seed, "hw": HW}
    if unit.kind == "hwa":
        out.update(fine_tune(model, unit.seed), recipe=RECIPE)
    return out | score(model)


def work(units: list[HwaUnit], *, threads: int, stop_after: float | None = None) -> int:
    """Run the HWA truth's units (``units.run_units``); returns units done."""
    return run_units(units, measure, lambda out: (
        f"1d {out['acc@1d']:.4f} ± {out['acc@1d_se']:.4f}, "
        f"30d {out['acc@30d']:.4f} ± {out['acc@30d_se']:.4f}"),
        threads=threads, stop_after=stop_after)
