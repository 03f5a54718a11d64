"""Hardware-aware (HWA) training: fine-tune a digital model so it keeps its accuracy on ``hw``.

HWA trains for exactly what will be scored: ``hwa_target`` takes the hardware name, the
study's fixed options (``hw_eval.options``, applied through ``HardwareModel.rpu_config`` as the
scorer applies them) and the layer-wise mapping (the layers kept digital), and every caller
(studies, ``hwnas analog-eval --hwa-epochs N``, finalize) trains through it. The training config
is the scored aihwkit config plus the HWA weight noise and clipping (``HwaTarget.rpu_config``),
so its periphery and device fields equal the scored ones.

Three engines run it. Peripheries with one input scale for every vector (``pcm_static``,
``pcm_hwa``) train on the torch engine (``analog.hwa_torch``: the fast path's tiles in training
mode, CPU or CUDA, read noise, IR drop, DAC/ADC and learned input ranges included). Other models
without per-MVM read noise or IR drop train with aihwkit-lightning (pure torch on CPU, Triton on
GPU): Gaussian weight noise per output channel, the DAC/ADC quantization and output noise of the
scored periphery, per-channel clipping after every step (Rasch et al. 2023). The rest, or any
model with ``HwaOptions(engine="aihwkit")``, train on aihwkit's own tiles with the scored
forward settings (``forward.w_noise``/``w_noise_type``, ``forward.ir_drop``) present in every
training MVM; clipping there is per tile (``LAYER_GAUSSIAN``).
Quantized models train with PT2E QAT. Either way the trained weights are written back into the
caller's digital model, so ``analog.evaluate(model, ..., hw)`` measures drift on aihwkit's full
PCM model; learned input ranges are kept too (``analog.input_ranges``).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn

from analog.channels import freeze_dead_channels
from analog.coverage import split_layers
from analog.fast import split_sizes
from analog.hw import HardwareModel, get_hw
from analog.input_ranges import set_learned_input_ranges, store_input_ranges
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
    fewer outliers put more of the conductance range to use. (aihwkit's tiles clip per tile.)"""
    io: bool = True
    """Train through the hardware's DAC/ADC quantization and output noise."""
    recipe: str = "plain"
    """``plain`` or ``rasch2023`` (noise ramp, distillation from the noise-free model, three
    times the fine-tuning; ``analog.hwa_recipe``)."""
    engine: str = "auto"
    """``torch`` (``analog.hwa_torch``: the inference tiles' forward in torch, CPU or CUDA),
    ``aihwkit`` (its C++ tiles, CPU), ``lightning`` (aihwkit-lightning: no read noise or IR
    drop), or ``auto``: torch where it covers the model and periphery, else aihwkit for models
    with read noise or IR drop and lightning for the rest."""

    def __post_init__(self) -> None:
        problems = []
        if not self.weight_noise >= 0:
            problems.append(Problem("HwaOptions.weight_noise", "must be >= 0", self.weight_noise,
                                    "use e.g. 0.05 (5% of each channel's max weight)"))
        if self.clip_sigma is not None and not self.clip_sigma > 0:
            problems.append(Problem("HwaOptions.clip_sigma", "must be > 0 or None",
                                    self.clip_sigma, "use e.g. 3.0, or None to switch it off"))
        from analog.hwa_recipe import RECIPES

        if self.recipe not in RECIPES:
            problems.append(Problem("HwaOptions.recipe", f"must be one of {sorted(RECIPES)}",
                                    self.recipe, "use 'plain' or 'rasch2023'"))
        if self.engine not in ENGINES:
            problems.append(Problem("HwaOptions.engine", f"must be one of {sorted(ENGINES)}",
                                    self.engine, "use 'auto' unless comparing engines"))
        if problems:
            raise ConfigError(problems)


ENGINES = frozenset({"auto", "torch", "aihwkit", "lightning"})


