"""``pcm_static``: a HERMES-like periphery with static input ranges calibrated after training.

The IBM HERMES chip (Le Gallo et al., Nat. Electron. 2023) and aihwkit's
``StandardHWATrainingPreset`` apply each MVM once, with a fixed input range per tile, no
per-vector noise management and no bound management; ``pcm`` instead rescales every input
vector and re-runs saturated MVMs. ``pcm_static`` is that preset (8-bit DAC and ADC, constant
noise management, no bound management, output noise 0.04, PCM read noise in every MVM, IR drop,
``PCMLikeNoiseModel`` g_max 25 uS, global drift compensation, column-wise omega 1) on HERMES'
256x256 cores. A model trained digitally gets its input ranges from aihwkit's post-training
calibration (``aihwkit.inference.calibration.calibrate_input_ranges``, ``CACHE_QUANTILE`` at
``QUANTILE`` on up to ``MAX_SAMPLES`` cached input vectors per tile, with a perfect periphery);
ranges learned by HWA training are kept. The calibration runs in torch on the digital layers
(``analog.quantile_calibration``): the same cached vectors and ranges as aihwkit's, at about the
cost of one digital pass instead of one through aihwkit's tiles. The ranges are stored on the
digital layers (``analog.input_ranges``), so aihwkit's tiles and the fast path clip at the same
values.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from analog.aimc import AnalogHW, columnwise_omega1
from analog.coverage import digital_layers, is_mappable, split_layers
from analog.fast import split_sizes
from analog.hw import HW
from analog.input_ranges import has_learned_input_ranges, store_input_ranges
from analog.quantile_calibration import emulated, quantile_ranges_torch
from hwnas.common.errors import ConfigError

CORE = 256
"""HERMES' crossbar cores are 256x256."""
QUANTILE = 0.99995
"""aihwkit's default quantile for ``CACHE_QUANTILE`` calibration."""
MAX_SAMPLES = 1000
"""aihwkit's default number of cached input vectors per tile."""
CALIB_SEED = 0
"""Seed of the cache subsampling (aihwkit draws it from torch's global generator)."""


def static_config(noise_model: Any = None):
    """aihwkit's ``StandardHWATrainingPreset`` on 256x256 tiles (see the module docstring), with
    ``noise_model`` for its devices (default the preset's ``PCMLikeNoiseModel``, g_max 25 uS)."""
    from aihwkit.inference.compensation.drift import GlobalDriftCompensation
    from aihwkit.inference.noise.pcm import PCMLikeNoiseModel
    from aihwkit.simulator.presets import StandardHWATrainingPreset

    rpu = StandardHWATrainingPreset()
    # the preset's device model stated explicitly, or the one asked for
    rpu.noise_model = PCMLikeNoiseModel(g_max=25.0) if noise_model is None else noise_model
    rpu.drift_compensation = GlobalDriftCompensation()
    rpu.mapping.max_input_size = rpu.mapping.max_output_size = CORE
    return columnwise_omega1(rpu)


def hermes_static_config():
    """``static_config`` with HERMES' PCM devices: aihwkit's ``HermesNoiseModel`` at its own
    characterised defaults (2 devices per conductance of the pair, g_max 20.7 uS, t_0 300 s)."""
    from aihwkit.inference import HermesNoiseModel

    return static_config(HermesNoiseModel())


