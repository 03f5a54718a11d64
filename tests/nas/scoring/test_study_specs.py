"""A study's settings become one measurement spec and one scoring protocol (``nas.scoring.glue``),
field for field: a timing option added to ``latency`` and to ``MeasureSpec`` needs no other line."""

from __future__ import annotations

import dataclasses

from study_files import live_raw

from hw_cost import MeasureSpec
from nas.scoring.glue import measure_spec, scoring_protocol
from nas.study.config import validate_study


def test_every_latency_field_the_spec_has_is_carried() -> None:
    raw = live_raw("spec")
    raw["latency"].update(warmup_seconds=0.05, min_seconds=0.2, max_seconds=1.0, threads=1)
    cfg = validate_study(raw)
    spec = measure_spec(cfg)
    rule = spec.stop_rule()
    assert (rule.warmup_seconds, rule.min_seconds, rule.max_seconds) == (0.05, 0.2, 1.0)
    shared = {f.name for f in dataclasses.fields(MeasureSpec)} & set(cfg.latency.model_fields)
    assert shared >= {"device", "batch_size", "dtype", "threads", "max_seconds", "min_seconds",
                      "warmup_seconds"}
    for name in shared - {"form"}:
        assert getattr(spec, name) == getattr(cfg.latency, name), name
    assert spec.form == "eager"  # the form the objectives imply when latency.form is unset


def test_the_scoring_protocol_is_the_study_s_and_the_rung_s_precision() -> None:
    cfg = validate_study(live_raw("protocol"))
    p = scoring_protocol(cfg, "pcm", ["1d"], digital=["stem.*"])
    he = cfg.hw_eval
    assert (p.repeats, p.seed, p.adabs, p.times, tuple(p.digital)) == (
        he.repeats, cfg.seed, he.adabs, (86400.0,), ("stem.*",))
    digital = scoring_protocol(cfg, "digital", [None], digital=["stem.*"])
    assert digital.adabs == 0 and digital.target_se is None and tuple(digital.digital) == ()

    class Rung:
        target_se, max_repeats = 0.01, 7

    rung = scoring_protocol(cfg, "pcm", ["1d"], precision=Rung())
    assert (rung.target_se, rung.max_repeats) == (0.01, 7)
