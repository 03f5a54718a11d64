"""`hwnas analog-eval` end to end on digits (a resnet-space model trained for one epoch), from a
checkpoint, and its errors; `hwnas analog list`."""

from __future__ import annotations

import csv
import json

import pytest
import torch

from nas.cli import main

ARCH = "rn:s16-d1r1c16"


@pytest.mark.slow
def test_analog_eval_writes_csv_png_json(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["analog-eval", "--space", "resnet", "--arch", ARCH, "--data", "digits",
                 "--epochs", "1", "--times", "1s,1d", "--repeats", "2", "--hwa-epochs", "0.5",
                 "--compare-compensation", "--references", "digital,fq8", "--threads", "1",
                 "--out", str(out)])
    assert code == 0
    rows = list(csv.DictReader((out / "analog_eval.csv").open()))
    curves = {r["curve"] for r in rows}
    # the studies' hardware model and AdaBS by default, and the curve names say so
    assert curves == {"digital", "fq8", "pcm_static + AdaBS",
                      "pcm_static + AdaBS (no compensation)", "pcm_static + HWA + AdaBS",
                      "pcm_static + HWA + AdaBS (no compensation)"}
    assert {r["adabs"] for r in rows if r["curve"].startswith("pcm_static")} == {"256"}
    assert len(rows) == 2 + 4 * 2 and all(r["repeats"] in ("1", "2") for r in rows)
    assert (out / "analog_eval.png").stat().st_size > 10_000
    meta = json.loads((out / "analog_eval.json").read_text())
    assert meta["config"]["repeats"] == 2 and meta["model"]["arch"] == ARCH
    assert meta["provenance"]["versions"]["aihwkit"] == "1.2.0" and meta["hwa_fit"]["steps"] > 0
    assert len(meta["curves"][0]["points"][0]["accs"]) == 2
    printed = capsys.readouterr().out
    assert "pcm_static + HWA" in printed and "scored with AdaBS 256 img, 2 programmings" in printed


@pytest.mark.slow
def test_analog_eval_from_checkpoint(tmp_path, digits):
    from search_spaces import get_space

    model = get_space("resnet").build(ARCH, in_chans=1, num_classes=10, img_size=8)
    path = tmp_path / "model.pt"
    torch.save({"format": "hwnas-checkpoint/1", "space": "resnet", "arch": ARCH,
                "state_dict": model.state_dict(),
                "data": {"name": "digits", "in_chans": 1, "num_classes": 10, "img_size": 8},
                "hw": "digital", "metrics": {}, "config": {}, "provenance": {}}, path)
    code = main(["analog-eval", "--checkpoint", str(path), "--data", "digits", "--times", "1h",
                 "--repeats", "2", "--references", "", "--out", str(tmp_path / "o")])
    assert code == 0
    assert json.loads((tmp_path / "o" / "analog_eval.json").read_text())["model"]["checkpoint"]
    # a checkpoint for other input shapes is refused with the data set to use
    assert main(["analog-eval", "--checkpoint", str(path), "--data", "fashion_mnist",
                 "--test-limit", "10", "--train-limit", "100", "--references", "",
                 "--out", str(tmp_path / "p")]) == 2


@pytest.mark.parametrize(("args", "needle"), [
    (["--space", "resnet", "--arch", ARCH, "--times", "1 fortnight"], "1 fortnight"),
    (["--space", "resnet"], "--arch"),
    (["--space", "resnet", "--arch", ARCH, "--hw", "fq8"], "analog hardware model"),
    (["--checkpoint", "/nonexistent/model.pt"], "existing file"),
    (["--space", "resnet", "--arch", "rn:bad", "--repeats", "0", "--hw", "rram"], "3 problem"),
])
def test_bad_arguments_exit_2_with_the_rule(args, needle, capsys):
    assert main(["analog-eval", "--data", "digits", *args]) == 2
    assert needle in capsys.readouterr().err


def test_analog_list(capsys):
    assert main(["analog", "list"]) == 0
    out = capsys.readouterr().out
    assert "pcm" in out and "fq8" in out and "fqN" in out
