"""One unit: an architecture's truth weights scored on one hardware configuration."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bench import ROOT
from bench.fidelity import truth
from bench.hwtruth.configs import BASE, CONFIGS
from nas.study.hardware import Hardware

DATA = ROOT / "bench" / "data" / "hwtruth"
TIME = "30d"
REPEATS = 5
ADABS = 512  # as the fidelity truth (``truth.TRUTH["score"]``)


class StoredUnit:
    """A unit of work stored as ``DATA/<folder>/<stem>.json``, claimed by lock file under
    ``claim_key`` (the fidelity truth's claims); subclasses name the three."""

    folder = "units"
    arch: str

    @property
    def stem(self) -> str:
        raise NotImplementedError

    @property
    def claim_key(self) -> truth.Unit:
        raise NotImplementedError

    @property
    def path(self) -> Path:
        return DATA / self.folder / f"{self.stem}.json"

    def done(self) -> bool:
        return self.path.is_file()


@dataclass(frozen=True)
class HwUnit(StoredUnit):
    arch: str
    hardware: Hardware

    @property
    def stem(self) -> str:
        code = self.hardware.code.replace(":", "_")
        return f"{self.arch.replace(':', '_')}__{code}"

    @property
    def claim_key(self) -> truth.Unit:
        """The truth's lock files, under a phase name of this truth's own."""
        return truth.Unit("resnet", self.arch, f"hw-{self.hardware.code.replace(':', '_')}")


def plan(archs: tuple[str, ...]) -> list[HwUnit]:
    """Arch by arch: one arch's weights serve all its configurations before the next is trained."""
    return [HwUnit(a, hw) for a in archs for hw in CONFIGS]


def score(unit: HwUnit, model: torch.nn.Module) -> dict[str, Any]:
    """Accuracy at ``TIME`` and analog cost of ``model`` on the unit's chip, as a study scores
    a sampled chip (``nas.scoring.glue``): its options reach the accuracy model, its figures and
    cost options the energy estimate, its digital layers both."""
    import analog
    from analog.adabs import training_images
    from analog.defaults import CALIB_IMAGES
    from hw_cost.analog_cost import analog_cost, flat_analog
    from nas.study.mapping import digital_patterns

    data, hw = truth.truth_data(), unit.hardware
    digital = digital_patterns(model, hw.mapping())
    scored = hw.scored_hw(BASE)
    start = time.perf_counter()
    protocol = analog.ScoringProtocol(times=(TIME,), repeats=REPEATS, seed=0, fast=True,
                                      options=hw.options(BASE), adabs=ADABS, digital=digital,
                                      device=truth.DEVICE)
    res = analog.evaluate(model, data.x_test, data.y_test, scored, protocol,
                          calib=data.x_train[:CALIB_IMAGES],
                          adabs_images=training_images(data.x_train, ADABS, 0))
    point = res.points[0]
    cost = analog_cost(model.cpu(), (data.in_chans, data.img_size, data.img_size), hw=scored,
                       hw_options=hw.cost_options(), figures=hw.figures(), digital=digital)
    return {"arch": unit.arch, "hardware": hw.code, "digital_layers": digital,
            "acc": point.acc_mean, "acc_se": point.acc_se, "acc_std": point.acc_std,
            "accs": point.accs, "repeats": res.repeats, "images": res.images,
            "time": TIME, "adabs": res.adabs, "path": res.path, "options": hw.options(BASE),
            "read_mode": cost["read_mode"], **flat_analog(cost),
            "score_seconds": round(time.perf_counter() - start, 1)}


def run_units(units: list[StoredUnit],
              measure: Callable[[StoredUnit, torch.nn.Module], dict[str, Any]],
              describe: Callable[[dict[str, Any]], str], *, threads: int,
              stop_after: float | None = None) -> int:
    """Run units until none is left (or ``stop_after`` seconds passed); returns units done.
    ``measure(unit, model)`` gets the arch's truth weights (``weights``: loaded once per arch,
    kept while the next units share it); its record is stored with those weights' figures and
    the provenance."""
    from hwnas.common.provenance import provenance

    torch.set_num_threads(threads)
    start, done, models = time.perf_counter(), 0, {}
    for unit in units:
        if stop_after is not None and time.perf_counter() - start > stop_after:
            break
        if unit.done() or not truth.claim(unit.claim_key):
            continue
        try:
            if unit.arch not in models:
                models = {unit.arch: weights(unit.arch)}
            model, figures = models[unit.arch]
            out = measure(unit, model)
            out.update(figures, provenance=provenance(truth.DEVICE), device=truth.DEVICE)
            unit.path.parent.mkdir(parents=True, exist_ok=True)
            unit.path.write_text(json.dumps(out, indent=1, default=str))
            print(f"{unit.stem}: {describe(out)}", flush=True)
            done += 1
        finally:
            truth.release(unit.claim_key)
    return done


def work(units: list[HwUnit], *, threads: int, stop_after: float | None = None) -> int:
    """Score the hardware truth's units. Weights come from the fidelity truth's train units
    (``truth.model_of`` retrains a missing one from its recipe and seed, on the kind of device
    that trained it)."""
    return run_units(units, score, lambda out: (
        f"acc {out['acc']:.4f} ± {out['acc_se']:.4f}, {out['analog_energy_uj']:.3f} uJ "
        f"({out['score_seconds']:.0f} s)"), threads=threads, stop_after=stop_after)


def weights(arch: str) -> tuple[torch.nn.Module, dict[str, float | None]]:
    """The arch's truth weights, and their digital test accuracy beside the record's: a
    retraining is not bit-identical to the recorded run."""
    from hwnas.train.loop import evaluate

    unit = truth.Unit(truth.space_of(arch), arch, "train")
    t0 = time.perf_counter()
    model = truth.model_of(unit, "train").to(truth.DEVICE)
    data = truth.truth_data()
    acc = evaluate(model, data.x_test, data.y_test, device=truth.DEVICE)["acc"]
    recorded = json.loads(unit.path.read_text()).get("acc_digital")
    print(f"{arch}: truth weights ready ({time.perf_counter() - t0:.0f} s), digital {acc:.4f} "
          f"(record {recorded})", flush=True)
    return model, {"weights_acc_digital": acc, "recorded_acc_digital": recorded}