def _tile_row_ranges(layer: nn.Module, converted: nn.Module, max_in: int) -> Tensor:
    """One range per tile row (input split) of ``converted``; aihwkit orders its tiles input
    split first, and every tile of one split saw the same inputs."""
    tiles = list(converted.analog_tiles())
    rows = len(split_sizes(layer.weight[0].numel(), max_in))
    per_row = max(len(tiles) // rows, 1)
    return torch.tensor([float(tiles[i * per_row].input_range) for i in range(rows)])


@torch.no_grad()
def quantile_ranges(model: nn.Module, rpu: Any, calib: Tensor, *,
                    digital: Sequence[str] = (), batch_size: int = 128) -> nn.Module:
    """A copy of ``model`` whose analog layers carry the input ranges aihwkit's quantile
    calibration sets on a converted copy (the caller's model is untouched).

    Linear and Conv2d layers are calibrated in torch (``analog.quantile_calibration``: the same
    vectors cached, the same ranges up to float rounding, at about the cost of one digital pass);
    a model with other mappable layers runs aihwkit's own calibration
    (``aihwkit_quantile_ranges``)."""
    out = copy.deepcopy(model).eval()
    keep = set(digital_layers(out, digital)) if digital else set()
    # aihwkit's copy-back skips the root module (a model that is one bare layer)
    layers = {name: m for name, m in out.named_modules()
              if name and name not in keep and is_mappable(m)}
    if not all(emulated(m) for m in layers.values()):
        return aihwkit_quantile_ranges(model, rpu, calib, digital=digital, batch_size=batch_size)
    ranges = quantile_ranges_torch(out, layers, rpu, calib, quantile=QUANTILE,
                                   max_samples=MAX_SAMPLES, seed=CALIB_SEED,
                                   batch_size=batch_size)
    for name, layer in layers.items():
        store_input_ranges(layer, ranges[name])
    return out


@torch.no_grad()
def aihwkit_quantile_ranges(model: nn.Module, rpu: Any, calib: Tensor, *,
                            digital: Sequence[str] = (), batch_size: int = 128) -> nn.Module:
    """``quantile_ranges`` by aihwkit's own ``calibrate_input_ranges`` on a converted copy
    (the reference the torch calibration is tested against)."""
    from aihwkit.inference.calibration import InputRangeCalibrationType, calibrate_input_ranges
    from aihwkit.nn.conversion import convert_to_analog

    out = copy.deepcopy(model).eval()
    keep = digital_layers(out, digital) if digital else []
    converted = convert_to_analog(copy.deepcopy(out), copy.deepcopy(rpu),
                                  exclude_modules=split_layers(out)[1] + keep, inplace=True)
    batches = [((x,), {}) for x in calib.split(batch_size)]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(CALIB_SEED)
        calibrate_input_ranges(converted, InputRangeCalibrationType.CACHE_QUANTILE,
                               iter(batches), quantile=QUANTILE, max_samples=MAX_SAMPLES)
    layers = dict(out.named_modules())
    for name, module in converted.named_modules():
        if name in layers and name not in keep and hasattr(module, "analog_tiles") \
                and hasattr(layers[name], "weight") and name:
            store_input_ranges(layers[name], _tile_row_ranges(
                layers[name], module, rpu.mapping.max_input_size))
    return out


@dataclass(frozen=True)
class StaticRangeHW(AnalogHW):
    """An analog model whose input ranges are set once, after training, by aihwkit's quantile
    calibration (unless HWA learned them)."""

    def calibrated(self, model: nn.Module, rpu: Any, calib: Tensor | None,
                   digital: Sequence[str] = ()) -> nn.Module:
        if has_learned_input_ranges(model):
            return model
        if calib is None:
            raise ConfigError.one(
                f"{self.name} calibration", "static input ranges need calibration images",
                None, "pass calib=<training images, e.g. data.x_train[:512]>")
        return quantile_ranges(model, rpu, calib, digital=digital)

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              digital: Sequence[str] = (), **overrides: Any) -> nn.Module:
        ready = self.calibrated(model, self.rpu_config(**overrides), calib, digital)
        return super().apply(ready, calib=calib, digital=digital, **overrides)


HW.register("pcm_static")(StaticRangeHW(
    "pcm_static", "HERMES-like periphery: aihwkit StandardHWATrainingPreset (8-bit I/O, static "
                  "input ranges, constant noise management, no bound management, PCM read "
                  "noise, IR drop) on 256x256 tiles, ranges from aihwkit's quantile calibration "
                  "after training", base=static_config))
HW.register("pcm_hermes_static")(StaticRangeHW(
    "pcm_hermes_static", "HERMES PCM devices (aihwkit HermesNoiseModel, 2 devices per "
                         "conductance, g_max 20.7 uS) on the HERMES-like periphery of pcm_static "
                         "(8-bit I/O, static input ranges, 256x256 tiles)",
    base=hermes_static_config))
