"""The measurement spec: one object through ``cost_of``, ``measure_model``, ``measure_latency``
and ``compare_latency``; the earlier keywords give the same figures, with a deprecation warning;
no function on the scoring path takes more than 10 parameters."""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest
import torch
from torch import nn

from hw_cost import ChipSpec, MeasureSpec, cost_of, measure_latency
from hw_cost.compare import compare_latency

SHAPE = (1, 8, 8)
QUICK = MeasureSpec(threads=1, max_seconds=0.2, batch_size=2)
ARCH = ("resnet", "rn:s16-d1r1c16")
# The scoring path: every module a candidate's cost or hardware accuracy passes through.
SCORING_PATH = ("hw_cost.api", "hw_cost.latency", "hw_cost.compare", "hw_cost.predictors",
                "hw_cost.analog_cost", "analog.drift", "nas.scoring.glue",
                "nas.scoring.evaluate", "nas.finalize.measure", "nas.finalize.steps")


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 3)).eval()


def test_the_spec_decides_the_timing_and_is_recorded() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the spec form never warns
        res = measure_latency(_model(), SHAPE, QUICK)
    assert (res.batch_size, res.threads, res.form, res.clock) == (2, 1, "eager", "wall")


def test_the_earlier_keywords_still_time_the_same_setting_and_warn() -> None:
    with pytest.warns(DeprecationWarning, match=r"MeasureSpec\(batch_size=2"):
        old = measure_latency(_model(), SHAPE, batch_size=2, threads=1, max_seconds=0.2)
    new = measure_latency(_model(), SHAPE, QUICK)
    keep = ("batch_size", "threads", "form", "clock", "dtype", "device", "min_seconds")
    assert {k: getattr(old, k) for k in keep} == {k: getattr(new, k) for k in keep}


def test_cost_of_takes_the_chip_as_one_object_and_the_old_keywords_agree(tmp_path) -> None:
    space, arch, cache = *ARCH, tmp_path / "costs.db"  # one ceilings measurement for both
    chip = ChipSpec(hw="pcm_static", tile_size=64)
    new = cost_of(space, arch, input_shape=(1, 16, 16), num_classes=10, spec=QUICK, chip=chip,
                  cache=cache)
    with pytest.warns(DeprecationWarning, match="cost_of"):
        old = cost_of(space, arch, input_shape=(1, 16, 16), num_classes=10, threads=1,
                      max_seconds=0.2, batch_size=2, hw="pcm_static", tile_size=64, cache=cache,
                      refresh=True)
    assert new["analog_tile_size"] == old["analog_tile_size"] == 64
    for key in ("analog_tiles", "analog_energy_uj", "params", "macs", "batch_size"):
        assert new[key] == old[key], key


def test_compare_latency_reads_the_spec() -> None:
    r = compare_latency({"a": _model(), "b": _model()}, SHAPE, QUICK, seconds=0.1, min_rounds=2)
    assert r["device"] == "cpu" and set(r["models"]) == {"a", "b"}


def test_a_misspelt_setting_is_a_type_error_not_a_silent_default() -> None:
    with pytest.raises(TypeError, match="batch_size"):
        measure_latency(_model(), SHAPE, batch=2)


def _too_wide(module: str) -> list[str]:
    mod = importlib.import_module(module)
    out = []
    for name, obj in vars(mod).items():
        if inspect.isfunction(obj) and obj.__module__ == module:
            n = len(inspect.signature(obj).parameters)
            if n > 10:
                out.append(f"{module}.{name}: {n}")
    return out


@pytest.mark.parametrize("module", SCORING_PATH)
def test_no_function_on_the_scoring_path_takes_more_than_ten_parameters(module: str) -> None:
    assert _too_wide(module) == []


def test_the_width_check_sees_a_wide_function(tmp_path, monkeypatch) -> None:
    (tmp_path / "wide_mod.py").write_text(
        "def f(a, b, c, d, e, f, g, h, i, j, k):\n    return a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _too_wide("wide_mod") == ["wide_mod.f: 11"]