@dataclass(frozen=True, kw_only=True)
class HwaTarget:
    """What HWA trains for: the scored hardware model, its fixed options and mapping."""

    hw: HardwareModel
    options: dict[str, Any] = field(default_factory=dict)
    """The fixed hardware options scoring applies (``hw_eval.options[hw]``, ``AnalogOptions``)."""
    digital: tuple[str, ...] = ()
    """Shell patterns of layers the scored model keeps digital (layer-wise mapping)."""
    hwa: HwaOptions = field(default_factory=HwaOptions)

    def scored_rpu(self) -> Any:
        """The aihwkit config scoring converts with (a fresh object every call)."""
        return self.hw.rpu_config(**self.options)

    def rpu_config(self) -> Any:
        """The scored config plus the HWA weight noise and clipping (training-only fields:
        scoring never reads ``modifier`` or ``clip``)."""
        from aihwkit.simulator.parameters.enums import WeightClipType, WeightModifierType

        rpu = self.scored_rpu()
        # relative to the tile's max |w|; with column-wise omega 1 every output channel's max
        # is 1 on the tile, so this is the per-channel noise lightning injects
        rpu.modifier.type = WeightModifierType.ADD_NORMAL
        rpu.modifier.std_dev = self.hwa.weight_noise
        rpu.modifier.rel_to_actual_wmax = True
        if self.hwa.clip_sigma is not None:
            rpu.clip.type = WeightClipType.LAYER_GAUSSIAN
            rpu.clip.sigma = self.hwa.clip_sigma
        return rpu

    @property
    def per_mvm_noise(self) -> bool:
        """Whether the scored forward pass has read noise or IR drop (lightning has neither)."""
        fwd = self.scored_rpu().forward
        if fwd.is_perfect:
            return False
        return (fwd.w_noise > 0 and fwd.w_noise_type.name != "NONE") or fwd.ir_drop > 0

    @property
    def engine(self) -> str:
        """``torch`` (the fast path's tiles, for peripheries with one input scale for every
        vector: ``pcm_static``, ``pcm_hwa``), ``aihwkit`` (its tiles: read noise and IR drop)
        or ``lightning``; ``HwaOptions.engine`` picks one by name. ``hwa_fit`` falls back from
        ``auto``'s torch to aihwkit for a model the torch engine does not cover."""
        if self.hwa.engine != "auto":
            return self.hwa.engine
        from analog.periphery import IOModel

        if self.hw.kind == "analog" and IOModel.of(self.scored_rpu().forward).static_scale:
            return "torch"
        return "aihwkit" if self.per_mvm_noise else "lightning"


def hwa_target(hw: str | HardwareModel, *, options: dict[str, Any] | None = None,
               digital: Sequence[str] = (), hwa: HwaOptions | None = None) -> HwaTarget:
    """The HWA training target for scoring ``hw`` with ``options`` and ``digital`` layers.

    Studies, ``analog-eval --hwa-epochs`` and finalize build their target here, so HWA sees the
    scored periphery, device and mapping. Bad options fail here, as scoring would.
    """
    hw_model = hw if isinstance(hw, HardwareModel) else get_hw(hw)
    target = HwaTarget(hw=hw_model, options=dict(options or {}),
                       digital=tuple([digital] if isinstance(digital, str) else digital),
                       hwa=hwa or HwaOptions())
    if hw_model.kind == "analog":
        target.scored_rpu()  # refuses options the model cannot apply, as scoring does
    elif target.options:
        raise ConfigError.one(f"{hw_model.name} HWA options", "only analog hardware models take "
                              "options", target.options, "drop them for this hardware model")
    return target


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


