"""HWA training on the fast path's tiles: aihwkit's inference-tile forward in pure torch.

aihwkit's C++ tiles run HWA training of ``pcm_static`` at a twentieth of the digital speed and
only on CPU. Here each mappable layer runs the training forward of aihwkit's
``InferenceTile`` as convolutions of the quantized input map (``analog.static_conv``), on CPU
or CUDA:

* the weight matrix is split into tiles like ``TileModuleArray`` and each tile scaled by its
  column-wise ``weight_scaling_omega`` (the scales follow the weights, without gradient);
* the HWA weight noise (aihwkit's ``ADD_NORMAL`` modifier relative to the tile's max |w|, a
  stand-in for programming noise) is drawn afresh every forward pass;
* inputs are clipped to the tile row's static range and divided by it (aihwkit's
  ``pre_forward``); the range learns with the gradient of aihwkit's ``InputRangeForward``
  rule (clipped inputs pull it out, the decay pulls it in), written out with the other
  elementwise stages in ``analog.hwa_stages`` and tested against aihwkit's function; before
  a range is learned or given it is set from the first ``init_from_data`` batches with
  aihwkit's rule;
* DAC and ADC quantization, IR drop, PCM read noise and output noise are the inference fast
  path's (``IOModel``); the backward pass is aihwkit's perfect one: the ideal product's
  gradient (straight through the quantizers and the noise), zero for outputs at the ADC bound
  (aihwkit's ``handle_output_bound``), scaled by the range and the mapping scales;
* after every optimizer step each output channel is clipped at ``clip_sigma`` standard
  deviations of its weights (per channel, as ``HwaOptions.clip_sigma`` documents; aihwkit's
  tiles clip per tile).

It covers peripheries with one input scale for every vector (``IOModel.static_scale``:
``pcm_static``, ``pcm_hwa``) on Linear layers and Conv2d layers whose tile splits fall on
channel boundaries (``torch_unsupported`` lists the rest; ``hwa_fit`` then uses aihwkit's
tiles). The trained weights stay the digital layers' own parameters.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from analog.coverage import digital_layers, is_mappable
from analog.fast import fast_unsupported, patch_std, split_sizes
from analog.hwa_stages import InputStage, OutputStage
from analog.input_ranges import learned_input_ranges
from analog.periphery import IOModel


def torch_unsupported(model: nn.Module, rpu: Any, digital=()) -> list[str]:
    """What keeps the torch HWA engine from training ``model`` for ``rpu`` (empty: nothing)."""
    io = IOModel.of(rpu.forward)
    reasons = fast_unsupported(model, rpu)
    if not io.static_scale:
        reasons.append("per-vector input scaling (noise or bound management, input noise, "
                       "stochastic DAC rounding)")
    keep = set(digital_layers(model, digital)) if digital else set()
    for name, module in model.named_modules():
        if name in keep or not is_mappable(module) or not isinstance(module, nn.Conv2d):
            continue
        per = module.weight[0, 0].numel()
        bounds = torch.tensor([0, *split_sizes(module.weight[0].numel(),
                                               rpu.mapping.max_input_size)]).cumsum(0)
        if module.groups != 1 or bool((bounds % per).any()):
            reasons.append(f"{name}: grouped conv or a tile split inside a channel")
    return reasons


@contextlib.contextmanager
def fp32_precision(device: torch.device | str) -> Iterator[dict[str, Any]]:
    """Full fp32 products while training (TF32 off on CUDA); yields the settings used."""
    cuda = torch.device(device).type == "cuda"
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield {"dtype": "float32", "tf32": False if cuda else None, "device": str(device)}
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved


class HwaLayer(nn.Module):
    """A Linear or Conv2d training through emulated inference tiles (see the module docstring)."""

    def __init__(self, layer: nn.Linear | nn.Conv2d, rpu: Any, io: IOModel,
                 owner: TorchHwaModel):
        super().__init__()
        self.layer, self.rpu, self.io, self._owner = layer, rpu, io, [owner]
        n_in = layer.weight[0].numel()
        self.in_sizes = split_sizes(n_in, rpu.mapping.max_input_size)
        self.out_sizes = split_sizes(layer.weight.shape[0], rpu.mapping.max_output_size)
        per = layer.weight[0, 0].numel() if isinstance(layer, nn.Conv2d) else 1
        bounds = torch.tensor([0, *self.in_sizes]).cumsum(0).tolist()
        self.slices = list(zip(bounds, bounds[1:], strict=False))
        self.channels = [(a // per, b // per) for a, b in self.slices]
        self.ranged = bool(rpu.pre_post.input_range.enable)
        learned = learned_input_ranges(layer)
        init = float(rpu.pre_post.input_range.init_value)
        values = [init] * len(self.in_sizes) if learned is None else \
            [float(learned[min(i, len(learned) - 1)]) for i in range(len(self.in_sizes))]
        self.input_range = nn.Parameter(torch.tensor(values, device=layer.weight.device),
                                        requires_grad=self.ranged)
        # ranges not learned yet start from data, as aihwkit's ``init_from_data``
        self.register_buffer("range_updates", torch.full(
            (len(values),), 0 if learned is None else 1 << 30, dtype=torch.long,
            device=layer.weight.device))

    def _product(self, inp: Tensor, w: Tensor) -> Tensor:
        """``w`` (out, in_row) applied to a tile row's inputs ``inp``: (n, out, ...)."""
        if isinstance(self.layer, nn.Linear):
            return F.linear(inp, w).movedim(-1, 1)
        layer = self.layer
        y = F.conv2d(inp, w.view(len(w), -1, *layer.kernel_size), None, layer.stride,
                     layer.padding, layer.dilation)
        # a one-channel input and weight are NCHW and channels_last at once: torch picks NCHW
        return y.contiguous(memory_format=torch.channels_last) if self._owner[0].channels_last \
            else y

    def _row_input(self, x: Tensor, row: int) -> Tensor:
        if len(self.slices) == 1:  # the whole input: no slice to copy back in the backward
            return x
        if isinstance(self.layer, nn.Linear):
            a, b = self.slices[row]
            return x[..., a:b]
        c0, c1 = self.channels[row]
        return x[:, c0:c1]

    @torch.no_grad()
    def _update_range(self, x: Tensor, row: int) -> None:
        params, k = self.rpu.pre_post.input_range, int(self.range_updates[row])
        if k >= params.init_from_data:
            return
        if isinstance(self.layer, nn.Conv2d):
            std = patch_std(self.layer, x, *self.channels[row])
        else:
            std = float(self._row_input(x, row).std())
        if std > 0.0:
            r = self.input_range[row]
            r.copy_(((r * k + params.init_std_alpha * std) / (k + 1)).abs())
            self.range_updates[row] += 1

    def _tile_weights(self, w: Tensor) -> tuple[Tensor, Tensor]:
        """The row's tile weights (noisy in training) stacked by output and their mapping
        scales (out,)."""
        mapping, tiles, scales = self.rpu.mapping, [], []
        noise = self._owner[0].weight_noise if self.training else 0.0
        for part in w.split(self.out_sizes, 0):
            scale = torch.ones(len(part), 1, dtype=w.dtype, device=w.device)
            if mapping.weight_scaling_omega and mapping.weight_scaling_omega > 0:
                wmax = part.detach().abs().amax(dim=1, keepdim=True)
                if not mapping.weight_scaling_columnwise:
                    wmax = wmax.amax().expand_as(wmax)
                scale = wmax / mapping.weight_scaling_omega
                scale = torch.where(scale == 0.0, torch.ones_like(scale), scale)
            tile = part / scale
            if noise > 0:  # aihwkit's ADD_NORMAL, relative to the tile's actual max |w|
                std = noise * tile.detach().abs().amax()
                tile = tile + std * torch.randn(tile.shape, generator=self._owner[0].gen(w.device),
                                                device=tile.device, dtype=tile.dtype)
            tiles.append(tile)
            scales.append(scale.view(-1))
        return torch.cat(tiles), torch.cat(scales)

    def _row(self, x: Tensor, w: Tensor, row: int) -> Tensor:
        io, gen = self.io, self._owner[0].gen(x.device)
        inp = self._row_input(x, row)
        if self.training and self.ranged:
            self._update_range(inp, row)
        tiles, scales = self._tile_weights(w)
        r = self.input_range[row:row + 1] if self.ranged else None
        q = InputStage.apply(inp, r, 1.0 / (io.nm_const * io.i_unit), io.inp_step > 0,
                             io.inp_bound / io.i_unit, self.rpu.pre_post.input_range)
        main, pos, absw, read = io.product_weights(tiles)
        y = self._product(q, main)
        with torch.no_grad():
            side = self._side_products(q.detach(), pos, absw, read)
        coef = scales.view(1, -1, *([1] * (y.dim() - 2))) * (
            io.nm_const * io.o_unit * io.out_scale)
        return OutputStage.apply(y, r, coef, io, gen, side)

    def _side_products(self, q: Tensor, pos: Tensor | None, absw: Tensor | None,
                       read: Tensor | None) -> dict[str, Tensor | None]:
        """IR drop's ``z`` and ``a`` and the read noise's variance (``IOModel.analog_out``)."""
        io, z, a = self.io, None, None
        if pos is not None:
            # two products, not one of stacked weights: its channel halves would be strided
            # views, and every pass over them three times slower in channels_last
            z, a = self._product(q, pos), self._product(q.abs(), absw)
        var = None if read is None else self._product(q * q, read).add_(io.out_var)
        return {"a": a, "z": z, "var": var}

    def forward(self, x: Tensor) -> Tensor:
        if self._owner[0].channels_last and x.dim() == 4:
            x = x.contiguous(memory_format=torch.channels_last)
        w = self.layer.weight.reshape(self.layer.weight.shape[0], -1)
        out = None
        for row, (a, b) in enumerate(self.slices):
            part = self._row(x, w[:, a:b], row)
            out = part if out is None else out + part
        if isinstance(self.layer, nn.Linear):
            out = out.movedim(1, -1)
        if self.layer.bias is not None:
            bias = self.layer.bias
            out = out + (bias if isinstance(self.layer, nn.Linear) else bias.view(1, -1, 1, 1))
        return out

    @torch.no_grad()
    def clip_weights(self, sigma: float) -> None:
        """Clip each output channel at ``sigma`` std of its weights."""
        w = self.layer.weight
        bound = (sigma * w.flatten(1).std(dim=1)).view(-1, *([1] * (w.dim() - 1)))
        w.copy_(torch.clamp(w, -bound, bound))


