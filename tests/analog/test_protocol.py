"""``analog.evaluate`` takes its scoring protocol as one ``ScoringProtocol``; the earlier keyword
form gives the same numbers (same seed, same noise draws) with a deprecation warning."""

from __future__ import annotations

import warnings

import pytest

import analog


def test_the_protocol_and_the_earlier_keywords_give_the_same_estimate(trained_cnn, digits):
    x, y = digits.x_test[:100], digits.y_test[:100]
    protocol = analog.ScoringProtocol(times=("1d",), repeats=2, seed=5,
                                      options={"adc_bits": 6})
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        new = analog.evaluate(trained_cnn, x, y, "pcm_static", protocol, calib=digits.x_train[:64])
    with pytest.warns(DeprecationWarning, match=r"ScoringProtocol\("):
        old = analog.evaluate(trained_cnn, x, y, "pcm_static", times=("1d",), repeats=2, seed=5,
                              options={"adc_bits": 6}, calib=digits.x_train[:64])
    assert new.points[0].accs == old.points[0].accs
    assert new.options["adc_bits"] == 6 and new.repeats == 2 and new.seed == 5


def test_the_protocol_changes_the_estimate(trained_cnn, digits):
    x, y = digits.x_test[:100], digits.y_test[:100]
    calib = digits.x_train[:64]
    a = analog.evaluate(trained_cnn, x, y, "pcm_static",
                        analog.ScoringProtocol(times=("1d",), repeats=2, seed=5), calib=calib)
    b = analog.evaluate(trained_cnn, x, y, "pcm_static",
                        analog.ScoringProtocol(times=("1d",), repeats=3, seed=6), calib=calib)
    assert b.repeats == 3 and a.points[0].accs != b.points[0].accs[:2]


def test_a_protocol_field_misspelt_as_a_keyword_is_a_type_error(trained_cnn, digits):
    with pytest.raises(TypeError, match="repeats"):
        analog.evaluate(trained_cnn, digits.x_test[:10], digits.y_test[:10], "pcm", repeat=2)
