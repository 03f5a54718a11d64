"""Input ranges of presets that clip each tile's inputs (``pre_post.input_range``).

A tile with an input range ``r`` clips its inputs to [-r, r] and divides them by ``r`` before
the DAC; the output is multiplied back by ``r``. Ranges come from one of two places:

* HWA training learns them (``analog.hwa_fit``). The copy-back stores them on the digital
  layers as a non-persistent buffer ``analog_input_range`` (one value per tile row, the input
  split of ``TileModuleArray``), so the digital weights stay loadable and the ranges travel
  with the model (deepcopy, ``.to``) into ``analog.apply`` and the fast path.
* Otherwise aihwkit's ``init_from_data`` rule sets them from calibration images: for the first
  ``init_from_data`` batches, ``r <- (r * k + init_std_alpha * std(x)) / (k + 1)``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

BUFFER = "analog_input_range"


def has_learned_input_ranges(model: nn.Module) -> bool:
    return any(getattr(m, BUFFER, None) is not None for m in model.modules())


def store_input_ranges(layer: nn.Module, ranges: Tensor) -> None:
    """Keep learned per-tile-row input ranges on a digital ``layer`` (outside its state dict)."""
    ranges = ranges.detach().abs().float().reshape(-1).clone()
    if BUFFER in layer._buffers:  # noqa: SLF001 - nn.Module's own registry of buffers
        setattr(layer, BUFFER, ranges)
    else:
        layer.register_buffer(BUFFER, ranges, persistent=False)


def learned_input_ranges(layer: nn.Module) -> Tensor | None:
    return getattr(layer, BUFFER, None)


@torch.no_grad()
def set_learned_input_ranges(digital: nn.Module, analog: nn.Module) -> bool:
    """Copy learned ranges from the digital layers onto the converted aihwkit tiles.

    aihwkit orders a layer's tiles input split first (``TileModuleArray.array[in][out]``), and
    every tile of one input split sees the same inputs, so they share that split's range.
    Returns whether any range was set.
    """
    converted = dict(analog.named_modules())
    found = False
    for name, layer in digital.named_modules():
        ranges = learned_input_ranges(layer)
        if ranges is None or name not in converted:
            continue
        tiles = list(converted[name].analog_tiles())
        per_row = max(len(tiles) // len(ranges), 1)
        for k, tile in enumerate(tiles):
            tile.set_input_range(float(ranges[min(k // per_row, len(ranges) - 1)]))
        found = True
    return found


@torch.no_grad()
def calibrate_input_ranges(analog: nn.Module, calib: Tensor, batch_size: int = 128) -> None:
    """aihwkit's own input-range initialisation (``init_from_data``) from calibration images.

    An untrained range (3.0) is arbitrary, so a digitally trained model gets its ranges from
    data, as the first HWA-training batches would. Only the tiles run in train mode (aihwkit
    updates ranges only there); the rest of the model stays in eval mode, so batch norms keep
    their running statistics.
    """
    analog.eval()
    tiles = list(analog.analog_tiles())
    for tile in tiles:
        tile.train()
    try:
        for start in range(0, len(calib), batch_size):
            analog(calib[start:start + batch_size])
    finally:
        for tile in tiles:
            tile.eval()
