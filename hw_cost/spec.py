"""How a latency is taken, and which chip an analog estimate describes: one object each.

``MeasureSpec`` holds every setting of one timing (device, batch, dtype, threads, deployed form,
clock, stop rule, layout, compilation, TF32, cache scrubbing). A study builds it once
(``nas.scoring.glue.measure_spec``) and passes it whole to ``cost_of``, ``measure_model`` and
``measure_latency``; a new timing option is one field here and the line that uses it.
``ChipSpec`` names the analog hardware model, its option overrides and tile size that the
analog energy estimate describes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwnas.common.errors import ConfigError


@dataclass(frozen=True)
class StopRule:
    """When to stop timing: once the median is known to within +-``rel_tol`` at 95% confidence
    (distribution-free interval from order statistics), after at least ``min_repeats`` calls and
    ``min_seconds`` of timing, checked every ``window`` calls; never past ``max_seconds`` or
    ``max_repeats``.

    ``min_seconds`` is for shared machines: a cloud VM's speed wanders by a few percent over
    tens of seconds, slower than any one short run can see (its spread looks tight), so
    short figures taken a minute apart differ by that much. Timing longer averages the wander
    (bench/results/hw_cost_latency.md); the default 0 keeps a search's measurement short.
    """

    window: int = 10
    rel_tol: float = 0.01
    min_repeats: int = 30
    max_repeats: int = 20_000
    max_seconds: float = 10.0
    warmup_seconds: float = 0.3
    warmup_calls: int = 5
    min_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not 0 <= self.min_seconds <= self.max_seconds:
            raise ConfigError.one("min_seconds", "must lie in [0, max_seconds]",
                                  f"min_seconds={self.min_seconds}, max_seconds={self.max_seconds}",
                                  "raise --max-seconds or lower --min-seconds")


@dataclass(frozen=True)
class MeasureSpec:
    """One timing's settings. ``rule`` replaces the stop rule built from ``max_seconds`` (its
    time cap) and ``min_seconds`` (its shortest timing, for a figure that averages a shared
    host's drift). ``clock="thread"`` times CPU time of the one timing thread
    (``hw_cost.options.CLOCKS``); ``form`` is the deployed form timed (``hw_cost.forms``);
    ``tf32`` is CUDA's TF32 setting (off: fp32 is fp32); ``scrub_bytes`` > 0 evicts the caches
    before every timed call."""

    device: str = "cpu"
    batch_size: int = 1
    dtype: str = "fp32"
    threads: int | None = None
    form: str = "eager"
    clock: str = "wall"
    max_seconds: float = 10.0
    min_seconds: float = 0.0
    warmup_seconds: float = 0.3  # untimed calls first (a GPU ramps its clocks, caches fill)
    rule: StopRule | None = None
    channels_last: bool = False
    compile: bool | str = False
    tf32: bool = False
    scrub_bytes: int = 0

    def stop_rule(self) -> StopRule:
        return self.rule or StopRule(max_seconds=self.max_seconds, min_seconds=self.min_seconds,
                                     warmup_seconds=self.warmup_seconds)

    @property
    def shortest(self) -> float:
        """The shortest timing this spec asks for (a cached figure must have run as long)."""
        return self.stop_rule().min_seconds

    def target(self) -> dict[str, Any]:
        """The fields ``hw_cost.options.validate`` checks."""
        return {"device": self.device, "batch_size": self.batch_size, "dtype": self.dtype,
                "threads": self.threads, "clock": self.clock, "form": self.form}


@dataclass(frozen=True)
class ChipSpec:
    """The analog chip an estimate describes: hardware model ``hw`` (tile size, ADC bits, cells
    per weight) with ``options`` applied (``analog.AnalogOptions``), ``tile_size`` overriding."""

    hw: str | None = None
    options: dict[str, object] | None = None
    tile_size: int | None = None

    def estimate_kw(self) -> dict[str, Any]:
        """``hw_cost.analog_cost``'s keywords for this chip."""
        return {"tile_size": self.tile_size, "hw": self.hw, "hw_options": self.options}