def _keep_tile_ranges(trained: nn.Module, model: nn.Module, max_in: int) -> None:
    """``_keep_input_ranges`` for aihwkit tiles: one range per input split (aihwkit orders a
    layer's tiles input split first, and the tiles of one split share its inputs)."""
    layers = dict(model.named_modules())
    for name, module in trained.named_modules():
        if not name or name not in layers or not hasattr(module, "analog_tiles"):
            continue
        tiles = list(module.analog_tiles())
        if not tiles or tiles[0].input_range is None or not hasattr(layers[name], "weight"):
            continue
        rows = len(split_sizes(layers[name].weight[0].numel(), max_in))
        per_row = max(len(tiles) // rows, 1)
        store_input_ranges(layers[name], torch.stack(
            [tiles[k * per_row].input_range.detach().reshape(()) for k in range(rows)]))


def _contiguous_copy(model: nn.Module) -> nn.Module:
    work = copy.deepcopy(model)
    for param in work.parameters():  # the tiles view weights as 2-D: no channels_last
        param.data = param.data.contiguous()
    return work


def lightning_model(model: nn.Module, target: HwaTarget) -> nn.Module:
    """A copy of ``model`` on aihwkit-lightning layers mirroring ``target`` (the mapped and
    unmappable layers digital)."""
    from aihwkit_lightning.nn.conversion import convert_to_analog

    _, digital = split_layers(model, target.digital)
    return convert_to_analog(_contiguous_copy(model),
                             lightning_config(target.rpu_config(), target.hwa),
                             exclude_modules=digital, ensure_analog_root=False, inplace=True)


def _fit_lightning(model, data, target: HwaTarget, cfg, loss_fn=None):
    from aihwkit_lightning.nn import AnalogLayerBase

    from hwnas.train.loop import FitConfig, fit

    opts = target.hwa
    analog = lightning_model(model, target)
    layers = [m for m in analog.modules() if isinstance(m, AnalogLayerBase)]

    @torch.no_grad()
    def clip(_: nn.Module) -> None:
        for layer in layers:
            layer.clip_weights()

    clip(analog)  # start inside the clipping range, as after every later step
    # lightning convolves via unfold, so channels_last buys nothing and breaks its 2-D views
    cfg = replace(cfg or FitConfig(), channels_last=False)

    def set_noise(std: float) -> None:  # lightning reads the modifier at every forward pass
        for layer in layers:
            layer.rpu_config.modifier.std_dev = std

    ramp = _ramp(set_noise, target, cfg, data)
    result = fit(analog, data, cfg, loss_fn=loss_fn,
                 step_hook=_hooks(clip if opts.clip_sigma is not None else None, ramp))
    _copy_back(analog, model)
    if target.scored_rpu().pre_post.input_range.enable:
        _keep_input_ranges(analog, model)
    return result


def tile_model(model: nn.Module, target: HwaTarget) -> nn.Module:
    """A copy of ``model`` on aihwkit tiles with ``target``'s training config (the mapped and
    unmappable layers digital), learned input ranges carried over."""
    from aihwkit.nn.conversion import convert_to_analog

    _, digital = split_layers(model, target.digital)
    analog = convert_to_analog(_contiguous_copy(model), target.rpu_config(),
                               exclude_modules=digital, inplace=True)
    set_learned_input_ranges(model, analog)
    return analog


def analog_optimizer(analog: nn.Module, cfg) -> torch.optim.Optimizer:
    """aihwkit's optimizer (its step applies the tiles' clipping and remapping); decay stays
    off: aihwkit's tiles would decay the tile weights without the digital weight scales."""
    from aihwkit.optim import AnalogAdam, AnalogSGD

    if cfg.optimizer == "adamw":
        opt = AnalogAdam(analog.parameters(), lr=cfg.lr, betas=(cfg.momentum, 0.999))
    else:
        opt = AnalogSGD(analog.parameters(), lr=cfg.lr, momentum=cfg.momentum,
                        nesterov=cfg.momentum > 0)
    opt.regroup_param_groups(analog)
    return opt


def _fit_tiles(model, data, target: HwaTarget, cfg, loss_fn=None):
    """Train on aihwkit's tiles: the scored read noise and IR drop act in every forward MVM."""
    from aihwkit.nn.conversion import convert_to_digital

    from hwnas.train.loop import FitConfig, fit

    cfg = replace(cfg or FitConfig(), channels_last=False)
    analog = tile_model(model, target)
    result = fit(analog, data, cfg, loss_fn=loss_fn, optimizer=analog_optimizer(analog, cfg))
    rpu = target.scored_rpu()
    _copy_back(convert_to_digital(copy.deepcopy(analog).cpu()), model)
    if rpu.pre_post.input_range.enable:
        _keep_tile_ranges(analog, model, rpu.mapping.max_input_size)
    return result


def _fit_torch(model, data, target: HwaTarget, cfg, loss_fn=None):
    """Train on the torch engine (``analog.hwa_torch``) in fp32, TF32 off (no autocast: the
    DAC/ADC steps and the noise are fp32 quantities)."""
    from analog.hwa_torch import TorchHwaModel, fp32_precision
    from hwnas.train.loop import FitConfig, fit

    cfg = replace(cfg or FitConfig(), amp=False)
    work = copy.deepcopy(model)
    device = next(work.parameters()).device
    hwa = TorchHwaModel(work, target.rpu_config(), weight_noise=target.hwa.weight_noise,
                        digital=target.digital, seed=cfg.seed)
    sigma = target.hwa.clip_sigma

    def clip(_: nn.Module) -> None:
        for layer in hwa.layers():
            layer.clip_weights(sigma)

    if sigma is not None:
        clip(hwa)
    ramp = _ramp(lambda std: setattr(hwa, "weight_noise", std), target, cfg, data)
    with fp32_precision(device):
        result = fit(hwa, data, cfg, loss_fn=loss_fn,
                     step_hook=_hooks(clip if sigma is not None else None, ramp))
    ranges = {id(m.layer): m.input_range.detach().abs() for m in hwa.layers() if m.ranged}
    trained = hwa.unwrap()
    _copy_back(trained, model)
    names = {id(m): n for n, m in trained.named_modules()}
    layers = dict(model.named_modules())
    for key, value in ranges.items():
        store_input_ranges(layers[names[key]], value.cpu())
    return result


def _engine(model: nn.Module, target: HwaTarget):
    name = target.engine
    if name == "torch":
        from analog.hwa_torch import torch_unsupported

        reasons = torch_unsupported(model, target.rpu_config(), target.digital)
        if reasons and target.hwa.engine == "torch":
            raise ConfigError.one("HwaOptions.engine", "the torch engine must cover the model",
                                  reasons, "use engine='auto' or 'aihwkit'")
        if reasons:
            name = "aihwkit" if target.per_mvm_noise else "lightning"
    return {"torch": _fit_torch, "aihwkit": _fit_tiles, "lightning": _fit_lightning}[name]


def _ramp(set_noise, target: HwaTarget, cfg, data):
    from analog.hwa_recipe import get_recipe, ramp_hook, total_steps

    return ramp_hook(set_noise, target.hwa.weight_noise, get_recipe(target.hwa.recipe),
                     total_steps(cfg, len(data.x_train)))


def _hooks(*hooks):
    """One step hook running ``hooks`` (None entries skipped; None if none is left)."""
    live = [h for h in hooks if h is not None]
    if not live:
        return None

    def run(module: nn.Module) -> None:
        for hook in live:
            hook(module)
    return run


def _fit_analog(model, data, target: HwaTarget, cfg, loss_fn=None):
    from analog.hwa_recipe import get_recipe, longer, teacher_loss
    from hwnas.train.loop import FitConfig

    engine = _engine(model, target)
    recipe = get_recipe(target.hwa.recipe)
    if recipe.ramp > 0 and engine is _fit_tiles and target.hwa.weight_noise > 0:
        raise ConfigError.one("HwaOptions.recipe", "a noise ramp needs the torch or lightning "
                              "engine (aihwkit's tiles fix the noise at conversion)",
                              target.hwa.recipe, "use engine='auto' or 'torch', or recipe "
                              "'plain'")
    cfg = longer(cfg or FitConfig(), recipe)
    result = engine(model, data, target, cfg, teacher_loss(model, recipe, loss_fn))
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


def hwa_fit(model: nn.Module, data, hw: str | HardwareModel | HwaTarget, cfg=None, *,
            options: HwaOptions | None = None, loss_fn: LossFn | None = None):
    """Fine-tune ``model`` in place for hardware ``hw``; returns ``hwnas.train.loop.FitResult``.

    ``hw``: a ``hwa_target`` (the scored options and mapping), or a hardware name or model
    (its preset defaults, every mappable layer analog). Analog: noise-injection training (see
    the module docstring and ``HwaOptions``). Quantized (fqN, wXaY, int8): quantization-aware
    training through PT2E. ``digital``: plain training. ``cfg`` is a
    ``hwnas.train.loop.FitConfig`` (e.g. 1-2 epochs at a tenth of the digital learning rate for
    fine-tuning). ``loss_fn(logits, targets, inputs)`` replaces cross-entropy, e.g. a
    ``hwnas.compress.distill.Distiller``: the student learns the noise-free teacher's outputs
    while training under the hardware's noise.
    """
    from hwnas.train.loop import fit

    if isinstance(hw, HwaTarget):
        if options is not None and options != hw.hwa:
            raise ConfigError.one("hwa_fit options", "must not disagree with the target's",
                                  options, "set them once, in hwa_target(..., hwa=...)")
        target = hw
    else:
        target = hwa_target(hw, hwa=options)
    if target.hw.kind == "analog":
        return _fit_analog(model, data, target, cfg, loss_fn)
    if target.hw.kind == "quant":
        return _fit_qat(model, data, target.hw, cfg, loss_fn)
    return fit(model, data, cfg, loss_fn=loss_fn)
