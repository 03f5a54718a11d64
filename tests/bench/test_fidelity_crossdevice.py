"""``bench.fidelity crossdevice``: an arch the other kind of device trained is trained again here
under the same seed and set beside its record; an arch this device trained, or one without a
record, is a clear error; the seed SD it is compared with is the paired-seed estimate."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from bench.fidelity import crossdevice, truth

ARCH = "rn:s16-d1r1c16"


def _record(device: str, acc: float = 0.5) -> truth.Unit:
    unit = truth.Unit("resnet", ARCH, "train")
    unit.path.parent.mkdir(parents=True, exist_ok=True)
    unit.path.write_text(json.dumps({"device": device, "phase": "train", "acc_digital": acc,
                                     "provenance": {"device": "NVIDIA H200"}}))
    return unit


def test_retrains_here_and_sets_the_record_beside(tiny_truth: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crossdevice, "OUT", tiny_truth / "out.json")
    trained = []

    def fit_base(unit: truth.Unit) -> tuple[None, dict[str, float]]:
        # the truth's training itself is tested in test_fidelity_truth_device; here, its use
        trained.append((unit, truth.DEVICE))
        return None, {"acc_digital": 0.2725, "train_seconds": 1.0}

    monkeypatch.setattr(truth, "fit_base", fit_base)
    _record("cuda", acc=0.25)
    out = crossdevice.run([ARCH])
    assert trained == [(truth.Unit("resnet", ARCH, "train"), "cpu")]
    (check,) = out["checks"]
    assert check["stored_device"] == "NVIDIA H200" and check["device"] == "cpu"
    assert check["stored_acc_digital"] == 0.25 and check["acc_digital"] == 0.2725
    assert check["gap_pt"] == pytest.approx(2.25)
    assert json.loads((tiny_truth / "out.json").read_text())["checks"] == out["checks"]
    # the stored record and its (absent) weights are untouched: nothing is saved as the truth's
    assert json.loads(truth.Unit("resnet", ARCH, "train").path.read_text())["device"] == "cuda"
    assert not (truth.MODELS / f"{truth.Unit('resnet', ARCH, 'train').stem}.pt").exists()


def test_same_device_or_no_record_is_a_clear_error(tiny_truth: Path) -> None:
    with pytest.raises(SystemExit, match="has no truth training record"):
        crossdevice.retrain(ARCH)
    _record("cpu")
    with pytest.raises(SystemExit, match="trained on cpu already"):
        crossdevice.retrain(ARCH)


def test_seed_sd_is_the_paired_gap_sd_over_sqrt2(tiny_truth: Path) -> None:
    assert crossdevice.seed_gap_sd() is None
    rows = [("a", 0, 0.80), ("a", 1, 0.82), ("b", 0, 0.70), ("b", 1, 0.69), ("c", 0, 0.9),
            ("c", 1, 0.9), ("d", 0, 0.5)]  # d has one seed: left out
    table = pd.DataFrame([{"space": "resnet", "arch": a, "seed": s, "recipe": "digital",
                           "acc_digital": v} for a, s, v in rows])
    truth.DATA.mkdir(parents=True)
    table.to_csv(truth.DATA / "truth_seeds.csv", index=False)
    gaps = [-2.0, 1.0, 0.0]  # pt, seed 0 minus seed 1
    mean = sum(gaps) / 3
    want = math.sqrt(sum((g - mean) ** 2 for g in gaps) / 2) / math.sqrt(2)
    assert crossdevice.seed_gap_sd() == pytest.approx(want, abs=0.01)
