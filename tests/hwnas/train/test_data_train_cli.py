"""`hwnas data list|info` and `hwnas train`, run through the real command line entry point."""

from __future__ import annotations

import json

import pytest

from hwnas.train.datasets import list_datasets
from nas.cli import main

ARCH = "rn:s16-d1r1c16-d1r1c32"


def test_data_list_shows_every_data_set(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in list_datasets():
        assert name in out
    assert "1x28x28" in out and "1x8x8" in out


def test_data_list_pattern(capsys):
    assert main(["data", "list", "*mnist*"]) == 0
    out = capsys.readouterr().out
    assert "fashion_mnist" in out and "digits" not in out


def test_data_info_text_and_json(capsys):
    assert main(["data", "info", "digits", "--val-fraction", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "(1, 8, 8)" in out and "'val': 287" in out and "mean" in out and "load_digits" in out
    assert main(["data", "info", "synthetic", "--json", "--data-option", "img_size=6",
                 "--data-option", "n_train=100"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["input_shape"] == [3, 6, 6] and info["sizes"]["train"] == 90


def test_data_info_missing_root_is_one_line_error(capsys, tmp_path):
    missing = tmp_path / "absent"
    assert main(["data", "info", "fashion_mnist", "--data-root", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hwnas: error:") and str(missing) in err
    assert "apt-get install dataset-fashion-mnist" in err and "\n" not in err


def test_data_info_unknown_data_set(capsys):
    assert main(["data", "info", "imagenet"]) == 2
    err = capsys.readouterr().err
    assert "'imagenet'" in err and "digits" in err


def test_bad_data_option_syntax(capsys):
    assert main(["data", "info", "digits", "--data-option", "oops"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_train_prints_accuracy_and_writes_json(capsys, tmp_path):
    out_json = tmp_path / "r.json"
    code = main(["train", "resnet", ARCH, "--data", "digits", "--epochs", "2",
                 "--batch-size", "64", "--lr", "0.1", "--json", str(out_json)])
    assert code == 0
    out = capsys.readouterr().out
    assert "test acc" in out and "images/s" in out and "params" in out and "epoch  2.00" in out
    result = json.loads(out_json.read_text())
    assert 0 < result["test_acc"] <= 1 and result["fit"]["steps"] == 2 * (1293 // 64)
    assert result["config"]["lr"] == 0.1 and "versions" in result["provenance"]


def test_train_save_round_trips_through_the_checkpoint_format(capsys, tmp_path):
    import torch

    from hwnas.train.data import load_data
    from hwnas.train.loop import evaluate
    from search_spaces.checkpoint import load_checkpoint

    path = tmp_path / "model.pt"
    assert main(["train", "resnet", ARCH, "--data", "digits", "--steps", "5",
                 "--save", str(path)]) == 0
    model, meta = load_checkpoint(path)
    assert meta["space"] == "resnet" and meta["arch"] == ARCH and meta["data"]["img_size"] == 8
    data = load_data("digits")
    acc = evaluate(model, data.x_test, data.y_test)["acc"]
    assert acc == pytest.approx(meta["metrics"]["test_acc"])
    assert isinstance(model, torch.nn.Module)


def test_train_reports_every_bad_input_at_once(capsys):
    code = main(["train", "nospace", "x", "--data", "nodata", "--epochs", "0", "--lr", "-1",
                 "--optimizer", "adam"])
    assert code == 2
    err = capsys.readouterr().err
    for part in ("nospace", "nodata", "FitConfig.epochs", "FitConfig.lr", "'adam'", "5 problem"):
        assert part in err


def test_train_malformed_arch_shows_the_grammar(capsys):
    assert main(["train", "resnet", "rn:bogus", "--data", "digits"]) == 2
    err = capsys.readouterr().err
    assert "rn:bogus" in err and "Arch string" in err


def test_help_everywhere(capsys):
    for argv in (["data", "--help"], ["data", "info", "--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 0
    assert "--data-root" in capsys.readouterr().out
