"""One set of scoring defaults: studies, `hwnas analog-eval`, sweeps and finalize score analog
models alike (AdaBS on with the studies' image count), and every output says how it scored."""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import replace

import analog
from analog import defaults
from analog.experiment import ExperimentConfig, run_experiment
from analog.report import write_all


def test_studies_and_experiments_share_the_defaults():
    from nas.study.config import HwEvalCfg

    study = HwEvalCfg()
    assert study.adabs == defaults.ADABS_IMAGES > 0
    assert (study.fast, study.compensation) == (defaults.FAST, defaults.COMPENSATION)
    cfg = ExperimentConfig()
    assert (cfg.adabs, cfg.fast, cfg.compensation, cfg.repeats) == (
        defaults.ADABS_IMAGES, defaults.FAST, defaults.COMPENSATION, defaults.REPEATS)


def _cli_config(*extra: str) -> ExperimentConfig:
    from nas.commands import analog as command

    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["analog-eval", "--space", "resnet", "--arch", "rn:s16-d1r1c16",
                              *extra])
    return command._experiment_config(args)


def test_analog_eval_scores_like_a_study_unless_told():
    cfg = _cli_config()
    assert (cfg.adabs, cfg.repeats, cfg.fast) == (defaults.ADABS_IMAGES, defaults.REPEATS, True)
    assert _cli_config("--adabs", "0", "--repeats", "3").adabs == 0


def test_the_default_hardware_is_the_one_the_shipped_studies_score():
    from nas.study.files import load_study

    scored = {o.hw for o in load_study("quickstart").objectives_resolved() if o.hw}
    assert scored == {defaults.HW} == {"pcm_static"}
    assert _cli_config().hw == ExperimentConfig().hw == defaults.HW
    assert _cli_config("--hw", "pcm").hw == "pcm"  # the idealised model stays, by name
    assert ExperimentConfig().calib_size == defaults.CALIB_IMAGES


class _Result:
    adabs, repeats, path, compensation, images = 0, 3, "aihwkit", False, 500


def test_scoring_label_names_every_setting():
    label = defaults.scoring_label(_Result())
    assert label == ("AdaBS off, 3 programmings, aihwkit tiles, drift compensation off, "
                     "500 test images")
    assert defaults.scoring_record(_Result())["adabs_images"] == 0


def test_every_output_says_how_it_scored(trained_cnn, digits, tmp_path):
    small = replace(digits, x_test=digits.x_test[:100], y_test=digits.y_test[:100])
    cfg = ExperimentConfig(times=("1d",), repeats=2, adabs=64, references=(),
                           sweeps={"adc_bits": [9]})
    lines: list[str] = []
    result = run_experiment(trained_cnn, small, cfg, log=lines.append)
    said = "AdaBS 64 img, 2 programmings, fast path, drift compensation on, 100 test images"
    assert sum(said in line for line in lines) == 2  # the curve and the swept value
    paths = write_all(result, tmp_path, title="t", meta={})
    (row,) = csv.DictReader(paths["csv"].open())
    assert (row["adabs"], row["path"], row["compensation"]) == ("64", "fast", "True")
    (swept,) = csv.DictReader(paths["sweep_csv"].open())
    assert (swept["adabs_images"], swept["path"]) == ("64", "fast")
    payload = json.loads(paths["json"].read_text())
    assert payload["curves"][0]["scoring"] == {"adabs_images": 64, "repeats": 2, "path": "fast",
                                               "compensation": True, "images": 100}
    assert payload["scoring_defaults"]["adabs_images"] == defaults.ADABS_IMAGES


def _report_config(tmp_path, *extra: str):
    from nas.commands import analog_report as command

    weights = tmp_path / "w.pt"
    weights.write_bytes(b"x")
    parser = argparse.ArgumentParser()
    command.add_report(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["report", "--model", "timm:resnet18", "--weights", str(weights),
                              "--out", str(tmp_path / "out"),
                              *extra])
    return command._config(args)


def test_one_adabs_default_in_the_python_api_the_clis_and_the_studies(trained_cnn, digits,
                                                                     tmp_path):
    from nas.study.config import HwEvalCfg

    x, y, train = digits.x_test[:60], digits.y_test[:60], digits.x_train
    said = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), adabs_images=train)
    counts = {"python": said.adabs, "study": HwEvalCfg().adabs,
              "analog-eval": _cli_config().adabs, "analog report": _report_config(tmp_path).adabs}
    assert set(counts.values()) == {defaults.ADABS_IMAGES}, counts
    assert _report_config(tmp_path, "--adabs", "0").adabs == 0
    off = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), adabs=0, adabs_images=train)
    assert off.adabs == 0 and not any("AdaBS" in n for n in off.notes)
    # without training images evaluate cannot draw them: off, and the result says so
    bare = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",))
    assert bare.adabs == 0 and any("AdaBS off: no training images" in n for n in bare.notes)
    few = analog.evaluate(trained_cnn, x, y, "pcm", times=("1d",), adabs_images=train[:40])
    assert few.adabs == 40 and any("fewer than the default" in n for n in few.notes)
