"""Drift times as people write them: ``0``, ``1s``, ``1h``, ``1d``, ``30d``, ``1y``."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from hwnas.common.errors import ConfigError

# Seconds per unit. A year is 365 days, as in the analog-AI literature (t = 1 y = 3.15e7 s).
UNITS: dict[str, float] = {
    "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
    "y": 31536000.0, "year": 31536000.0, "years": 31536000.0,
}
_FORM = re.compile(r"^\s*(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)\s*([a-zA-Z]*)\s*$")
_ACCEPTED = "a number of seconds (0, 3600, 1e5) or a number with a unit s, m, h, d, w, y " \
            "(1s, 1h, 1d, 30d, 1y; also 'min', 'day(s)', 'week(s)', 'year(s)')"


def parse_time(value: str | float | int) -> float:
    """Seconds after programming for ``value`` (``"1d"`` -> 86400.0, ``3600`` -> 3600.0)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _FORM.match(str(value))
        unit = match.group(2).lower() if match else ""
        if not match or (unit and unit not in UNITS):
            raise ConfigError.one("drift time", f"must be {_ACCEPTED}", value,
                                  "write e.g. 1s, 1h, 1d, 30d or 1y")
        seconds = float(match.group(1)) * UNITS.get(unit, 1.0)
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError.one("drift time", "must be finite and >= 0 seconds", value,
                              "use 0 for 'right after programming' or a positive time")
    return seconds


def parse_times(values: str | Iterable[str | float | int]) -> list[float]:
    """A comma-separated string or a list of times -> seconds, in the given order."""
    items = values.split(",") if isinstance(values, str) else list(values)
    if not items or all(str(v).strip() == "" for v in items):
        raise ConfigError.one("drift times", "must list at least one time", values,
                              "give e.g. --times 1s,1h,1d,30d,1y")
    return [parse_time(v) for v in items if str(v).strip() != ""]


def format_time(seconds: float) -> str:
    """The shortest exact label for ``seconds`` among s, h, d, y (``86400`` -> ``"1d"``)."""
    if seconds == 0:
        return "0s"
    for unit in ("y", "d", "h", "s"):
        count = seconds / UNITS[unit]
        if count >= 1 and abs(count - round(count)) < 1e-9:
            return f"{round(count)}{unit}"
    return f"{seconds:g}s"
