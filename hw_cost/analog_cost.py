"""Analog in-memory computing cost model: crossbar tiles, MVMs, analog share, energy and latency.

Dense layers map onto crossbar tiles: a ``Linear`` as its (out, in) weight matrix, a dense
``Conv2d`` (groups == 1) as (out, in*k*k) applied once per output position. Grouped and depthwise
convolutions, attention matmuls, norms and activations stay digital (aihwkit maps only dense
layers). Energy and latency are estimates from per-operation figures, never measurements.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import torch
from torch import nn

from hw_cost.static import count_flops
from hwnas.common.errors import ConfigError


@dataclass(frozen=True)
class AnalogFigures:
    """Per-operation figures of the analog accelerator the estimate assumes.

    Published (Le Gallo et al., "A 64-core mixed-signal in-memory compute chip based on
    phase-change memory for deep neural network inference", Nature Electronics 6, 680-693,
    2023; IBM HERMES project chip, 14 nm): 64 cores of 256x256 PCM crossbars; 8-bit input/output
    MVMs at up to 63.1 TOPS and 9.76 TOPS/W in one-phase read mode (16.1 TOPS and 2.48 TOPS/W in
    the high-precision four-phase mode).

    Derived from those peaks, assuming fully used tiles as the peaks do: one 256x256 MVM is
    131,072 ops, so ``mvm_ns`` = 131072 / (63.1e12 / 64) s = 132.9 ns per core and ``mvm_nj`` =
    131072 / 9.76e12 J = 13.4 nJ. A partly filled tile costs a full MVM (ADCs dominate).

    Assumptions, not from the paper: digital MACs cost 0.23 pJ (8-bit multiply 0.2 pJ + add
    0.03 pJ, Horowitz, ISSCC 2014, 45 nm, data movement excluded) and run at 1e12 MAC/s; layers
    run one after another (no pipelining); weights stay programmed, and a layer needing more tiles
    than there are cores is time-multiplexed over them.
    """

    tile_rows: int = 256
    tile_cols: int = 256
    cores: int = 64
    peak_tops: float = 63.1
    tops_per_w: float = 9.76
    digital_pj_per_mac: float = 0.23
    digital_macs_per_s: float = 1e12

    @property
    def ops_per_mvm(self) -> int:
        return 2 * self.tile_rows * self.tile_cols

    @property
    def mvm_ns(self) -> float:
        return self.ops_per_mvm / (self.peak_tops * 1e12 / self.cores) * 1e9

    @property
    def mvm_nj(self) -> float:
        return self.ops_per_mvm / (self.tops_per_w * 1e12) * 1e9


def is_analog_mappable(module: nn.Module) -> bool:
    """Dense convolutions and linear layers map onto crossbars; grouped convolutions do not."""
    if isinstance(module, nn.Linear):
        return True
    return isinstance(module, nn.Conv1d | nn.Conv2d | nn.Conv3d) and module.groups == 1


def _matrix_shape(module: nn.Module) -> tuple[int, int]:
    """(rows, cols) of the crossbar matrix: inputs per MVM x outputs per MVM."""
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    return module.in_channels * math.prod(module.kernel_size), module.out_channels


def _mvm_counts(model: nn.Module, x: torch.Tensor) -> dict[str, int]:
    """Input vectors each mappable layer sees in one forward (output positions or tokens)."""
    counts: dict[str, int] = {}

    def hook(name: str):
        def record(module: nn.Module, args: tuple, out: torch.Tensor) -> None:
            outputs = module.out_features if isinstance(module, nn.Linear) else module.out_channels
            counts[name] = counts.get(name, 0) + out.numel() // outputs

        return record

    handles = [m.register_forward_hook(hook(n)) for n, m in model.named_modules()
               if is_analog_mappable(m)]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return counts


def _layer_costs(model: nn.Module, counts: dict[str, int], fig: AnalogFigures) -> list[dict]:
    modules = dict(model.named_modules())
    layers = []
    for name, mvms in counts.items():
        rows, cols = _matrix_shape(modules[name])
        tiles = math.ceil(rows / fig.tile_rows) * math.ceil(cols / fig.tile_cols)
        layers.append({"name": name, "rows": rows, "cols": cols, "tiles": tiles, "mvms": mvms,
                       "tile_mvms": mvms * tiles, "macs": mvms * rows * cols,
                       "weights": modules[name].weight.numel(),
                       "latency_ns": mvms * fig.mvm_ns * math.ceil(tiles / fig.cores)})
    return layers


def analog_cost(model: nn.Module, input_shape: Sequence[int], *, tile_size: int = 256,
                figures: AnalogFigures | None = None, per_layer: bool = False,
                total_macs: int | None = None) -> dict:
    """Estimated analog mapping cost of one inference (batch 1) of ``model``.

    ``total_macs`` (all MACs of one image, as ``static_costs`` counts them) saves a second FLOP
    count when the caller has it already.
    """
    if not isinstance(tile_size, int) or tile_size <= 0:
        raise ConfigError.one("tile_size", "must be a positive integer (crossbar rows = cols)",
                              tile_size, "pass e.g. --tile-size 256")
    fig = replace(figures or AnalogFigures(), tile_rows=tile_size, tile_cols=tile_size)
    model = copy.deepcopy(model).eval().float()
    x = torch.randn(1, *input_shape)
    layers = _layer_costs(model, _mvm_counts(model, x), fig)
    if total_macs is None:
        total_macs = count_flops(model, x)[0] // 2
    analog_macs = sum(layer["macs"] for layer in layers)
    digital_macs = max(total_macs - analog_macs, 0)
    total_weights = sum(p.numel() for p in model.parameters())
    tiles = sum(layer["tiles"] for layer in layers)
    analog_nj = sum(layer["tile_mvms"] for layer in layers) * fig.mvm_nj
    digital_nj = digital_macs * fig.digital_pj_per_mac / 1e3
    analog_us = sum(layer["latency_ns"] for layer in layers) / 1e3
    digital_us = digital_macs / fig.digital_macs_per_s * 1e6
    out = {
        "estimate": True,
        "tile_size": tile_size,
        "tiles": tiles,
        "fits_on_chip": tiles <= fig.cores,
        "analog_layers": len(layers),
        "digital_weight_layers": sum(
            1 for m in model.modules()
            if isinstance(m, nn.Conv1d | nn.Conv2d | nn.Conv3d) and not is_analog_mappable(m)),
        "mvms": sum(layer["mvms"] for layer in layers),
        "tile_mvms": sum(layer["tile_mvms"] for layer in layers),
        "analog_weights": sum(layer["weights"] for layer in layers),
        "total_weights": total_weights,
        "analog_weight_fraction": sum(layer["weights"] for layer in layers) / max(total_weights, 1),
        "analog_macs": analog_macs,
        "digital_macs": digital_macs,
        "analog_mac_fraction": analog_macs / max(total_macs, 1),
        "energy_uj": (analog_nj + digital_nj) / 1e3,
        "analog_energy_uj": analog_nj / 1e3,
        "digital_energy_uj": digital_nj / 1e3,
        "latency_us": analog_us + digital_us,
        "analog_latency_us": analog_us,
        "digital_latency_us": digital_us,
        "figures": {**asdict(fig), "mvm_ns": fig.mvm_ns, "mvm_nj": fig.mvm_nj},
    }
    if per_layer:
        out["layers"] = layers
    return out
