"""Deployed forms: int8 latency times a real int8 model, the cache keeps forms apart, bad forms
are clear errors."""

from __future__ import annotations

import pytest
import torch
from torch.profiler import profile

import hw_cost.api as api
import hw_cost.backends as backends
from hw_cost.api import cost_of
from hw_cost.forms import FORMS
from hw_cost.latency import measure_latency, prepare
from hwnas.common.errors import ConfigError

ARCH = ("resnet", "rn:s16-d1r1c16-d1r1c32")
SHAPE = (1, 8, 8)


def _operators(fn) -> set[str]:
    with profile() as prof:
        fn()
    return {e.key for e in prof.key_averages()}


def test_every_form_is_registered():
    assert FORMS.list() == ["bf16", "compile", "eager", "fp16", "int8"]


def test_int8_latency_runs_int8_kernels(cnn):
    """The timed call of the int8 form runs oneDNN's quantized conv and linear kernels (what
    inductor lowers torchao's int8 graph to); the eager form of the same model runs none."""
    with torch.inference_mode():
        int8 = prepare(cnn, SHAPE, device="cpu", batch_size=1, dtype=torch.float32,
                       channels_last=False, compile=False, form="int8")
        for _ in range(2):  # the first calls compile
            int8()
        eager = prepare(cnn, SHAPE, device="cpu", batch_size=1, dtype=torch.float32,
                        channels_last=False, compile=False, form="eager")
        quantized = [op for op in _operators(int8) if op.startswith("onednn::q")]
        assert quantized, _operators(int8)
        assert not [op for op in _operators(eager) if op.startswith("onednn::q")]
        assert int8().shape == eager().shape == (1, 10)


def test_int8_result_names_its_form(cnn, fast_rule):
    r = measure_latency(cnn, SHAPE, threads=1, rule=fast_rule, form="int8")
    assert r.form == "int8" and r.dtype == "fp32" and r.median_ms > 0


def test_cache_key_separates_forms(cache, monkeypatch):
    calls = []

    def fake_measure(model, input_shape, spec, **kw):
        calls.append(spec.form)
        return {"latency_ms": {"eager": 2.0, "int8": 1.0}[spec.form], "latency_stable": True,
                "latency_cv": 0.01, "latency_min_seconds": 0.0, "form": spec.form}
    monkeypatch.setattr(api, "measure_model", fake_measure)
    kw = {"input_shape": SHAPE, "num_classes": 10, "threads": 1, "cache": cache}
    eager = cost_of(*ARCH, **kw)
    int8 = cost_of(*ARCH, form="int8", **kw)
    assert calls == ["eager", "int8"] and not eager["cached"] and not int8["cached"]
    assert cost_of(*ARCH, **kw)["latency_ms"] == 2.0
    assert cost_of(*ARCH, form="int8", **kw)["latency_ms"] == 1.0
    assert calls == ["eager", "int8"]  # both answered from the cache, each with its own figure
    assert sorted(r["options"]["form"] for r in cache.rows()) == ["eager", "int8"]


@pytest.mark.parametrize("kwargs, where, text", [
    ({"form": "int4"}, "form", "must be one of"),
    ({"form": "int8", "device": "cuda"}, "form", "CPU only"),
    ({"form": "int8", "dtype": "bf16"}, "dtype", "quantizes the fp32 model"),
    ({"form": "bf16", "dtype": "fp16"}, "dtype", "computes in bf16"),
])
def test_bad_forms_are_clear_errors(kwargs, where, text, cnn):
    with pytest.raises(ConfigError) as err:
        measure_latency(cnn, SHAPE, threads=1, **kwargs)
    problems = [p for p in err.value.problems if p.where == where]
    assert problems and text in problems[0].rule and problems[0].fix


@pytest.mark.parametrize("form", ["fp16", "bf16"])
def test_half_forms_on_a_cpu_without_native_half_arithmetic(form, cnn, monkeypatch):
    monkeypatch.setattr(backends, "cpu_flags", lambda: frozenset({"avx2", "fma"}))
    with pytest.raises(ConfigError, match="software emulation"):
        measure_latency(cnn, SHAPE, threads=1, form=form)


def test_half_form_runs_where_the_cpu_has_it(cnn, fast_rule, monkeypatch):
    monkeypatch.setattr(backends, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    r = measure_latency(cnn, SHAPE, threads=1, rule=fast_rule, form="bf16")
    assert r.dtype == "bf16" and r.form == "bf16"


def _study(**latency) -> dict:
    return {"name": "s", "space": "resnet", "latency": latency,
            "objectives": [{"metric": "accuracy", "hw": "int8"}, {"metric": "latency"}]}


def test_a_study_times_the_form_its_hardware_model_implies():
    from nas.scoring.glue import latency_form
    from nas.study.config import validate_study

    assert latency_form(validate_study(_study())) == "int8"
    digital = {**_study(), "objectives": [{"metric": "accuracy"}, {"metric": "latency"}]}
    assert latency_form(validate_study(digital)) == "eager"
    assert latency_form(validate_study(_study(form="compile"))) == "compile"


def test_a_study_asking_int8_latency_on_cuda_is_refused_before_any_trial():
    from nas.study.config import validate_study

    with pytest.raises(ConfigError, match="CPU only") as err:
        validate_study(_study(form="int8", device="cuda"))
    assert "latency" in str(err.value)
    with pytest.raises(ConfigError, match="form"):
        validate_study(_study(form="int4"))
