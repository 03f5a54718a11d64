"""Truth units trained on one machine and scored on another: ``truth --phases train`` takes only
training units, ``--pack`` carries a run's records and weights as one archive that restores them
where it is unpacked, and ``--device cuda`` without CUDA stops before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import torch

from bench import ROOT
from bench.fidelity import truth, worker

ARCH = "rn:s16-d1r1c16"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "bench.fidelity", "truth", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def test_train_phase_only_then_pack_restores_records_and_weights(tiny_truth: Path,
                                                                 tmp_path: Path) -> None:
    start = time.time() - 1
    done = worker.run({"resnet": [ARCH]}, 1, None, "cpu", ("train",))
    assert done == 1  # the score unit waits for a machine that scores
    train, score = (truth.Unit("resnet", ARCH, p) for p in ("train", "score"))
    assert train.done() and not score.done()
    record = json.loads(train.path.read_text())
    assert record["device"] == "cpu" and "tf32" not in record

    packed = truth.pack(tiny_truth / "out/truth.tar", start)
    stem = train.stem
    assert sorted(packed) == [f".hwnas_cache/fidelity/{stem}.pt",
                              f"bench/data/fidelity/units/{stem}.json"]
    # Nothing older than the run travels.
    assert truth.pack(tiny_truth / "out/none.tar", time.time() + 60) == []

    there = tmp_path / "elsewhere"
    with tarfile.open(tiny_truth / "out/truth.tar") as tar:
        tar.extractall(there, filter="data")
    assert json.loads((there / f"bench/data/fidelity/units/{stem}.json").read_text()) == record
    weights = torch.load(there / f".hwnas_cache/fidelity/{stem}.pt", weights_only=True)
    assert weights.keys() == torch.load(truth.MODELS / f"{stem}.pt", weights_only=True).keys()


def test_weights_trained_elsewhere_are_not_silently_retrained(tiny_truth: Path) -> None:
    train, score = (truth.Unit("resnet", ARCH, p) for p in ("train", "score"))
    train.path.parent.mkdir(parents=True)
    train.path.write_text(json.dumps({"device": "cuda", "phase": "train"}))
    with pytest.raises(RuntimeError, match="trained on 'cuda' and are missing"):
        truth.run_unit(score)
    assert not score.done()


def test_a_worker_passes_over_units_whose_weights_are_elsewhere(tiny_truth: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    # A GPU window scores the archs it trained; the CPU-trained ones wait for the CPU workers.
    other = "rn:s16-d1r1c24"
    for arch, device in ((ARCH, "cuda"), (other, "cpu")):
        unit = truth.Unit("resnet", arch, "train")
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text(json.dumps({"device": device, "phase": "train"}))
    units = truth.with_phases(truth.plan({"resnet": [ARCH, other]}), ("score",))
    assert truth.next_unit(units) == truth.Unit("resnet", other, "score")  # cpu may recompute
    truth.release(truth.Unit("resnet", other, "score"))
    monkeypatch.setattr(truth, "DEVICE", "cuda")
    mine = truth.Unit("resnet", ARCH, "score")
    assert truth.next_unit(units) == mine  # trained on cuda: a cuda machine may recompute
    truth.release(mine)
    mine.path.write_text("{}")
    assert truth.next_unit(units) is None  # the cpu-trained arch has no weights here
    truth.MODELS.mkdir(parents=True)
    torch.save({}, truth.MODELS / f"{truth.Unit('resnet', other, 'train').stem}.pt")
    assert truth.next_unit(units) == truth.Unit("resnet", other, "score")  # carried weights


def test_hwa_trains_its_own_base_where_the_truths_weights_are_elsewhere(
        tiny_truth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The arch was trained on a GPU whose weights are gone: this CPU cannot score it, but its
    # HWA chain may start from the same training run done here, kept apart from the truth's.
    monkeypatch.setitem(truth.TRUTH, "hwa", {**truth.TRUTH["hwa"], "epochs": 0.01})
    train = truth.Unit("resnet", ARCH, "train")
    train.path.parent.mkdir(parents=True)
    train.path.write_text(json.dumps({"device": "cuda", "phase": "train"}))
    hwa = train.at("hwa")
    assert truth.next_unit(truth.plan({"resnet": [ARCH]})) == hwa  # score is passed over
    try:
        out = truth.run_unit(hwa)
    finally:
        truth.release(hwa)
    assert out["base_device"] == "cpu" and 0.0 <= out["base_acc_digital"] <= 1.0
    assert not (truth.MODELS / f"{train.stem}.pt").exists()  # never under the truth's name
    assert (truth.MODELS / f"{hwa.stem}.pt").is_file()
    # Where the truth's weights are here, HWA starts from them and records no base of its own.
    model = truth.model_of(truth.Unit("resnet", ARCH, "init"), "init")
    torch.save(model.state_dict(), truth.MODELS / f"{train.stem}.pt")
    assert truth._hwa_base(hwa)[1] == {}


def test_the_list_names_what_a_device_would_take_and_claims_nothing(
        tiny_truth: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bench.fidelity import __main__ as cli

    trained = truth.Unit("resnet", "rn:s32-d2r1c16", "train")  # a banded arch, CPU-trained
    trained.path.parent.mkdir(parents=True)
    trained.path.write_text(json.dumps({"device": "cpu", "phase": "train"}))
    args = cli.parse(["truth", "--list", "--device", "cuda"])  # no CUDA here: still a dry run
    args.run(args)
    out = capsys.readouterr().out
    assert out.startswith("truth on cuda: ") and "resnet hwa: 1" in out  # HWA trains its base
    assert "resnet score" not in out  # the CPU's weights are not on the GPU
    assert not (truth.DATA / "claims").exists()


def test_an_interrupted_run_still_packs_what_it_finished(tiny_truth: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A device window stops the truth with SIGINT at its time limit; the finished units must
    # still come back in the archive, and the interruption must still stop the command.
    from bench.fidelity import __main__ as cli

    unit = truth.Unit("resnet", ARCH, "train")

    def finish_one_then_stop(*_: object) -> int:
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text(json.dumps({"space": "resnet", "arch": ARCH, "phase": "train",
                                         "seed": 0, "device": "cpu", "acc_digital": 0.5}))
        raise KeyboardInterrupt

    monkeypatch.setattr(worker, "run", finish_one_then_stop)
    archive = tiny_truth / "out/truth_units.tar"
    args = cli.parse(["truth", "--workers", "1", "--hours", "1", "--pack", str(archive)])
    with pytest.raises(KeyboardInterrupt):
        args.run(args)
    with tarfile.open(archive) as tar:
        assert tar.getnames() == [f"bench/data/fidelity/units/{unit.stem}.json"]


def test_phase_selection_keeps_plan_order() -> None:
    units = truth.plan({"resnet": ["rn:s16-d1r1c16", "rn:s16-d1r1c24"]})
    trains = truth.with_phases(units, ("train",))
    assert [u.phase for u in trains] == ["train", "train"]
    assert [u.arch for u in trains] == [u.arch for u in units if u.phase == "train"]
    assert truth.with_phases(units, None) == units


def test_unknown_phase_is_a_clear_error() -> None:
    run = _cli("--phases", "train,scores", "--hours", "0")
    assert run.returncode != 0
    assert "unknown phase 'scores'" in run.stderr and "train,score,hwa,score_hwa" in run.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where CUDA is missing")
def test_cuda_truth_without_cuda_stops_before_any_work() -> None:
    before = (truth.DATA / "truth.csv").read_text()
    run = _cli("--device", "cuda", "--hours", "0")
    assert run.returncode != 0
    assert "--device: CUDA asked on a CPU machine" in run.stderr and "Fix:" in run.stderr
    assert "Traceback" not in run.stderr
    assert (truth.DATA / "truth.csv").read_text() == before


def test_a_started_second_seed_is_never_displaced(tiny_truth: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.fidelity import bands

    lat = {"rn:a": 0.80, "rn:b": 0.90, "rn:c": 0.70}
    doc = {"resnet": {"bands": {"0.85ms": list(lat)},
                      "archs": {a: {"latency_ms": v} for a, v in lat.items()}}}
    (tiny_truth / "bands.json").write_text(json.dumps(doc))
    monkeypatch.setattr(bands, "BANDS", tiny_truth / "bands.json")
    monkeypatch.setattr(bands, "N_SECOND", 1)

    def finish(arch: str, phase: str, seed: int = 0) -> None:
        unit = truth.Unit("resnet", arch, phase, seed)
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text("{}")

    finish("rn:b", "score")
    assert bands.second_seed_archs() == ["rn:b"]  # the only arch whose first seed is done
    finish("rn:b", "train", bands.SECOND_SEED)
    finish("rn:a", "score")  # faster, and done later: it must not take rn:b's place
    assert bands.second_seed_archs() == ["rn:b"]


def test_records_before_the_device_field_are_judged_by_their_provenance(tiny_truth: Path) -> None:
    # the first truth set's GPU units carry only their provenance's GPU name
    train, score = (truth.Unit("resnet", ARCH, p) for p in ("train", "score"))
    train.path.parent.mkdir(parents=True)
    train.path.write_text(json.dumps({"phase": "train",
                                      "provenance": {"device": "NVIDIA H100 80GB HBM3"}}))
    with pytest.raises(RuntimeError, match="trained on 'cuda'"):
        truth.run_unit(score)


def test_the_second_column_added_later_equals_the_score_units_own(
        tiny_truth: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(truth.TRUTH, "score", {**truth.TRUTH["score"], "times": ["1d"],
                                               "repeats": 1, "adabs": 64})
    train, score = (truth.Unit("resnet", ARCH, p) for p in ("train", "score"))
    truth.run_unit(train)
    truth.run_unit(score)
    key = "acc_pcm_static@1d"
    full = json.loads(score.path.read_text())
    # a record from before the column (the first set's records also lack the seed: 0)
    old = {k: v for k, v in full.items() if not k.startswith(key) and k != "seed"}
    score.path.write_text(json.dumps(old))
    assert truth.add_also(["rn:s16-d1r1c24"]) == []  # not asked for
    assert truth.add_also(None) == [score.stem]
    added = json.loads(score.path.read_text())
    assert added[key] == full[key] and added[f"{key}_accs"] == full[f"{key}_accs"]
    assert added["provenance"] == full["provenance"] and "also_provenance" in added
    assert truth.add_also(None) == []  # done once
    score.path.write_text(json.dumps({**old, "acc_digital": old["acc_digital"] + 0.01}))
    assert truth.add_also(None) == []  # the weights here are not the ones the record scored
    (truth.MODELS / f"{train.stem}.pt").unlink()
    score.path.write_text(json.dumps(old))
    assert truth.add_also(None) == []  # its weights are not here: never retrained for it
