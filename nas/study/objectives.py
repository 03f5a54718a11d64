"""The metrics a study can optimize or budget, each with its direction, registered by name.

A metric's *key* names its value everywhere: trial user attributes, tabular columns, the trials
table, model cards. Accuracy depends on the hardware model and the drift time, so its key carries
both: ``acc_digital``, ``acc_fq8``, ``acc_pcm@1d``. Cost metrics (``stage="cost"``) are known
after a measurement, before any training, which is what lets budgets reject a candidate early.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from analog.times import format_time, parse_time
from hwnas.common.registry import Registry

Direction = Literal["minimize", "maximize"]


@dataclass(frozen=True)
class Metric:
    """One measurable quantity of a candidate."""

    name: str
    column: str
    direction: Direction
    stage: Literal["cost", "train"]
    unit: str
    help: str
    uses_hw: bool = False
    worst: float | None = None  # natural reference value for the hypervolume, when one exists

    def key(self, hw: str | None = None, time: str | None = None) -> str:
        """The one spelling of the metric's column under hardware ``hw`` at drift time ``time``
        (a ``time_label``): ``acc_digital``, ``acc_fq8``, ``acc_pcm@1d``; the scorer writes
        and every reader reads it through here."""
        if not self.uses_hw:
            return self.column
        base = f"{self.column}_{hw or 'digital'}"
        return f"{base}@{time}" if time else base


METRICS: Registry[Metric] = Registry("metric")


def register_metric(metric: Metric) -> Metric:
    return METRICS.register(metric.name)(metric)


for _m in (
    Metric("accuracy", "acc", "maximize", "train", "fraction",
           "top-1 accuracy on the validation split under a hardware model at a drift time "
           "(mean over repeats)", uses_hw=True, worst=0.0),
    Metric("latency", "latency_ms", "minimize", "cost", "ms",
           "measured median latency on the study's device, batch and dtype"),
    Metric("predicted_latency", "pred_latency_ms", "minimize", "cost", "ms",
           "latency predicted by hw_cost's predictor for the device (no measurement)"),
    Metric("macs", "macs", "minimize", "cost", "MACs", "multiply-accumulates per image"),
    Metric("params", "params", "minimize", "cost", "count", "number of parameters"),
    Metric("model_bytes", "model_bytes", "minimize", "cost", "bytes", "size of the weights"),
    Metric("peak_memory", "peak_activation_bytes", "minimize", "cost", "bytes",
           "peak activation memory (measured on CUDA, estimated on CPU)"),
    Metric("energy", "analog_energy_uj", "minimize", "cost", "uJ",
           "analog in-memory energy per inference (estimate from the tile cost model)"),
    Metric("analog_latency", "analog_latency_us", "minimize", "cost", "us",
           "analog in-memory latency per inference (estimate from the tile cost model)"),
    Metric("analog_coverage", "analog_mac_fraction", "maximize", "cost", "fraction",
           "share of MACs that run on analog tiles (the rest stays digital)", worst=0.0),
    # A chip has a fixed number of crossbar cores (HERMES: 64 of 256x256): a budget on the
    # tiles the analog layers occupy, at the sampled tile size and mapping, says "fits the chip".
    Metric("tiles", "analog_tiles", "minimize", "cost", "tiles",
           "crossbar tiles (chip cores) the analog layers occupy, at the chip's tile size and "
           "with the digital layers left out"),
):
    register_metric(_m)


def time_label(time: str | float | int | None) -> str | None:
    """The drift time as written in keys, canonical so that ``24h`` and ``1d`` share a key."""
    if time is None:
        return None
    return format_time(parse_time(time))


class _AtHardware:
    """A metric read under one hardware model at one drift time: its column name is ``key``."""

    metric: Metric
    hw: str | None
    time: str | None

    @property
    def key(self) -> str:
        return self.metric.key(self.hw, self.time)


@dataclass(frozen=True)
class Objective(_AtHardware):
    """A metric to optimize, resolved against the registry."""

    metric: Metric
    direction: Direction
    hw: str | None = None
    time: str | None = None

    @property
    def label(self) -> str:
        if not self.metric.uses_hw:
            return f"{self.metric.name} [{self.metric.unit}]"
        at = f" @ {self.time}" if self.time else ""
        return f"{self.metric.name} ({self.hw or 'digital'}{at})"


@dataclass(frozen=True)
class Budget(_AtHardware):
    """A constraint ``min <= value <= max``; Optuna's convention: violation <= 0 is feasible."""

    metric: Metric
    max: float | None = None
    min: float | None = None
    hw: str | None = None
    time: str | None = None

    @property
    def early(self) -> bool:
        """Checked right after the cost measurement, before any training."""
        return self.metric.stage == "cost"

    def violation(self, value: float) -> float:
        over = value - self.max if self.max is not None else float("-inf")
        under = self.min - value if self.min is not None else float("-inf")
        return float(max(over, under))

    def describe(self) -> str:
        lo = f"{self.min:g} <= " if self.min is not None else ""
        hi = f" <= {self.max:g}" if self.max is not None else ""
        return f"{lo}{self.key}{hi}"
