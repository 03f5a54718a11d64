"""Whether the truth's training device shows in its accuracy: one space's truth mixes archs trained
on the CPU and on a GPU (fp32, TF32 off), so the same arch and seed is trained again here, on the
other kind of device, and its digital test accuracy set beside the stored record's and beside the
gap a second training seed makes (``truth_seeds.csv``). The result is
``bench/results/fidelity_crossdevice.json``::

    python -m bench.fidelity crossdevice --only mb:sw-s24-...   # one CPU thread: 15-40 min an arch
"""

from __future__ import annotations

import json
from typing import Any

import torch

from bench import ROOT
from bench.fidelity import truth
from bench.fidelity.measures import seed_noise_sd, seed_pairs
from hwnas.common.provenance import provenance

OUT = ROOT / "bench" / "results" / "fidelity_crossdevice.json"


def retrain(arch: str) -> dict[str, Any]:
    """The truth's training of ``arch`` (seed 0) on ``truth.DEVICE``, beside its stored record."""
    unit = truth.Unit(truth.space_of(arch), arch, "train")
    if not unit.done():
        raise SystemExit(f"crossdevice: {arch} has no truth training record ({unit.path}); "
                         "train it first (python -m bench.fidelity truth)")
    stored = json.loads(unit.path.read_text())
    if truth.ran_on(stored) == truth.DEVICE.split(":")[0]:
        raise SystemExit(f"crossdevice: {arch} was trained on {truth.DEVICE} already; pick an "
                         "arch the other kind of device trained")
    _, here = truth.fit_base(unit)
    return {"arch": arch, "stored_device": truth.device_of(stored),
            "stored_acc_digital": stored["acc_digital"], "device": truth.DEVICE,
            "acc_digital": here["acc_digital"], "train_seconds": here["train_seconds"],
            "gap_pt": round(100 * (here["acc_digital"] - stored["acc_digital"]), 2)}


def seed_gap_sd() -> float | None:
    """The SD of one digital accuracy across training seeds (pt), from the archs trained under
    a second truth seed (``measures.seed_noise_sd`` of their seed pairs)."""
    import pandas as pd

    path = truth.DATA / "truth_seeds.csv"
    if not path.is_file():
        return None
    wide = seed_pairs(pd.read_csv(path), "acc_digital")
    if wide.shape[1] < 2 or len(wide) < 2:
        return None
    return round(100 * seed_noise_sd(wide.iloc[:, 0], wide.iloc[:, 1]), 2)


def run(archs: list[str], threads: int = 1) -> dict[str, Any]:
    torch.set_num_threads(threads)
    out = {"checks": [retrain(a) for a in archs], "seed_sd_pt": seed_gap_sd(),
           "command": "python -m bench.fidelity crossdevice --only " + ",".join(archs)}
    out["provenance"] = provenance(truth.DEVICE)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, default=str))
    return out
