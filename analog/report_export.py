"""Programmed and drifted conductances of one programming, per layer, to npz + a JSON manifest.

Exported from the fast emulation of aihwkit's tiles (``analog.fast``), seeded exactly as repeat
``repeat`` of ``analog.evaluate`` (streams ``program``, repeat, time index), so the arrays are
the weights that repeat scored. Per tile of each layer (``<layer>/tile<k>/...``):

* ``target``: the mapped weights in conductance units (weight / column scale; ``|w| <= 1``
  means ``g <= g_max``); a differential pair holds ``g+ - g-``;
* ``programmed``: after programming noise; ``drift@<t>``: after drift to time ``t``;
* ``effective@<t>``: the weights the model computes with at ``t`` (drifted, times the drift
  compensation and column scale), in the layer's own units.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from analog.fast import FastAnalogModel, fast_unsupported
from analog.hw import get_hw
from analog.times import format_time, parse_times
from hwnas.common.errors import ConfigError
from hwnas.common.seeds import stream_seed


def _fast_model(model: nn.Module, hw_name: str, calib: Tensor | None,
                digital: list[str]) -> FastAnalogModel:
    hw = get_hw(hw_name)
    if hw.kind != "analog":
        raise ConfigError.one("--hw", "conductances exist only on analog hardware", hw_name,
                              "pick one from `hwnas analog list`")
    rpu = hw.rpu_config()
    if reasons := fast_unsupported(model, rpu):
        raise ConfigError.one("conductance export", "needs the fast emulation of the tiles",
                              f"{hw_name}: {', '.join(reasons)}", "export from another device")
    return FastAnalogModel(hw.calibrated(model, rpu, calib, digital), rpu, calib=calib,
                           digital=digital).eval()


def _np(t: Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()


@torch.no_grad()
def export_conductances(model: nn.Module, hw: str, times: list[str], out: str | Path, *,
                        seed: int = 0, repeat: int = 0, calib: Tensor | None = None,
                        digital: list[str] | None = None) -> dict[str, Any]:
    """Write ``conductances_<hw>.npz`` and ``conductances_<hw>.json`` into ``out``; returns the
    manifest."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    fast = _fast_model(model, hw, calib, list(digital or []))
    seconds = parse_times(times)
    arrays: dict[str, np.ndarray] = {}
    for i, t in enumerate(seconds):
        value = stream_seed(seed, "program", repeat, i)
        torch.manual_seed(value)
        fast.manual_seed(value)
        if i == 0:
            fast.program_analog_weights()
        fast.drift_analog_weights(t)
        _collect(fast, arrays, format_time(t), first=i == 0)
    name = f"conductances_{hw}"
    np.savez_compressed(out / f"{name}.npz", **arrays)
    rpu = fast.rpu
    manifest = {"device": hw, "periphery": get_hw(hw).describe(), "seed": seed,
                "repeat": repeat, "times": [format_time(t) for t in seconds],
                "times_s": seconds, "g_max_uS": getattr(rpu.noise_model, "g_max", None),
                "noise_model": type(rpu.noise_model).__name__, "digital": list(digital or []),
                "arrays": {k: list(v.shape) for k, v in arrays.items()},
                "units": __doc__.split("\n\n", 1)[1]}
    (out / f"{name}.json").write_text(json.dumps(manifest, indent=1, default=str))
    return manifest


def _collect(fast: FastAnalogModel, arrays: dict[str, np.ndarray], label: str, *,
             first: bool) -> None:
    names = {id(m): n.removeprefix("net.") for n, m in fast.named_modules()}
    for layer in fast.layers():
        for k, tile in enumerate(layer.all_tiles()):
            key = f"{names[id(layer)]}/tile{k}"
            if first:
                arrays[f"{key}/target"] = _np(tile.reference)
                arrays[f"{key}/programmed"] = _np(tile.programmed)
            arrays[f"{key}/drift@{label}"] = _np(tile.weight)
            arrays[f"{key}/effective@{label}"] = _np(tile.effective_weight())
