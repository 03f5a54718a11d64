"""A model card says what each stored metric means: its unit and the hardware model it was
measured for, whatever that model's name (names such as ``pcm_static`` hold underscores)."""

from __future__ import annotations

import pytest
from study_files import live_raw

from nas.results.cards import describe_metric
from nas.study.config import validate_study


@pytest.mark.parametrize("hw", ["pcm", "pcm_static", "reram_wan2022", "pcm_custom_drift"])
def test_coverage_keeps_its_hardware_model(hw: str) -> None:
    cfg = validate_study(live_raw())
    out = describe_metric(f"{hw}_analog_mac_fraction", 0.9, {}, cfg, {})
    assert out["hw"] == hw and out["unit"] == "fraction"


def test_the_study_wide_coverage_names_no_model() -> None:
    cfg = validate_study(live_raw())
    out = describe_metric("analog_mac_fraction", 0.9, {}, cfg, {})
    assert "hw" not in out and out["estimate"] is True
