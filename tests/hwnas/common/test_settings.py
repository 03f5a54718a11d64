"""``settle``: a settings object with the earlier keyword arguments applied, and a warning."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import pytest

from hwnas.common.settings import REMOVED_IN, settle


@dataclass(frozen=True)
class Spec:
    device: str = "cpu"
    batch_size: int = 1


def test_without_keywords_the_spec_passes_through_silently() -> None:
    given = Spec(batch_size=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert settle(Spec, given, {}, "f") is given
        assert settle(Spec, None, {}, "f") == Spec()


def test_keywords_are_applied_over_the_spec_with_a_deprecation_warning() -> None:
    with pytest.warns(DeprecationWarning) as caught:
        got = settle(Spec, Spec(device="cuda"), {"batch_size": 32}, "measure_latency")
    assert got == Spec(device="cuda", batch_size=32)
    text = str(caught[0].message)
    assert "measure_latency(" in text and "Spec(batch_size=32)" in text and REMOVED_IN in text


def test_an_unknown_keyword_is_a_type_error_naming_the_fields() -> None:
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'batch'.*batch_size"):
        settle(Spec, None, {"batch": 4}, "measure_latency")
