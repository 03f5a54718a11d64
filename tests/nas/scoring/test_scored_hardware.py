"""The shipped studies score, charge and HWA-train one hardware model: the HERMES-like
``pcm_static`` where a study models that chip, whose static input ranges are calibrated on
training images; a run folder scored on another model is refused, not relabelled."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from study_files import live_raw, tabular_raw

import analog
import analog.static_io
from hw_cost.analog_cost import figures_for
from hwnas.common.errors import ConfigError
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from nas.study import store
from nas.study.config import validate_study
from nas.study.files import load_study

SCORED = {"quickstart": "pcm_static", "quickstart_mapping": "pcm_static",
          "quickstart_supernet": "pcm_static", "fmnist_resnet_pcm": "pcm_static",
          "fmnist_mbconv_pcm": "pcm_static",
          "quickstart_gpu": "pcm_static"}
ON_CPU = {"latency.device": "cpu", "train.device": "cpu"}


def _analog_scored(cfg) -> set[str]:  # noqa: ANN001 - a StudyConfig
    return {o.hw for o in [*cfg.objectives_resolved(), *cfg.budgets()]
            if o.hw and analog.get_hw(o.hw).kind == "analog"}


@pytest.mark.parametrize(("name", "hw"), sorted(SCORED.items()))
def test_each_study_scores_charges_and_hwa_trains_one_model(name: str, hw: str) -> None:
    cfg = load_study(name, ON_CPU if name.endswith("_gpu") else None)
    assert _analog_scored(cfg) == {hw}
    assert glue.cost_hw(cfg) == (hw, {})  # the energy estimate describes the scored model
    assert glue.hwa_target(cfg, hw).hw.name == hw  # and HWA (hw_eval.hwa) trains for it


def test_the_hermes_like_model_is_charged_for_the_periphery_it_scores() -> None:
    scored = analog.get_hw("pcm_static").describe()
    charged = figures_for("pcm_static")
    assert scored["input_range"] and scored["noise_management"] == "CONSTANT"
    assert scored["bound_management"] == "NONE"  # one MVM per input vector, as charged
    assert (charged.tile_rows, charged.tile_cols) == (scored["tile_rows"], scored["tile_cols"])
    assert (charged.tile_rows, charged.adc_bits, charged.read_mode) == (256, 8, "four_phase")
    assert figures_for("pcm").tile_rows == 512  # the idealised model keeps its own tiles


def test_static_ranges_are_calibrated_on_training_images(tmp_path: Path, monkeypatch) -> None:
    seen: list[torch.Tensor] = []
    real = analog.static_io.quantile_ranges

    def spy(model, rpu, calib, **kwargs):  # noqa: ANN001, ANN202 - records, then calibrates
        seen.append(calib.clone())
        return real(model, rpu, calib, **kwargs)

    monkeypatch.setattr(analog.static_io, "quantile_ranges", spy)
    raw = live_raw("static", objectives=[{"metric": "accuracy", "hw": "pcm_static", "time": "1d"},
                                         {"metric": "latency"}],
                   latency={"max_seconds": 0.2, "cache": str(tmp_path / "costs.db")})
    ev = Evaluator(validate_study(raw))
    out = ev.evaluate("rn:s16-d1r1c16-d1r2c32")
    assert 0.0 <= out.metrics["acc_pcm_static@1d"] <= 1.0
    assert out.info["analog_cost_hw"] == "pcm_static"
    assert len(seen) == 1  # once per candidate, before the first programming
    train, test = ev.data.x_train, ev._eval_split()[0]
    assert torch.equal(seen[0], train[:len(seen[0])])
    flat = seen[0].flatten(1)
    assert not (torch.cdist(flat, test.flatten(1)) == 0).any()  # no test image among them


def test_a_run_folder_stored_on_other_objectives_is_refused_and_kept(tmp_path: Path) -> None:
    old = validate_study(tabular_raw("moved"))
    folder = store.prepare_dir(old, tmp_path)
    store.create_or_load(old, store.open_storage(old.storage_url(folder)))
    before = (folder / "config.yaml").read_text()
    new = validate_study(tabular_raw("moved", objectives=[{"metric": "accuracy"},
                                                          {"metric": "params"}],
                                     tabular={"path": old.tabular.path,
                                              "columns": {"params": "latency_ms"}}))
    with pytest.raises(ConfigError, match=r"keeps its objectives.*acc_digital', 'latency_ms'"):
        store.prepare_dir(new, tmp_path)
    assert (folder / "config.yaml").read_text() == before  # reports still read the old keys
    assert yaml.safe_load(before)["objectives"][1]["metric"] == "latency"