class TorchHwaModel(nn.Module):
    """``model`` with its mappable layers (all but ``digital``) wrapped in ``HwaLayer``s in
    place: the digital layers keep their parameters, the ranges are added."""

    def __init__(self, model: nn.Module, rpu: Any, *, weight_noise: float = 0.0,
                 digital=(), seed: int = 0):
        super().__init__()
        reasons = torch_unsupported(model, rpu, digital)
        if reasons:
            raise ValueError(f"torch HWA engine cannot emulate: {', '.join(reasons)}")
        self.net, self.rpu, self.weight_noise = model, rpu, float(weight_noise)
        self.io = IOModel.of(rpu.forward)
        self.seed, self._generators = seed, {}
        self.channels_last = False
        """Whether the convs were put in channels_last (``fit`` does): then every product and
        activation of the wrapped layers is kept in that format (set on each forward)."""
        keep = set(digital_layers(model, digital)) if digital else set()
        self._wrap(model, keep, "")

    def _wrap(self, parent: nn.Module, keep: set[str], prefix: str) -> None:
        for name, child in parent.named_children():
            full = f"{prefix}{name}"
            if is_mappable(child) and full not in keep:
                setattr(parent, name, HwaLayer(child, self.rpu, self.io, self))
            else:
                self._wrap(child, keep, f"{full}.")

    def gen(self, device: torch.device) -> torch.Generator:
        """The noise generator on ``device`` (seeded once; training may move the model)."""
        key = str(device)
        if key not in self._generators:
            self._generators[key] = torch.Generator(device=device).manual_seed(self.seed)
        return self._generators[key]

    def layers(self) -> list[HwaLayer]:
        return [m for m in self.net.modules() if isinstance(m, HwaLayer)]

    def forward(self, x: Tensor) -> Tensor:
        self.channels_last = any(
            w.dim() == 4 and not w.is_contiguous()
            and w.is_contiguous(memory_format=torch.channels_last)
            for w in (layer.layer.weight for layer in self.layers()))
        return self.net(x)

    def unwrap(self) -> nn.Module:
        """The model with the plain layers back in place (trained weights kept)."""
        def restore(parent: nn.Module) -> None:
            for name, child in parent.named_children():
                if isinstance(child, HwaLayer):
                    setattr(parent, name, child.layer)
                else:
                    restore(child)

        restore(self.net)
        return self.net
