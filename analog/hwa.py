"""Hardware-aware (HWA) training: fine-tune a digital model so it keeps its accuracy on ``hw``.

Analog models train with aihwkit-lightning (pure torch on CPU, Triton on GPU): its layers
inject Gaussian weight noise per output channel (``ADD_NORMAL_PER_CHANNEL``), quantize inputs
and outputs like the hardware's DAC/ADC, add output noise and clip the weights per channel
after every step (Rasch et al. 2023). Quantized models train with PT2E QAT (fake-quant in the
graph). Either way the trained weights are written back into the caller's digital model, so
``analog.evaluate(model, ..., hw)`` measures the drift behaviour on aihwkit's full PCM model
(lightning has no drift model; the weights are what HWA training changes). For presets with
input ranges (``pcm_hwa``) the learned ranges are kept too (``analog.input_ranges``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from analog.channels import freeze_dead_channels
from analog.coverage import split_layers
from analog.hw import HardwareModel, get_hw
from analog.input_ranges import store_input_ranges
from hwnas.common.errors import ConfigError, Problem
from hwnas.train.loop import LossFn


@dataclass(frozen=True, kw_only=True)
class HwaOptions:
    """How hard to train for the hardware."""

    weight_noise: float = 0.05
    """Std of the injected weight noise per output channel, relative to the channel's max |w|
    (PCM programming noise is about 1-4% of g_max, drift and read noise add to it)."""
    clip_sigma: float | None = 3.0
    """Clip each output channel's weights at ``clip_sigma`` std after every step (None: off);
    fewer outliers put more of the conductance range to use."""
    io: bool = True
    """Train through the hardware's DAC/ADC quantization and output noise."""

    def __post_init__(self) -> None:
        problems = []
        if not self.weight_noise >= 0:
            problems.append(Problem("HwaOptions.weight_noise", "must be >= 0", self.weight_noise,
                                    "use e.g. 0.05 (5% of each channel's max weight)"))
        if self.clip_sigma is not None and not self.clip_sigma > 0:
            problems.append(Problem("HwaOptions.clip_sigma", "must be > 0 or None",
                                    self.clip_sigma, "use e.g. 3.0, or None to switch it off"))
        if problems:
            raise ConfigError(problems)


def lightning_config(rpu: Any, opts: HwaOptions):
    """An aihwkit-lightning training config mirroring the periphery of aihwkit config ``rpu``."""
    from aihwkit.simulator.parameters.enums import NoiseManagementType
    from aihwkit_lightning.simulator.configs import (
        TorchInferenceRPUConfig,
        WeightClipType,
        WeightNoiseInjectionType,
    )

    cfg = TorchInferenceRPUConfig()
    fwd = rpu.forward
    cfg.mapping.max_input_size = max(rpu.mapping.max_input_size, 0) or -1
    cfg.modifier.noise_type = WeightNoiseInjectionType.ADD_NORMAL_PER_CHANNEL
    cfg.modifier.std_dev = opts.weight_noise
    if opts.clip_sigma is not None:
        cfg.clip.type = WeightClipType.LAYER_GAUSSIAN_PER_CHANNEL
        cfg.clip.sigma = opts.clip_sigma
    cfg.pre_post.input_range.enable = True
    # abs-max noise management scales each input vector by its own max: a dynamic range.
    cfg.pre_post.input_range.dynamic = not rpu.pre_post.input_range.enable and \
        fwd.noise_management in (NoiseManagementType.ABS_MAX, NoiseManagementType.MAX)
    if opts.io and not fwd.is_perfect:
        cfg.forward.inp_res = fwd.inp_res
        cfg.forward.out_res = fwd.out_res
        cfg.forward.out_bound = fwd.out_bound if fwd.out_bound > 0 else 0.0
        cfg.forward.out_noise = fwd.out_noise
        cfg.forward.out_noise_per_channel = bool(rpu.mapping.weight_scaling_columnwise)
    return cfg


