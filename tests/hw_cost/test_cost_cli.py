"""`hwnas cost ...`: the measure form, cache stats/export, roofline, predictors, bad input."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest

import hw_cost.backends as backends
import hw_cost.roofline as roofline
import hw_cost.spec as spec
from hw_cost.cache import CostCache
from nas.cli import main

ARCH = "rn:s16-d2r1c48"


@pytest.fixture
def db(tmp_path, monkeypatch) -> str:
    monkeypatch.setattr(backends.CpuBackend, "matmul_n", (256,))
    monkeypatch.setattr(backends.CpuBackend, "copy_bytes", 16 * 2**20)
    monkeypatch.setattr(roofline, "_WARMUP_S", 0.01)
    monkeypatch.setattr(roofline, "_TIMED_S", 0.02)
    # A stop rule that a 0.2 s timing always meets, even on a loaded host: a figure that missed
    # the rule is measured again on the next call by design, which would make the cache-hit
    # checks below depend on the host's load. These tests check the cache, not the timing. The
    # rule is patched where a spec builds it (MeasureSpec.stop_rule), the one place it is made.
    built = spec.MeasureSpec.stop_rule
    monkeypatch.setattr(spec.MeasureSpec, "stop_rule", lambda self: dataclasses.replace(
        built(self), rel_tol=1e9, min_repeats=5, window=5))
    return str(tmp_path / "costs.db")


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["cost", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_measure_prints_every_group_then_hits_the_cache(capsys, db):
    args = ("resnet", ARCH, "--input-shape", "1,8,8", "--threads", "1", "--max-seconds", "0.2",
            "--cache", db)
    code, out, _ = _run(capsys, *args)
    assert code == 0
    for group in ("setup:", "latency:", "static:", "roofline:", "analog (estimate):"):
        assert group in out
    # Without --threads: the default is 1 thread (a study's default), so the same cache entry.
    code, out, _ = _run(capsys, *[a for a in args if a != "--threads" and a != "1"], "--json")
    r = json.loads(out)
    assert code == 0 and r["cached"] is True and r["arch"] == ARCH and r["latency_ms"] > 0
    assert r["latency_stable"] is True  # the patched rule reached the timing
    assert r["threads"] == 1
    code, out, _ = _run(capsys, "cache", "stats", "--cache", db)
    assert code == 0 and "resnet" in out and "costs" in out


def test_hw_option_gives_the_estimate_its_tiles(capsys, db):
    args = ("resnet", ARCH, "--input-shape", "1,8,8", "--max-seconds", "0.2", "--cache", db,
            "--json")
    plain = json.loads(_run(capsys, *args)[1])
    hermes = json.loads(_run(capsys, *args, "--hw", "pcm_hermes")[1])
    assert plain["analog"]["tile_size"] == 512 and plain["analog"]["hw"] is None
    assert (hermes["analog"]["hw"], hermes["analog"]["read_mode"]) == ("pcm_hermes", "four_phase")
    assert CostCache(db).stats()["costs"] == 1  # one timing serves every hardware model
    assert hermes["analog_energy_uj"] > plain["analog_energy_uj"]  # its 9-bit ADC costs more


def test_data_option_takes_shape_and_classes(capsys, db):
    code, out, _ = _run(capsys, "resnet", ARCH, "--data", "digits", "--threads", "1",
                        "--max-seconds", "0.2", "--no-cache", "--json")
    r = json.loads(out)
    assert code == 0 and r["input_shape"] == [1, 8, 8] and r["cached"] is False
    assert CostCache(db).stats()["costs"] == 0


def test_cache_export(capsys, db, tmp_path):
    _run(capsys, "resnet", ARCH, "--input-shape", "1,8,8", "--max-seconds", "0.2",
         "--cache", db)
    _run(capsys, "resnet", ARCH, "--input-shape", "1,8,8", "--max-seconds", "0.2",
         "--cache", db, "--hw", "pcm_hermes")  # the same timing, a second model's estimate
    target = tmp_path / "out.csv"
    code, out, _ = _run(capsys, "cache", "export", str(target), "--cache", db)
    assert code == 0 and "exported 1 rows" in out and "2 analog estimates" in out
    assert pd.read_csv(target)["arch"].tolist() == [ARCH]
    est = pd.read_csv(tmp_path / "out.estimates.csv")
    # each row says which arch and hardware model it prices, and carries its figures
    assert est["arch"].tolist() == [ARCH, ARCH]
    assert sorted(est["hw"].fillna("(default)")) == ["(default)", "pcm_hermes"]
    assert est.set_index("hw")["read_mode"].get("pcm_hermes") == "four_phase"
    assert (est["energy_uj"] > 0).all() and est["key"].is_unique


def test_roofline_prints_the_ceilings_and_caches_them(capsys, db):
    code, out, _ = _run(capsys, "roofline", "--threads", "1", "--cache", db, "--json")
    first = json.loads(out)
    assert code == 0 and first["peak_gflops"] > 0 and first["peak_gbytes_per_s"] > 0
    _, again, _ = _run(capsys, "roofline", "--threads", "1", "--cache", db, "--json")
    assert json.loads(again) == first  # read back, not measured again


@pytest.mark.parametrize("argv, message", [
    (["resnet", ARCH, "--device", "tpu"], "device: must be one of ['cpu', 'cuda']"),
    (["resnet", ARCH, "--batch", "0"], "batch_size: must be a positive integer; got 0"),
    (["resnet", ARCH, "--dtype", "int4"], "dtype: must be one of"),
    (["resnet", ARCH, "--input-shape", "1,x,8"], "input_shape: must be comma-separated"),
    (["resnet", "rn:bad"], "resnet arch"),
    (["cache", "export"], "cache export: needs a target file"),
    (["build-lut", "resnet", "-n", "1"], "the calibration needs at least 2 archs"),
    (["eval-predictor", "resnet", "--holdout", "1.5"], "--holdout: must lie in (0, 1)"),
    (["eval-predictor", "resnet", "--regressor", "oracle"], "must be one of ['gbr', 'ridge']"),
    (["eval-predictor", "resnet"], "needs measured archs outside the LUT calibration set"),
    (["build-lut", "nospace", "-n", "2"], "space: must be one of"),
    (["resnet", ARCH, "--min-seconds", "5", "--max-seconds", "1"],
     "min_seconds: must lie in [0, max_seconds]"),
    (["resnet", ARCH, "--form", "int4"], "form: must be one of"),
    (["resnet", ARCH, "--form", "int4", "--profile"], "form: must be one of"),
    (["resnet", ARCH, "--hw", "pcmx"], "hardware model: must be one of"),
])
def test_bad_input_is_one_clear_line(capsys, db, argv, message):
    code, _, err = _run(capsys, *argv, "--cache", db)
    assert code == 2 and message in err and "Fix:" in err


def test_cuda_on_a_cpu_machine(capsys, db):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    code, _, err = _run(capsys, "resnet", ARCH, "--device", "cuda", "--cache", db)
    assert code == 2 and "CUDA asked on a CPU machine" in err


def test_int8_on_cuda_is_a_clear_error(capsys, db):
    code, _, err = _run(capsys, "resnet", ARCH, "--device", "cuda", "--form", "int8",
                        "--cache", db)
    assert code == 2 and "int8 is torchao's x86 int8 model, which runs on CPU only" in err


def test_profile_writes_a_trace_and_ranks_operators(capsys, db, tmp_path):
    trace = tmp_path / "trace.json"
    code, out, _ = _run(capsys, "resnet", ARCH, "--input-shape", "1,8,8", "--profile",
                        str(trace), "--json")
    r = json.loads(out)
    assert code == 0 and json.loads(trace.read_text())["traceEvents"]
    shares = [row["share"] for row in r["operators"]]
    assert shares == sorted(shares, reverse=True) and 0 < sum(shares) <= 1 + 1e-9
    assert any(row["operator"] == "aten::mkldnn_convolution" or "conv" in row["operator"]
               for row in r["operators"])
    code, out, _ = _run(capsys, "resnet", ARCH, "--input-shape", "1,8,8", "--profile",
                        str(trace), "--top", "3")
    table = out.split("self ms/fwd", 1)[1].strip().splitlines()[1:]  # rows after the header
    assert code == 0 and len(table) == 3 and table[0].endswith("%")


def test_profile_on_a_device_not_present(capsys, db, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    trace = tmp_path / "trace.json"
    code, _, err = _run(capsys, "resnet", ARCH, "--device", "cuda", "--profile", str(trace))
    assert code == 2 and "CUDA asked on a CPU machine" in err and not trace.exists()


def test_help_lists_the_sub_commands(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["cost", "-h"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "SPACE ARCH" in out and "build-lut" in out and "eval-predictor" in out
