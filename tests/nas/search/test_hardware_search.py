"""Hardware searched with the architecture (``hw_eval.hardware``): sampled in the trial, encoded
as one string, and read by the accuracy model and the energy estimate from one description."""

from __future__ import annotations

import math

import optuna
import pytest
from study_files import live_raw

import analog
from hw_cost.analog_cost import figures_for
from hwnas.common.errors import ConfigError
from nas.results.cards import energy_section
from nas.results.export import candidate_dirname
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.search.sampling import sample_candidate
from nas.study import store
from nas.study.config import validate_study
from nas.study.files import load_study
from nas.study.hardware import Hardware, from_choice

HW_SPACE = {"adc_bits": [6, 8], "dac_bits": [6, 8], "read_mode": ["one_phase", "four_phase"],
            "compensation": [True, False], "digital": ["none", "first_last"]}


def _hw_raw(**hardware):  # noqa: ANN202 - a study dict
    raw = live_raw("hw", objectives=[{"metric": "accuracy", "hw": "pcm_static", "time": "1d"},
                                     {"metric": "energy"}])
    raw["hw_eval"]["hardware"] = hardware or dict(HW_SPACE)
    return raw


def test_the_shipped_joint_study_checks() -> None:
    cfg = load_study("quickstart_hw")
    assert set(cfg.hw_eval.hardware_space.searched) >= {"adc_bits", "read_mode", "digital"}


def test_bad_hardware_dims_are_reported_at_once() -> None:
    raw = _hw_raw(adc_bits=[6, 40], read_mode="two_phase", device=["pcm_static", "nope"],
                  colour="red")
    with pytest.raises(ConfigError) as err:
        validate_study(raw)
    text = str(err.value)
    for bad in ("40", "two_phase", "nope", "colour"):
        assert bad in text
    assert len(err.value.problems) >= 4


def test_a_searched_hardware_needs_an_analog_objective() -> None:
    raw = _hw_raw()
    raw["objectives"] = [{"metric": "accuracy"}, {"metric": "latency"}]
    with pytest.raises(ConfigError, match="analog accuracy objective"):
        validate_study(raw)


def test_sampling_is_seeded_and_the_code_names_every_choice() -> None:
    cfg = validate_study(_hw_raw())
    space, mcfg = cfg.search_space(), cfg.hw_eval.mapping_cfg

    def codes(seed: int) -> list[tuple[str, str]]:
        study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        out = []
        for _ in range(6):
            trial = study.ask()
            arch, choice = sample_candidate(trial, space, mcfg)
            hw = from_choice(choice)
            assert trial.params["hw.read_mode"] == hw.read_mode  # a trial parameter
            assert (choice["first_k_digital"], choice["last_k_digital"]) == tuple(
                hw.mapping().values())
            out.append((arch, hw.code))
            study.tell(trial, 0.0)
        return out

    first = codes(0)
    assert first == codes(0)
    assert len({c for _, c in first}) > 1
    hw = Hardware(device="pcm_static", adc_bits=6, dac_bits=8, tile_size=256,
                  read_mode="one_phase", compensation=False, digital="first_last")
    assert hw.code == "pcm_static:a6-d8-t256-1p-nodc-dfl"


@pytest.mark.parametrize("read_mode", ["one_phase", "four_phase"])
def test_energy_and_accuracy_describe_one_chip(read_mode: str) -> None:
    """Tile, ADC bits and read mode of the energy estimate are those the accuracy model is
    built with; a one-phase read is charged less and scored with fewer input bits."""
    hw = Hardware(device="pcm_static", adc_bits=6, dac_bits=8, tile_size=128,
                  read_mode=read_mode)
    desc = analog.get_hw("pcm_static").describe(**hw.options())
    fig = figures_for("pcm_static", hw.figures(), hw.cost_options())
    assert fig.read_mode == read_mode
    assert (fig.tile_rows, fig.adc_bits) == (desc["tile_rows"], 6)
    assert math.isclose(desc["out_res"], 1 / (2 ** 6 - 2))
    dac = 7 if read_mode == "one_phase" else 8
    assert math.isclose(desc["inp_res"], 1 / (2 ** dac - 2))


def test_four_phase_costs_more_than_one_phase() -> None:
    cfg = validate_study(_hw_raw())
    model = Evaluator(cfg).build("rn:s16-d1r1c16-d1r1c32")
    shape = Evaluator(cfg).data.input_shape
    one, four = (glue.mapped_costs(cfg, model, shape, [], Hardware(device="pcm_static",
                                                                     read_mode=m))
                 for m in ("one_phase", "four_phase"))
    assert four["analog_energy_uj"] > 2 * one["analog_energy_uj"]
    assert (one["analog_one_phase"], four["analog_one_phase"]) == (1.0, 0.0)


