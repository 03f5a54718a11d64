"""What accuracy a model keeps on non-ideal hardware: N-bit and int8 quantization (torchao PT2E),
analog in-memory computing with aihwkit (PCM noise, drift, compensation), HWA training and drift
experiments. Hardware models are applied from outside: ``analog.apply(model, hw)``.

Public API: ``apply``, ``list_hw``, ``get_hw``, ``evaluate(model, x, y, hw, ScoringProtocol(...))``
-> ``DriftResult``, ``hwa_fit``,
``parse_time``; ``freeze_dead_channels`` (before mapping a model whose
channels died in training); coverage of a model on analog tiles: ``coverage``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import Tensor, nn

from analog import aimc as _aimc  # noqa: F401  (registers pcm, pcm_ideal, pcm_hwa, ...)
from analog import devices as _devices  # noqa: F401  (registers reram_cmo, reram_wan2022, ...)
from analog import quant as _quant  # noqa: F401  (registers fq8, fq4, w4a8, int8)
from analog import static_io as _static_io  # noqa: F401  (registers pcm_static)
from analog.channels import dead_channels, freeze_dead_channels
from analog.coverage import Coverage, CoverageWarning, coverage
from analog.drift import (
    AnalogModeWarning,
    DeadChannelWarning,
    DriftResult,
    FastPathWarning,
    TimePoint,
    evaluate,
)
from analog.hw import HW, HardwareModel, get_hw, list_hw
from analog.hwa import HwaOptions, hwa_fit
from analog.protocol import ScoringProtocol
from analog.times import format_time, parse_time, parse_times
from hwnas.common.errors import ConfigError


def apply(model: nn.Module, hw: str | HardwareModel, *, calib: Tensor | None = None,
          digital: Sequence[str] = (), **overrides: Any) -> nn.Module:
    """A copy of ``model`` computing on hardware ``hw`` (``list_hw()``; also fqN / wXaY).

    Quantized models and presets with learned input ranges need ``calib`` (training images).
    ``digital``: shell patterns over module names of layers to keep digital on analog hardware
    (e.g. ``["stem.*", "head.*"]``); each must match a mappable layer.
    ``overrides`` adjust the preset, e.g. ``dac_bits``, ``adc_bits``, ``out_noise``,
    ``tile_size``, ``compensation`` for analog models (``analog.aimc.AnalogOptions``).
    """
    hw_model = hw if isinstance(hw, HardwareModel) else get_hw(hw)
    if digital and hw_model.kind != "analog":
        raise ConfigError.one("digital layers", "apply only to analog hardware models",
                              list(digital), f"drop digital= for {hw_model.name}")
    if digital:
        return hw_model.apply(model, calib=calib, digital=digital, **overrides)
    return hw_model.apply(model, calib=calib, **overrides)


__all__ = [
    "HW", "AnalogModeWarning", "Coverage", "CoverageWarning", "DeadChannelWarning", "DriftResult",
    "FastPathWarning", "HardwareModel", "HwaOptions", "ScoringProtocol", "TimePoint", "apply",
    "coverage", "dead_channels", "evaluate", "format_time", "freeze_dead_channels", "get_hw",
    "hwa_fit", "list_hw", "parse_time", "parse_times",
]
