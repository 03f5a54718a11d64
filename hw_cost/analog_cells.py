"""How many crossbar unit cells and devices one weight takes, from aihwkit's conductance converter.

The energy model's anchor (HERMES, ``hw_cost.analog_cost.AnalogFigures``) measures cores of
256x256 unit cells, one weight per cell as a differential conductance; a cell's devices of one
sign add their currents with equal weight (aihwkit's ``HermesNoiseModel(num_devices=2)``: two
devices per conductance, "both devices in the unit cell"). aihwkit 1.2.0's converters
(``aihwkit/inference/converter/conductance.py``) map a weight to devices as follows:

* ``SinglePairConductanceConverter``: one pair (g+, g-), 2 devices;
* ``NPairConductanceConverter`` / ``DualPairConductanceConverter``: ``len(f_lst)`` pairs, each
  weighted by its factor F (the weight is sum F_i (g+_i - g-_i)), 2 devices per pair;
* ``CustomPairConductanceConverter``: ``len(f_lst)`` pairs (``g_lst`` holds 2 rows per pair);
* ``SingleDeviceConductanceConverter``: 1 device (no pair).

``CELL_RULE`` turns that into cells: pairs of different significance cannot share one cell (its
devices add with equal weight), so a weight of n pairs takes n cells. A converter not listed here
is an error rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hwnas.common.errors import ConfigError

PAIR_READOUTS = ("shared", "separate")
CELL_RULE = (
    "one unit cell per conductance pair: a weight whose converter has n pairs (aihwkit's "
    "f_lst) takes n cells; shared readout (default, what aihwkit simulates: one output "
    "noise and one ADC on sum F_i (g+_i - g-_i)) stacks the n cells in n rows of one "
    "column, so the column current adds the pairs and each core slice converts each "
    "column once (a weight's n*rows device rows split over cores like any tall tile); "
    "separate readout puts each pair in its own column, converted on its own, F applied "
    "digitally (n conversions per output); either way the array energy grows with the "
    "n cells in use; the F weighting itself (longer input pulses or current mirrors) is "
    "not charged, nor is latency; a one-device weight (no pair) is charged one cell")
_PAIRED = ("NPairConductanceConverter", "DualPairConductanceConverter",
           "CustomPairConductanceConverter")


@dataclass(frozen=True)
class Cells:
    """One weight's footprint: unit cells (conductance pairs), devices, and the converter."""

    cells: int
    devices: int
    converter: str


def converter_cells(converter: Any, devices_per_conductance: int = 1) -> Cells:
    """Cells and devices per weight of an aihwkit conductance converter instance.

    ``devices_per_conductance``: devices that share one conductance with equal weight inside
    one cell (``HermesNoiseModel.num_devices``); they add devices, not cells.
    """
    name = type(converter).__name__
    factors = getattr(converter, "f_lst", None)
    if name == "SinglePairConductanceConverter":
        pairs = 1
    elif name in _PAIRED and isinstance(factors, list) and factors:
        pairs = len(factors)
    elif name == "SingleDeviceConductanceConverter":
        return Cells(1, devices_per_conductance, _label(converter))
    else:
        raise ConfigError.one(
            "converter", "the energy model knows the devices per weight of aihwkit's "
            "SinglePair, DualPair, NPair, CustomPair and SingleDevice conductance converters "
            "only", name, "use one of those converters, or add this one's cells per weight to "
            "hw_cost.analog_cells.converter_cells")
    return Cells(pairs, 2 * pairs * devices_per_conductance, _label(converter))


def _label(converter: Any) -> str:
    factors = getattr(converter, "f_lst", None)
    return type(converter).__name__ + (f"(f={list(factors)})" if factors else "")


def cells_of(noise_model: Any) -> Cells:
    """``converter_cells`` of an aihwkit noise model's ``g_converter``."""
    per = getattr(noise_model, "num_devices", 1)
    return converter_cells(noise_model.g_converter, per if isinstance(per, int) else 1)


def device_shape(rows: int, cols: int, cells: int, readout: str) -> tuple[int, int]:
    """The cells a ``rows`` x ``cols`` weight tile occupies under ``CELL_RULE``."""
    return (rows * cells, cols) if readout == "shared" else (rows, cols * cells)