@pytest.mark.slow
def test_sampled_hardware_reaches_accuracy_and_energy(monkeypatch) -> None:
    cfg = validate_study(_hw_raw())
    seen: dict[str, object] = {}
    real_eval, real_cost = analog.evaluate, glue.analog_cost

    def spy_eval(model, x, y, hw, protocol, **kw):  # noqa: ANN001, ANN202 - records, scores
        seen["acc"] = (hw, protocol.options, list(protocol.digital))
        return real_eval(model, x, y, hw, protocol, **kw)

    def spy_cost(model, shape, **kw):  # noqa: ANN001, ANN202 - records, then estimates
        seen["cost"] = (kw.get("hw"), kw.get("hw_options"), kw["figures"].read_mode,
                        list(kw.get("digital") or []))
        return real_cost(model, shape, **kw)

    monkeypatch.setattr(analog, "evaluate", spy_eval)
    monkeypatch.setattr(glue, "analog_cost", spy_cost)
    choice = {"first_k_digital": 1, "last_k_digital": 1, "hw.device": "pcm_static",
              "hw.adc_bits": 6, "hw.dac_bits": 6, "hw.read_mode": "one_phase",
              "hw.compensation": False, "hw.digital": "first_last"}
    out = Evaluator(cfg).evaluate("rn:s16-d1r1c16-d1r1c32", mapping=choice)
    hw, options, digital = seen["acc"]
    assert (hw, options) == ("pcm_static", {"adc_bits": 6, "dac_bits": 5,
                                            "compensation": False})
    assert seen["cost"] == ("pcm_static", {"adc_bits": 6}, "one_phase", digital)
    assert len(digital) == 2  # first and last mappable layer kept digital, in both models
    assert out.info["hardware"] == "pcm_static:a6-d6-t--1p-nodc-dfl"
    assert math.isfinite(out.metrics["acc_pcm_static@1d"]) and out.values


def test_the_hardware_string_reaches_the_table_folder_and_card() -> None:
    study = optuna.create_study(directions=["maximize"])
    for code, mode in (("pcm_static:a6-d8-t256-1p-gdc-dnone", "one_phase"),
                       ("pcm_static:a8-d8-t256-4p-gdc-dnone", "four_phase")):
        trial = study.ask()
        trial.set_user_attr("arch", "rn:s16-d1r1c16")
        trial.set_user_attr("analog_energy_uj", 1.0)
        trial.set_user_attr("info", {"hardware": code, "analog_read_mode": mode})
        study.tell(trial, 0.5)
    frame = store.trials_frame(study)
    assert list(frame["hardware"]) == ["pcm_static:a6-d8-t256-1p-gdc-dnone",
                                       "pcm_static:a8-d8-t256-4p-gdc-dnone"]
    attrs = [t.user_attrs for t in study.trials]
    assert len({candidate_dirname(a) for a in attrs}) == 2  # one arch, two chips: two models
    modes = [energy_section(a, a["info"])["read_mode"] for a in attrs]
    assert modes == ["one_phase", "four_phase"]  # every energy figure names its read mode


def test_a_one_phase_read_loses_a_bit_of_the_scored_models_own_dac() -> None:
    """Without ``dac_bits`` searched, one-phase still costs input precision: one bit of the
    scored model's own (8 for pcm_static, 7 for pcm), never none."""
    from nas.study.hardware import dac_bits_of

    assert (dac_bits_of("pcm_static"), dac_bits_of("pcm")) == (8, 7)
    assert Hardware(read_mode="one_phase").options("pcm_static") == {"dac_bits": 7}
    assert Hardware(device="pcm", read_mode="one_phase").options("pcm_static") == {"dac_bits": 6}
    assert Hardware(read_mode="four_phase").options("pcm_static") == {}


def test_a_chip_cores_budget_counts_the_sampled_chip_s_tiles() -> None:
    raw = _hw_raw(device="pcm_static", tile_size=[64, 512], digital=["none", "first_last"])
    raw["constraints"] = [{"metric": "tiles", "max": 8}]
    cfg = validate_study(raw)
    evaluator = Evaluator(cfg)
    small = evaluator.evaluate("rn:s16-d1r1c16-d1r1c32", mapping={
        "hw.device": "pcm_static", "hw.tile_size": 512, "hw.digital": "first_last"})
    many = evaluator.evaluate("rn:s16-d1r1c16-d1r1c32", mapping={
        "hw.device": "pcm_static", "hw.tile_size": 64, "hw.digital": "none"})
    assert small.metrics["analog_tiles"] <= 8 < many.metrics["analog_tiles"]
    assert small.feasible and not many.feasible  # over the chip: not trained
    assert many.constraints["analog_tiles"] > 0 and "skipped" in many.info
