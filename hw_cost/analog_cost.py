"""Analog in-memory computing cost model: crossbar tiles, MVMs, analog share, energy and latency.

Dense layers map onto crossbar tiles: a ``Linear`` as its (out, in) weight matrix, a dense
``Conv2d`` (groups == 1) as (out, in*k*k) applied once per output position, split into tiles
as aihwkit splits them for the accuracy model (same tile size, same balanced split). What stays
digital is decided by the same test as aihwkit's conversion (``analog.coverage.is_mappable``:
exact ``nn.Linear``/``nn.ConvNd`` class, one group; timm's ``Conv2dSame`` stays digital), plus
layers the caller keeps digital. Energy and latency are estimates from per-operation figures,
never measurements; see ``AnalogFigures`` for every source and assumption.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch
from torch import nn

import analog
from analog.coverage import digital_layers, is_mappable
from analog.fast import split_sizes
from hw_cost.analog_cells import CELL_RULE, PAIR_READOUTS, cells_of, device_shape
from hw_cost.static import count_flops
from hwnas.common.errors import ConfigError, Problem

TILE_SIZE = 512
"""Crossbar rows = cols when no hardware model is named: aihwkit's default mapping, the one the
``pcm`` accuracy model uses (HERMES' 256x256 cores are ``AnalogFigures.core_rows``)."""


ADC_SHARE_RANGE = (0.3, 0.7)
"""Low and high ``adc_share`` of the sensitivity range: the published chip figures do not split
the MVM energy between ADCs and array, so every estimate also gives the energy at these."""
ADC_SCALINGS = ("walden", "linear")
"""How an ADC conversion's energy grows with its bits: ``walden`` (2**(bits - 8), a constant
Walden figure of merit; Murmann's ADC survey) or ``linear`` (bits / 8, as a SAR ADC's
bit-cycles). Both are assumptions; the sensitivity range spans them."""
OVERFLOW_RULE = (
    "weights stay programmed: a model needing more cores than one chip has is priced as if "
    "spread over chips_needed chips of the same kind (energy per MVM unchanged); a layer "
    "needing more cores than one chip runs in ceil(cores / chip cores) rounds; no "
    "reprogramming energy or time is charged, so on a single reprogrammed chip the estimate "
    "is a lower bound")
DIGITAL_REFERENCE = (
    "lower bound: 8-bit MACs plus one SRAM read per weight and per input activation "
    "(Horowitz 45 nm figures x node_scale); no DRAM, control, data movement or idle power, "
    "so analog-vs-digital ratios from it are not findings")


@dataclass(frozen=True)
class AnalogFigures:
    """Per-operation figures of the analog accelerator and of the digital reference (estimates).

    Analog, published (Le Gallo et al., "A 64-core mixed-signal in-memory compute chip based on
    phase-change memory for deep neural network inference", Nature Electronics 6, 680-693,
    2023; IBM HERMES project chip, 14 nm): 64 cores of 256x256 PCM unit cells, 8-bit I/O MVMs.
    One-phase read 63.1 TOPS and 9.76 TOPS/W; four-phase read 16.1 TOPS and 2.48 TOPS/W.
    One- and four-phase are ways of applying signed inputs to signed weights (1 or 4 PWM
    cycles per MVM; Ext. Data Fig. 4), not devices per weight. One-phase is the chip's
    low-precision mode, four-phase its high-precision one; the accuracy models score the MVM at
    the hardware model's full input precision, so ``read_mode`` is ``four_phase`` unless asked
    for: the energy charged is that of the precision scored. A one-phase read is priced where a
    study searches the read mode, and there scored with fewer input bits
    (``nas.study.hardware.ONE_PHASE_DAC_LOSS``). Derived: one full 256x256 MVM is 131,072
    ops, so 13.4 nJ and 132.9 ns per core (one-phase), 52.9 nJ and 521 ns (four-phase).

    Partial cores, ADC bits (assumptions; the paper reports full-core MVMs at 8 bits only):
    ``adc_share`` of a full MVM's energy is the column ADCs, the rest scales with the cells in
    use (rows with zero input draw no array current: PWM inputs of zero length). A crossbar
    tile taller or wider than a core spans several cores, and every core slice converts its
    own columns: one ADC conversion per column per core slice (the partial sums are added
    digitally, not charged). A conversion costs ``adc_factor`` times the 8-bit one
    (``adc_scaling``). ``gate_unused_adcs``: unused columns' ADCs are switched off (the paper
    does not say whether the chip can; False charges every column of each core slice).

    Digital reference at the same node (a lower bound, ``DIGITAL_REFERENCE``): an 8-bit MAC
    costs 0.2 pJ (multiply) + 0.03 pJ (add) and a byte read from an 8 KB SRAM 1.25 pJ (10 pJ
    per 64-bit word), all at 45 nm (Horowitz, ISSCC 2014), times ``node_scale`` for 45 -> 14
    nm (0.3: an assumption of the order of the dynamic-energy scaling of Stillmaker & Baas,
    Integration 2017, not read from their tables). Traffic charged: the digital accelerator
    reads every weight once per inference; both read each layer's input activations once
    (the analog chip moves activations between cores digitally). Digital MACs run at
    ``digital_macs_per_s``. Layers run one after another (no pipelining); a model larger than
    the chip follows ``OVERFLOW_RULE``.

    Devices per weight (``hw_cost.analog_cells.CELL_RULE``): a weight takes ``cells_per_weight``
    unit cells, one per conductance pair of its converter (``figures_for`` reads it from the
    hardware model's aihwkit converter); ``pair_readout`` says whether a weight's cells share a
    column current (``shared``: n rows per weight) or are converted apart (``separate``: n
    columns per weight). Cores, conversions and array energy follow the cells in use.
    ``converter`` and ``devices_per_weight`` are recorded, not priced: devices sharing one
    conductance with equal weight (``HermesNoiseModel(num_devices=2)``) sit in one cell.
    """

    tile_rows: int = 256
    tile_cols: int = 256
    cores: int = 64
    core_rows: int = 256
    core_cols: int = 256
    read_mode: str = "four_phase"
    peak_tops: float = 63.1
    tops_per_w: float = 9.76
    peak_tops_four_phase: float = 16.1
    tops_per_w_four_phase: float = 2.48
    adc_bits: int = 8
    adc_share: float = 0.5
    adc_scaling: str = "walden"
    gate_unused_adcs: bool = True
    digital_pj_per_mac_45nm: float = 0.23
    sram_pj_per_byte_45nm: float = 1.25
    node_scale: float = 0.3
    digital_macs_per_s: float = 1e12
    cells_per_weight: int = 1
    pair_readout: str = "shared"
    converter: str = "SinglePairConductanceConverter"
    devices_per_weight: int = 2

    def __post_init__(self) -> None:
        problems = []
        if not isinstance(self.cells_per_weight, int) or isinstance(self.cells_per_weight, bool) \
                or self.cells_per_weight < 1:
            problems.append(Problem("cells_per_weight", "must be an integer >= 1 (one unit cell "
                                    "per conductance pair)", self.cells_per_weight,
                                    "use 1 for a single pair, n for n pairs"))
        if self.pair_readout not in PAIR_READOUTS:
            problems.append(Problem("pair_readout", f"must be one of {list(PAIR_READOUTS)}",
                                    self.pair_readout, "shared (one column current, as aihwkit "
                                    "simulates)"))
        if self.read_mode not in ("one_phase", "four_phase"):
            problems.append(Problem("read_mode", "must be one_phase or four_phase",
                                    self.read_mode, "four_phase (the precision the accuracy "
                                    "model scores) or one_phase (low precision)"))
        if self.adc_scaling not in ADC_SCALINGS:
            problems.append(Problem("adc_scaling", f"must be one of {list(ADC_SCALINGS)}",
                                    self.adc_scaling, "walden (the default)"))
        if not 0 <= self.adc_share <= 1:
            problems.append(Problem("adc_share", "must be in [0, 1]", self.adc_share,
                                    f"use e.g. {ADC_SHARE_RANGE}"))
        if problems:
            raise ConfigError(problems)

    @property
    def ops_per_mvm(self) -> int:
        return 2 * self.core_rows * self.core_cols

    @property
    def _peaks(self) -> tuple[float, float]:
        if self.read_mode == "four_phase":
            return self.peak_tops_four_phase, self.tops_per_w_four_phase
        return self.peak_tops, self.tops_per_w

    @property
    def mvm_ns(self) -> float:
        """One full core MVM, in ns."""
        return self.ops_per_mvm / (self._peaks[0] * 1e12 / self.cores) * 1e9

    @property
    def mvm_nj(self) -> float:
        """One full core MVM at 8 bits, in nJ."""
        return self.ops_per_mvm / (self._peaks[1] * 1e12) * 1e9

    @property
    def adc_factor(self) -> float:
        """Energy of one conversion at ``adc_bits`` relative to an 8-bit one."""
        if self.adc_scaling == "linear":
            return self.adc_bits / 8
        return 2.0 ** (self.adc_bits - 8)

    @property
    def digital_pj_per_mac(self) -> float:
        return self.digital_pj_per_mac_45nm * self.node_scale

    @property
    def sram_pj_per_byte(self) -> float:
        return self.sram_pj_per_byte_45nm * self.node_scale

    def core_slices(self, rows: int, cols: int) -> list[tuple[int, int]]:
        """The parts of a ``rows`` x ``cols`` tile that land on separate cores (full cores
        first)."""
        def cut(n: int, size: int) -> list[int]:
            return [min(size, n - i) for i in range(0, n, size)] or [0]

        return [(r, c) for r in cut(rows, self.core_rows) for c in cut(cols, self.core_cols)]

    def slice_mvm_nj(self, rows: int, cols: int) -> float:
        """Energy of one MVM on one core using ``rows`` x ``cols`` of its cells."""
        full = self.mvm_nj
        adc_cols = cols if self.gate_unused_adcs else self.core_cols
        adc = self.adc_share * full * adc_cols / self.core_cols * self.adc_factor
        array = (1 - self.adc_share) * full * rows * cols / (self.core_rows * self.core_cols)
        return adc + array

    def tile_mvm_nj(self, rows: int, cols: int) -> float:
        """Energy of one MVM on a tile using ``rows`` x ``cols`` cells: each core slice pays
        its own column conversions."""
        return sum(self.slice_mvm_nj(r, c) for r, c in self.core_slices(rows, cols))

    def cells_shape(self, rows: int, cols: int) -> tuple[int, int]:
        """The unit cells a ``rows`` x ``cols`` weight tile occupies (``CELL_RULE``)."""
        return device_shape(rows, cols, self.cells_per_weight, self.pair_readout)

    def assumptions(self) -> dict[str, Any]:
        """What the estimate rests on, stated with every estimate."""
        return {"adc_share": self.adc_share, "adc_bits": self.adc_bits,
                "adc_scaling": self.adc_scaling, "read_mode": self.read_mode,
                "tile": f"{self.tile_rows}x{self.tile_cols}",
                "core": f"{self.core_rows}x{self.core_cols}", "cores": self.cores,
                "gate_unused_adcs": self.gate_unused_adcs,
                "adc_conversions": "one per column per core slice",
                "converter": self.converter, "cells_per_weight": self.cells_per_weight,
                "devices_per_weight": self.devices_per_weight,
                "pair_readout": self.pair_readout, "cells": CELL_RULE,
                "overflow": OVERFLOW_RULE, "digital_reference": DIGITAL_REFERENCE}


def figures_for(hw: str, figures: AnalogFigures | None = None,
                options: dict[str, Any] | None = None) -> AnalogFigures:
    """``figures`` with tile size, ADC bits and cells per weight of analog hardware model ``hw``
    (with the study's ``options`` applied, e.g. ``{"tile_size": 256}`` or ``{"converter":
    "dual:1/3"}``), so the cost describes the hardware the accuracy model simulates. The read
    mode and the pair readout stay ``figures``': they are how the chip applies signed inputs
    and reads a weight's pairs, which no device model decides."""
    model = analog.get_hw(hw)
    desc = model.describe(**(options or {}))
    bits = round(math.log2(1 / desc["out_res"] + 2)) if 0 < desc["out_res"] < 1 else 8
    rows, cols = desc["tile_rows"], desc["tile_cols"]
    cells = cells_of(model.rpu_config(**(options or {})).noise_model)
    return replace(figures or AnalogFigures(), tile_rows=rows if rows > 0 else 0,
                   tile_cols=cols if cols > 0 else 0, adc_bits=bits,
                   cells_per_weight=cells.cells, devices_per_weight=cells.devices,
                   converter=cells.converter)


def is_analog_mappable(module: nn.Module) -> bool:
    """aihwkit's conversion test (exact class, one group): ``analog.coverage.is_mappable``."""
    return is_mappable(module)


def _matrix_shape(module: nn.Module) -> tuple[int, int]:
    """(rows, cols) of the crossbar matrix: inputs per MVM x outputs per MVM."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    return module.in_channels * math.prod(module.kernel_size), module.out_channels


def _forward_counts(model: nn.Module, x: torch.Tensor) -> tuple[dict[str, int], int]:
    """One forward pass: input vectors of each mappable layer (output positions or tokens),
    and the 8-bit input activations read by all compute layers."""
    counts: dict[str, int] = {}
    acts = 0

    def hook(name: str, mappable: bool):
        def record(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
            nonlocal acts
            acts += args[0].numel()
            if mappable:
                outputs = module.out_features if isinstance(module, nn.Linear) \
                    else module.out_channels
                counts[name] = counts.get(name, 0) + out.numel() // outputs

        return record

    handles = [m.register_forward_hook(hook(n, is_analog_mappable(m)))
               for n, m in model.named_modules()
               if isinstance(m, nn.Linear | nn.modules.conv._ConvNd)]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return counts, acts


def _layer_costs(model: nn.Module, counts: dict[str, int], fig: AnalogFigures) -> list[dict]:
    modules = dict(model.named_modules())
    layers = []
    for name, mvms in counts.items():
        rows, cols = _matrix_shape(modules[name])
        shapes = [(r, c) for r in split_sizes(rows, fig.tile_rows)
                  for c in split_sizes(cols, fig.tile_cols)]
        # a weight takes one cell per conductance pair; a tile larger than a core spans cores
        cells = [fig.cells_shape(r, c) for r, c in shapes]
        cores = sum(len(fig.core_slices(r, c)) for r, c in cells)
        layers.append({"name": name, "rows": rows, "cols": cols, "tiles": len(shapes),
                       "cores": cores, "cells": sum(r * c for r, c in cells), "mvms": mvms,
                       "tile_mvms": mvms * len(shapes),
                       "macs": mvms * rows * cols, "weights": modules[name].weight.numel(),
                       "energy_nj": mvms * sum(fig.tile_mvm_nj(r, c) for r, c in cells),
                       "in_bytes": mvms * rows,
                       "latency_ns": mvms * fig.mvm_ns * math.ceil(cores / fig.cores)})
    return layers


def _digital_nj(macs: int, weight_bytes: int, act_bytes: int, fig: AnalogFigures) -> float:
    return (macs * fig.digital_pj_per_mac + (weight_bytes + act_bytes) * fig.sram_pj_per_byte) \
        / 1e3


def _figures(tile_size: int | None, figures: AnalogFigures | None, hw: str | None,
             hw_options: dict[str, Any] | None) -> AnalogFigures:
    fig = figures or AnalogFigures(tile_rows=TILE_SIZE, tile_cols=TILE_SIZE)
    if hw is not None:
        fig = figures_for(hw, fig, hw_options)
    if tile_size is None:
        return fig
    if not isinstance(tile_size, int) or isinstance(tile_size, bool) or tile_size <= 0:
        raise ConfigError.one("tile_size", "must be a positive integer (crossbar rows = cols)",
                              tile_size, "pass e.g. --tile-size 256")
    return replace(fig, tile_rows=tile_size, tile_cols=tile_size)


def _energy_range(model: nn.Module, counts: dict[str, int], fig: AnalogFigures,
                  digital_nj: float) -> dict[str, Any]:
    """Energy (uJ) at the low and high ends of the unsourced assumptions: ``adc_share`` over
    ``ADC_SHARE_RANGE`` and both ``ADC_SCALINGS`` (the read mode is a choice, not an
    uncertainty, and stays as given)."""
    totals = [(sum(layer["energy_nj"] for layer in _layer_costs(
        model, counts, replace(fig, adc_share=share, adc_scaling=scaling))) + digital_nj) / 1e3
              for share in ADC_SHARE_RANGE for scaling in ADC_SCALINGS]
    return {"low": min(totals), "high": max(totals),
            "varied": {"adc_share": list(ADC_SHARE_RANGE), "adc_scaling": list(ADC_SCALINGS)}}


def flat_analog(estimate: dict) -> dict[str, float]:
    """The headline figures of an ``analog_cost`` estimate, as the flat metrics a trial stores."""
    return {"analog_tiles": estimate["tiles"], "analog_tile_size": estimate["tile_size"],
            "analog_weight_fraction": estimate["analog_weight_fraction"],
            "analog_mac_fraction": estimate["analog_mac_fraction"],
            "analog_energy_uj": estimate["energy_uj"], "analog_latency_us": estimate["latency_us"],
            # the same network on the digital reference, for a side-by-side estimate
            "digital_ref_energy_uj": estimate["digital_reference_energy_uj"]}


def analog_cost(model: nn.Module, input_shape: Sequence[int], *, tile_size: int | None = None,
                figures: AnalogFigures | None = None, per_layer: bool = False,
                total_macs: int | None = None, digital: Sequence[str] = (),
                hw: str | None = None, hw_options: dict[str, Any] | None = None) -> dict:
    """Estimated analog mapping cost of one inference (batch 1) of ``model``, next to the same
    model on the digital reference (``digital_reference_energy_uj``).

    ``hw``: take tile size, ADC bits and cells per weight from that analog hardware model, with
    ``hw_options`` applied (its ``AnalogOptions``), so cost and accuracy see one tile size.
    ``tile_size``: crossbar rows = cols; overrides ``hw``'s. Without either: ``TILE_SIZE``.
    ``digital``: shell patterns of layers kept digital (layer-wise mapping).
    ``total_macs`` (all MACs of one image, as ``static_costs`` counts them) saves a second FLOP
    count when the caller has it already.
    """
    fig = _figures(tile_size, figures, hw, hw_options)
    model = copy.deepcopy(model).eval().float()
    x = torch.randn(1, *input_shape)
    keep = set(digital_layers(model, digital)) if digital else set()
    all_counts, acts = _forward_counts(model, x)
    counts = {k: v for k, v in all_counts.items() if k not in keep}
    layers = _layer_costs(model, counts, fig)
    if total_macs is None:
        total_macs = count_flops(model, x)[0] // 2
    analog_macs = sum(layer["macs"] for layer in layers)
    digital_macs = max(total_macs - analog_macs, 0)
    total_weights = sum(p.numel() for p in model.parameters())
    analog_weights = sum(layer["weights"] for layer in layers)
    analog_nj = sum(layer["energy_nj"] for layer in layers)
    # the digital part of a mixed model reads its own weights; activations are read once
    digital_nj = _digital_nj(digital_macs, total_weights - analog_weights, acts, fig)
    reference_nj = _digital_nj(total_macs, total_weights, acts, fig)
    analog_us = sum(layer["latency_ns"] for layer in layers) / 1e3
    cores_used = sum(layer["cores"] for layer in layers)
    digital_us = digital_macs / fig.digital_macs_per_s * 1e6
    out = {
        "estimate": True,
        "tile_size": fig.tile_rows,
        "hw": hw, "hw_options": dict(hw_options or {}), "adc_bits": fig.adc_bits,
        "read_mode": fig.read_mode,
        "converter": fig.converter, "cells_per_weight": fig.cells_per_weight,
        "devices_per_weight": fig.devices_per_weight, "pair_readout": fig.pair_readout,
        "tiles": sum(layer["tiles"] for layer in layers),
        "cells_used": sum(layer["cells"] for layer in layers),
        "cores_used": cores_used,
        "fits_on_chip": cores_used <= fig.cores,
        "chips_needed": max(math.ceil(cores_used / fig.cores), 1),
        "analog_layers": len(layers),
        "digital_weight_layers": sum(
            1 for n, m in model.named_modules()
            if isinstance(m, nn.Linear | nn.Conv1d | nn.Conv2d | nn.Conv3d) and n not in counts),
        "mvms": sum(layer["mvms"] for layer in layers),
        "tile_mvms": sum(layer["tile_mvms"] for layer in layers),
        "analog_weights": analog_weights,
        "total_weights": total_weights,
        "analog_weight_fraction": analog_weights / max(total_weights, 1),
        "analog_macs": analog_macs,
        "digital_macs": digital_macs,
        "analog_mac_fraction": analog_macs / max(total_macs, 1),
        "energy_uj": (analog_nj + digital_nj) / 1e3,
        "energy_uj_range": _energy_range(model, counts, fig, digital_nj),
        "analog_energy_uj": analog_nj / 1e3,
        "digital_energy_uj": digital_nj / 1e3,
        "digital_reference_energy_uj": reference_nj / 1e3,
        "digital_reference_is": "a lower bound (assumptions.digital_reference)",
        "assumptions": fig.assumptions(),
        "latency_us": analog_us + digital_us,
        "analog_latency_us": analog_us,
        "digital_latency_us": digital_us,
        "figures": {**asdict(fig), "mvm_ns": fig.mvm_ns, "mvm_nj": fig.mvm_nj,
                    "digital_pj_per_mac": fig.digital_pj_per_mac,
                    "sram_pj_per_byte": fig.sram_pj_per_byte},
    }
    if per_layer:
        out["layers"] = layers
    return out
