"""Drift-time parsing: every accepted form, round trips, and bad input naming the accepted forms."""

from __future__ import annotations

import pytest

from analog.times import UNITS, format_time, parse_time, parse_times
from hwnas.common.errors import ConfigError


@pytest.mark.parametrize(("text", "seconds"), [
    ("0", 0.0), (0, 0.0), ("1s", 1.0), ("3600", 3600.0), (86400.0, 86400.0), ("1h", 3600.0),
    ("1d", 86400.0), ("30d", 30 * 86400.0), ("1y", 365 * 86400.0), ("2 weeks", 14 * 86400.0),
    ("1.5h", 5400.0), ("1e3", 1000.0), ("10min", 600.0), (" 1 day ", 86400.0)])
def test_parse_time_forms(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("unit", sorted(UNITS))
def test_every_unit_parses(unit):
    assert parse_time(f"2{unit}") == 2 * UNITS[unit]


@pytest.mark.parametrize("label", ["0s", "1s", "1h", "1d", "30d", "1y", "90s"])
def test_format_parse_round_trip(label):
    assert format_time(parse_time(label)) == label


@pytest.mark.parametrize("bad", ["1 fortnight", "day", "-1d", "1d2h", "", "nan", "1e999"])
def test_bad_time_names_accepted_forms(bad):
    with pytest.raises(ConfigError) as err:
        parse_time(bad)
    msg = str(err.value)
    assert repr(bad) in msg and "Fix:" in msg
    if bad == "1 fortnight":
        assert "1s, 1h, 1d, 30d, 1y" in msg


def test_parse_times_list_and_string():
    assert parse_times("1s,1h, 1d") == [1.0, 3600.0, 86400.0]
    assert parse_times(["1y", 0]) == [31536000.0, 0.0]
    with pytest.raises(ConfigError, match="at least one time"):
        parse_times("")
