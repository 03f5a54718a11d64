"""A study fixes analog hardware parameters (``hw_eval.options``): the accuracy model and the
analog cost estimate both use them, and the trial records them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from study_files import live_raw

from hwnas.common.errors import ConfigError
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.study.config import validate_study

ARCH = "rn:s16-d1r1c16-d1r2c32"


def _raw(tmp_path: Path, options: dict | None = None, **changes):  # noqa: ANN202
    hw_eval = {"repeats": 2, "eval_limit": 100, "target_se": None, "adabs": 64,
               **({"options": options} if options is not None else {})}
    return live_raw("opts", hw_eval=hw_eval,
                    latency={"max_seconds": 0.2, "cache": str(tmp_path / "costs.db")}, **changes)


@pytest.mark.parametrize(("options", "needle"), [
    ({"pcm": {"adc_bits": 1}}, r"hw_eval\.options\.pcm.*adc_bits must be an integer in 2\.\.16"),
    ({"pcm": {"adc_bit": 8}}, r"hw_eval\.options\.pcm.*option must be one of"),
    ({"pcm_hwa": {"adc_bits": 8}}, r"hw_eval\.options\.pcm_hwa.*objective or constraint"),
    ({"pcm": {"tile_size": 0}}, r"tile_size must be an integer >= 1"),
])
def test_bad_options_are_refused_with_the_study(tmp_path: Path, options, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        validate_study(_raw(tmp_path, options))


def test_options_on_a_quantized_model_are_refused(tmp_path: Path) -> None:
    raw = _raw(tmp_path, {"fq8": {"adc_bits": 8}},
               objectives=[{"metric": "accuracy", "hw": "fq8"}, {"metric": "latency"}])
    with pytest.raises(ConfigError, match="analog hardware models only"):
        validate_study(raw)


def test_cost_describes_the_first_analog_model_scored(tmp_path: Path) -> None:
    cfg = validate_study(_raw(tmp_path, {"pcm": {"tile_size": 64}}))
    assert glue.cost_hw(cfg) == ("pcm", {"tile_size": 64})
    digital = validate_study(_raw(tmp_path, objectives=[{"metric": "accuracy"},
                                                        {"metric": "latency"}]))
    assert glue.cost_hw(digital) == (None, {})


def test_one_tile_size_for_cost_and_accuracy(tmp_path: Path) -> None:
    train = {"train": {"steps": 60, "batch_size": 64, "lr": 0.1}}  # enough to read an ADC's loss
    plain = Evaluator(validate_study(_raw(tmp_path, **train))).evaluate(ARCH)
    small = Evaluator(validate_study(_raw(tmp_path, {"pcm": {"tile_size": 64, "adc_bits": 2}},
                                          **train)))
    out = small.evaluate(ARCH)
    m, p = out.metrics, plain.metrics
    # the cost estimate follows the hardware model: pcm's own 512-row tiles, or the option's 64
    assert p["analog_tile_size"] == 512 and m["analog_tile_size"] == 64
    assert m["analog_tiles"] > p["analog_tiles"]
    assert out.info["analog_cost_hw"] == "pcm" and plain.info["analog_cost_hw"] == "pcm"
    assert json.loads(out.info["analog_cost_options"]) == {"tile_size": 64, "adc_bits": 2}
    # the accuracy model gets them too: a 2-bit ADC ruins the analog accuracy
    assert m["acc_digital"] == p["acc_digital"]
    assert p["acc_pcm@1d"] > 0.6 and m["acc_pcm@1d"] < p["acc_pcm@1d"] - 0.2, (m, p)