def _copy_back(trained: nn.Module, model: nn.Module) -> None:
    """Write the trained parameters and buffers into ``model`` (same names, same shapes)."""
    source = trained.state_dict()
    target = model.state_dict()
    missing = [k for k in target if k not in source]
    if missing:
        raise ConfigError.one("hwa_fit", "the trained copy must keep the model's parameter names",
                              missing[:5], "report this model structure as a bug")
    model.load_state_dict({k: source[k].detach().to(target[k].device) for k in target})


def _keep_input_ranges(trained: nn.Module, model: nn.Module) -> None:
    """Store the input ranges HWA learned on ``model``'s layers (``analog.input_ranges``), so
    evaluation clips where training clipped instead of re-estimating ranges from data."""
    from aihwkit_lightning.nn import AnalogLayerBase

    layers = dict(model.named_modules())
    for name, module in trained.named_modules():
        ranges = getattr(module, "input_range", None)
        if isinstance(module, AnalogLayerBase) and ranges is not None and name in layers:
            store_input_ranges(layers[name], ranges)


def _fit_analog(model, data, hw: HardwareModel, cfg, opts: HwaOptions, loss_fn=None):
    from aihwkit_lightning.nn import AnalogLayerBase
    from aihwkit_lightning.nn.conversion import convert_to_analog

    from hwnas.train.loop import FitConfig, fit

    _, digital = split_layers(model)
    work = copy.deepcopy(model)
    for param in work.parameters():  # lightning views weights as 2-D: no channels_last
        param.data = param.data.contiguous()
    analog = convert_to_analog(work, lightning_config(hw.rpu_config(), opts),
                               exclude_modules=digital, ensure_analog_root=False, inplace=True)
    layers = [m for m in analog.modules() if isinstance(m, AnalogLayerBase)]

    @torch.no_grad()
    def clip(_: nn.Module) -> None:
        for layer in layers:
            layer.clip_weights()

    clip(analog)  # start inside the clipping range, as after every later step
    # lightning convolves via unfold, so channels_last buys nothing and breaks its 2-D views
    cfg = replace(cfg or FitConfig(), channels_last=False)
    result = fit(analog, data, cfg, loss_fn=loss_fn,
                 step_hook=clip if opts.clip_sigma is not None else None)
    _copy_back(analog, model)
    if hw.rpu_config().pre_post.input_range.enable:
        _keep_input_ranges(analog, model)
    # Training noise is relative to each channel's max, so a channel that weight decay drove
    # to exactly zero trained noise-free but would read full-scale noise on the hardware.
    freeze_dead_channels(model)
    return result


def _fit_qat(model, data, hw: HardwareModel, cfg, loss_fn=None):
    from analog.quant import prepare_qat
    from hwnas.train.loop import fit

    prepared = prepare_qat(model, hw.config(qat=True), data.x_train[:2])
    result = fit(prepared, data, cfg, loss_fn=loss_fn)
    _copy_back(prepared, model)
    return result


def hwa_fit(model: nn.Module, data, hw: str | HardwareModel, cfg=None, *,
            options: HwaOptions | None = None, loss_fn: LossFn | None = None):
    """Fine-tune ``model`` in place for hardware ``hw``; returns ``hwnas.train.loop.FitResult``.

    Analog ``hw``: noise-injection training with aihwkit-lightning (see ``HwaOptions``).
    Quantized ``hw`` (fqN, wXaY, int8): quantization-aware training through PT2E.
    ``digital``: plain training. ``cfg`` is a ``hwnas.train.loop.FitConfig`` (e.g. 1-2 epochs at a
    tenth of the digital learning rate for fine-tuning). ``loss_fn(logits, targets, inputs)``
    replaces cross-entropy, e.g. a ``hwnas.compress.distill.Distiller``: the student learns the
    noise-free teacher's outputs while training under the hardware's noise.
    """
    from hwnas.train.loop import fit

    hw_model = hw if isinstance(hw, HardwareModel) else get_hw(hw)
    opts = options or HwaOptions()
    if hw_model.kind == "analog":
        return _fit_analog(model, data, hw_model, cfg, opts, loss_fn)
    if hw_model.kind == "quant":
        return _fit_qat(model, data, hw_model, cfg, loss_fn)
    return fit(model, data, cfg, loss_fn=loss_fn)
