"""A bottom-up MVM energy from published component powers (ISAAC), beside the top-down estimate.

``hw_cost.analog_cost`` is top-down: it divides the HERMES chip's measured 9.76 TOPS/W (14 nm)
between ADCs and array. This module prices the same MVM from the parts up, ISAAC-style, so the
two can be held side by side and the gap explained (``compare``).

Source of every component figure: Shafiee et al., "ISAAC: A Convolutional Neural Network
Accelerator with In-Situ Analog Arithmetic in Crossbars", ISCA 2016, the table of ISAAC's tile
and IMA parameters (power and area per component, 32 nm, 1.2 GHz). One IMA holds 8 crossbars
of 128x128 memristor cells (2 bits per cell), 8 ADCs (8-bit, one per crossbar), 8 x 128 1-bit
DACs, 8 x 128 sample-and-holds, 4 shift-and-add units, a 2 KB input and a 256 B output
register; a tile holds 12 IMAs (289 mW of its 330 mW) and shares eDRAM (64 KB), bus and router.
A crossbar read takes 100 ns and feeds one input bit to every row; its ADC converts the 128
columns in that time. The figures are read from the paper as recalled, checked only by their
sums (the IMA parts add to 24.08 mW, 12 IMAs to 289 mW, ADCs to 58 % of the tile); the table
number and the ADC's rate (1.2 or 1.28 GS/s) are not checked against the text.

Rules, stated and not sourced: a component's energy per crossbar read is its power, divided by
the crossbars it serves, times the 100 ns read (all components at their table power); node
scaling 32 -> 14 nm multiplies every component by 14/32 (energy per operation proportional to
feature size; ADCs scale less than logic, so this flatters ISAAC).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from torch import nn

from hw_cost.analog_cost import ADC_SHARE_RANGE, AnalogFigures, analog_cost

ISAAC_SOURCE = ("Shafiee et al., ISAAC, ISCA 2016: table of tile/IMA parameters (power, area), "
                "32 nm")
ISAAC_NODE_NM = 32
HERMES_NODE_NM = 14
READ_NS = 100.0  # one crossbar read: one input bit on every row, 128 columns converted
XBAR = 128  # crossbar rows = columns
BITS_PER_CELL = 2
XBARS_PER_IMA = 8
IMAS_PER_TILE = 12

ISAAC_MW: dict[str, tuple[float, int, str]] = {
    # component: (power mW as published, crossbars it serves, what the table lists)
    "adc": (16.0, XBARS_PER_IMA, "8 ADCs per IMA, 8-bit, one per crossbar"),
    "dac": (4.0, XBARS_PER_IMA, "8 x 128 DACs per IMA, 1-bit"),
    "sample_hold": (0.01, XBARS_PER_IMA, "8 x 128 S+H per IMA"),
    "array": (2.4, XBARS_PER_IMA, "8 crossbars per IMA, 128x128, 2 bits/cell"),
    "shift_add": (0.2, XBARS_PER_IMA, "4 S+A units per IMA"),
    "registers": (1.24 + 0.23, XBARS_PER_IMA, "input 2 KB (1.24) + output 256 B (0.23) per IMA"),
    "tile_periphery": (330.0 - 289.0, XBARS_PER_IMA * IMAS_PER_TILE,
                       "tile 330 minus 12 IMAs 289: eDRAM 64 KB, bus, router share, sigmoid, "
                       "S+A, max-pool, 3 KB OR"),
}
"""The published component powers, in one place (``ISAAC_SOURCE``)."""
IMA_PARTS = ("adc", "dac", "sample_hold", "array", "shift_add", "registers")


def per_read_pj(part: str) -> float:
    """Energy of ``part`` for one 100 ns read of one crossbar, pJ (``ISAAC_MW``'s rule)."""
    mw, shared_by, _ = ISAAC_MW[part]
    return mw / shared_by * READ_NS  # mW x ns = pJ


def adc_pj_per_conversion() -> float:
    """ISAAC's 8-bit conversion: one ADC's power over its 128 conversions per read."""
    return per_read_pj("adc") / XBAR


@dataclass(frozen=True)
class BottomUp:
    """One MVM priced from ``ISAAC_MW``: energy per part (nJ), conversions, crossbar reads."""

    name: str
    parts_nj: dict[str, float]
    conversions: int
    reads: int

    @property
    def nj(self) -> float:
        return sum(self.parts_nj.values())


def isaac_mvm(rows: int, cols: int, in_bits: int = 8, w_bits: int = 8,
              periphery: bool = False) -> BottomUp:
    """ISAAC's own dataflow: inputs bit-serial (one read per input bit), each ``w_bits`` weight
    on ``w_bits / 2`` columns of 2-bit cells, every read converting all 128 columns of every
    crossbar in use (whole crossbars charged)."""
    xbars = math.ceil(rows / XBAR) * math.ceil(cols * math.ceil(w_bits / BITS_PER_CELL) / XBAR)
    reads = xbars * in_bits
    parts = IMA_PARTS + (("tile_periphery",) if periphery else ())
    return BottomUp("ISAAC dataflow" + (" + tile periphery" if periphery else ""),
                    {p: reads * per_read_pj(p) / 1e3 for p in parts}, reads * XBAR, reads)


def one_pass_mvm(rows: int, cols: int, in_bits: int = 8) -> BottomUp:
    """The top-down model's dataflow on ISAAC's components: one analog weight per cell, one
    8-bit conversion per output column; DAC, S+H and array charged as ``in_bits`` reads of
    ``rows`` x ``cols`` cells (an input applied for ``in_bits`` read slots: a rule, not a
    pulse-width measurement); no shift-and-add."""
    slots = in_bits * rows * cols / (XBAR * XBAR)  # crossbar-reads' worth of cells x slots
    parts = {"adc": cols * adc_pj_per_conversion() / 1e3}
    parts |= {p: slots * per_read_pj(p) / 1e3 for p in ("dac", "sample_hold", "array")}
    return BottomUp("one pass, ISAAC components", parts, cols, 0)


def top_down_nj(rows: int, cols: int, figures: AnalogFigures | None = None) -> float:
    """``analog_cost``'s analog energy for one MVM of a ``rows`` x ``cols`` Linear layer."""
    fig = figures or AnalogFigures()
    cost = analog_cost(nn.Linear(rows, cols, bias=False), (rows,), figures=fig)
    return cost["analog_energy_uj"] * 1e3


def compare(rows: int = 128, cols: int = 128) -> dict:
    """Top-down vs bottom-up for one ``rows`` x ``cols`` MVM at 8-bit inputs, weights, ADC."""
    fig = AnalogFigures(read_mode="one_phase")  # 256x256 tiles and cores, 8-bit ADC, single pair
    top = top_down_nj(rows, cols, fig)
    spread = [top_down_nj(rows, cols, replace(fig, adc_share=s)) for s in ADC_SHARE_RANGE]
    scale = HERMES_NODE_NM / ISAAC_NODE_NM
    ups = [isaac_mvm(rows, cols), isaac_mvm(rows, cols, periphery=True),
           one_pass_mvm(rows, cols)]
    return {
        "config": f"{rows}x{cols} MVM, 8-bit inputs, weights and ADC, batch 1",
        "ops": 2 * rows * cols,
        "top_down": {"nj": top, "nj_range": (min(spread), max(spread)),
                     "node_nm": HERMES_NODE_NM, "conversions": cols,
                     "pj_per_conversion": fig.adc_share * fig.mvm_nj * 1e3 / fig.core_cols},
        "bottom_up": [{"name": b.name, "nj": b.nj, "parts_nj": b.parts_nj,
                       "conversions": b.conversions, "reads": b.reads,
                       "node_nm": ISAAC_NODE_NM, "nj_at_14nm": b.nj * scale,
                       "ratio": top / b.nj, "ratio_at_14nm": top / (b.nj * scale)}
                      for b in ups],
        "adc_pj_per_conversion": adc_pj_per_conversion(),
        "node_scale": scale, "source": ISAAC_SOURCE,
    }
