"""Fast analog evaluation: aihwkit's statistical PCM model on dense torch kernels.

aihwkit's C++ tile runs every input vector through its own loop and is 4-10x slower than the
digital model on CPU. Here the same steps run batched in torch, and the device model is
aihwkit's own code:

* each layer's weight matrix is split into tiles like ``TileModuleArray`` and scaled like
  ``apply_weight_scaling`` (``weight_scaling_omega``, column-wise or not);
* programming noise, drift coefficients, drift and 1/f read noise come from the rpu config's
  noise model (``apply_programming_noise`` / ``apply_drift_noise``), called on the same tiles
  in the same order, so with the same torch seed the device weights are aihwkit's, bit for bit;
* drift compensation (global or per column) reads each tile out with one-hot inputs through
  the emulated periphery and uses the compensation object's own ``readout``/``apply``; the
  exact-reference variant reads its baseline from the unprogrammed weights, as aihwkit does;
* the periphery (``analog.periphery.IOModel``) is RPUCuda's per-vector forward, batched,
  IR drop and per-MVM weight read noise included. Its noise comes from the model's own
  generator, as the C++ tile has its own RNG;
* presets with input ranges (``pcm_hwa``) clip each tile's inputs to its range and scale the
  output back, like aihwkit's ``pre_forward``/``post_forward``; ranges learned by HWA training
  are taken from the digital layers (``analog.input_ranges``), others are set from calibration
  images with aihwkit's ``init_from_data`` rule. Learned output scales start at 1 after
  conversion (aihwkit's ``set_scales``), so they leave the mapping scale as it is.

Conv inputs are never unfolded with im2col: patches are a strided view of the padded input,
the abs-max of every patch is a max-pool of the channel-wise abs-max, and the only copy made is
the scaled DAC input that feeds the matrix product. Where every vector gets one input scale
(constant noise management, no bound management: ``pcm_static``, ``pcm_hwa``), the DAC acts on
each input value alone and the tile's products are convolutions of the quantized input map
(``analog.static_conv``), with the same random draws in the same order. Ranges learned from
calibration images are updated once per forward call, from the whole batch, as aihwkit does.
Only what the emulation covers is accepted:
``fast_unsupported`` lists the rest, and ``analog.evaluate`` then falls back to aihwkit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from analog.coverage import digital_layers, is_mappable
from analog.input_ranges import learned_input_ranges
from analog.periphery import IOModel, unsupported
from analog.static_conv import RowWeights, dac_map, out_factor, tile_outputs

# Input-vector floats per chunk on CPU. 4 MiB measured 1.2x faster than 1 MiB and 16 MiB
# chunks on the 2-core Xeon (fast path, rn:s16-d1r1c16-d1r1c32, 2,000 images, 1 thread).
CHUNK_ELEMENTS = 1 << 20
# Product floats per chunk on the static path (``analog.static_conv``); see the bench notes.
STATIC_CHUNK_ELEMENTS = 1 << 21


def layer_unsupported(module: nn.Module) -> str | None:
    if isinstance(module, nn.Linear):
        return None
    if isinstance(module, nn.Conv2d):
        if module.padding_mode != "zeros":
            return f"Conv2d padding_mode={module.padding_mode!r}"
        return None
    return f"{type(module).__name__} (the fast path emulates Linear and Conv2d)"


def fast_unsupported(model: nn.Module, rpu) -> list[str]:
    """Everything about ``model`` and ``rpu`` that keeps the fast path from emulating aihwkit."""
    layers = {r for m in model.modules() if is_mappable(m) and (r := layer_unsupported(m))}
    return unsupported(rpu) + sorted(layers)


def split_sizes(size: int, max_size: int) -> list[int]:
    """Tile split of one dimension, as aihwkit's ``TileModuleArray.get_split_sizes``."""
    if max_size <= 0:
        return [size]
    n = (size + max_size - 1) // max_size
    base, extra = divmod(size, n)
    return [base + (i < extra) for i in range(n)]


class FastTile:
    """One crossbar: mapped weights, their programmed/drifted copies and the output scales."""

    def __init__(self, weight: Tensor, rpu, io: IOModel):
        self.rpu, self.io = rpu, io
        mapping, scales = rpu.mapping, None
        if mapping.weight_scaling_omega and mapping.weight_scaling_omega > 0:
            # as TileWithPeriphery.apply_weight_scaling
            if mapping.weight_scaling_columnwise:
                wmax = weight.abs().amax(dim=1, keepdim=True)
            else:
                wmax = weight.abs().max().view(1, 1)
            scales = wmax / mapping.weight_scaling_omega
            scales[scales == 0.0] = 1.0
            weight = weight / scales
        self.reference = weight.contiguous()
        self.weight = self.reference
        self.scales = None if scales is None else scales.view(-1)
        self.alpha: Tensor | float = 1.0
        self.programmed: Tensor | None = None
        self.nu: list[Tensor] | None = None
        self.baseline: Tensor | None = None

    def _readout(self, gen: torch.Generator) -> Tensor:
        """Tile output for the compensation's read-out vectors, (n_vectors, out) like aihwkit."""
        eye = self.rpu.drift_compensation.get_readout_tensor(self.weight.shape[1])
        return self.io.mvm(eye.to(self.weight).T.unsqueeze(0), self.weight, gen)[0].T

    def program(self, gen: torch.Generator) -> None:
        self.programmed, self.nu = self.rpu.noise_model.apply_programming_noise(self.reference)
        self.weight, self.alpha = self.programmed, 1.0
        if self.rpu.drift_compensation is not None:
            self.baseline = self._baseline(gen)

    def _baseline(self, gen: torch.Generator) -> Tensor:
        """The compensation's reference read-out, right after programming."""
        comp = self.rpu.drift_compensation
        if type(comp).__name__ == "GlobalDriftCompensationWithExactReference":
            # aihwkit reads this reference from the unprogrammed weights, without the periphery
            eye = comp.get_readout_tensor(self.reference.shape[1]).to(self.reference)
            return comp.readout(eye @ self.reference.T)
        return comp.readout(self._readout(gen))

    def drift(self, t: float, gen: torch.Generator) -> None:
        if self.programmed is None:
            self.program(gen)
        self.weight = self.rpu.noise_model.apply_drift_noise(self.programmed, self.nu, t)
        if self.rpu.drift_compensation is not None:
            self.alpha = self.rpu.drift_compensation.apply(self._readout(gen), self.baseline)

    def out_scale(self) -> Tensor | float:
        """Digital factor per output: drift compensation times the mapping scale."""
        scale: Tensor | float = self.alpha if self.rpu.drift_compensation is not None else 1.0
        if isinstance(scale, Tensor):
            scale = scale.reshape(-1)
        return scale if self.scales is None else self.scales * scale

    def effective_weight(self) -> Tensor:
        scale = self.out_scale()
        return self.weight * (scale.view(-1, 1) if isinstance(scale, Tensor) else scale)


def conv_pads(layer: nn.Conv2d) -> tuple[int, int, int, int]:
    """``layer``'s zero padding as ``F.pad`` takes it (left, right, top, bottom)."""
    if isinstance(layer.padding, str):
        return layer._reversed_padding_repeated_twice if layer.padding == "same" else (0,) * 4
    return (layer.padding[1], layer.padding[1], layer.padding[0], layer.padding[0])


def patch_std(layer: nn.Conv2d, x: Tensor, c0: int, c1: int) -> float:
    """Sample std of every patch value of ``layer`` over channels [c0, c1) of its input ``x``
    (each input value counted once per patch that holds it, the padding's zeros once per patch
    that reaches them), from count-weighted sums in float64: one pass over the input, neither
    the kh*kw times larger patch view nor a padded copy."""
    (kh, kw), (dh, dw), (sh, sw) = layer.kernel_size, layer.dilation, layer.stride
    left, right, top, bottom = conv_pads(layer)
    size = (x.shape[2] + top + bottom, x.shape[3] + left + right)
    ho = (size[0] - dh * (kh - 1) - 1) // sh + 1
    wo = (size[1] - dw * (kw - 1) - 1) // sw + 1
    ones = x.new_ones(1, kh * kw, ho * wo)
    counts = F.fold(ones, size, (kh, kw), dilation=(dh, dw), stride=(sh, sw))[0, 0]
    counts = counts[top:top + x.shape[2], left:left + x.shape[3]].double()
    chans = x[:, c0:c1]
    s1 = (chans.sum(dim=(0, 1), dtype=torch.float64) * counts).sum()
    s2 = ((chans * chans).sum(dim=(0, 1), dtype=torch.float64) * counts).sum()
    n = x.shape[0] * (c1 - c0) * kh * kw * ho * wo
    if n < 2:
        return math.nan
    return math.sqrt(max(float(s2 - s1 * s1 / n) / (n - 1), 0.0))


class Patches:
    """Conv input vectors as a strided view (n, C, kh, kw, Ho, Wo) of the zero-padded input."""

    def __init__(self, layer: nn.Conv2d, x: Tensor):
        pads = conv_pads(layer)
        self.xp = F.pad(x, pads) if any(pads) else x
        (kh, kw), (dh, dw), (sh, sw) = layer.kernel_size, layer.dilation, layer.stride
        view = self.xp.unfold(2, dh * (kh - 1) + 1, sh).unfold(3, dw * (kw - 1) + 1, sw)
        view = view[..., ::dh, ::dw]  # (n, C, Ho, Wo, kh, kw)
        self.view = view.permute(0, 1, 4, 5, 2, 3)
        self.n, _, _, _, self.ho, self.wo = self.view.shape
        self.kernel, self.dilation, self.stride = (kh, kw), (dh, dw), (sh, sw)

    def scale(self, io: IOModel, c0: int, c1: int) -> Tensor:
        """Raw noise-management scale of each patch over channels [c0, c1): (n, 1, L)."""
        if io.nm not in ("ABS_MAX", "MAX"):  # constant: only the shape matters
            return io.nm_scale(self.xp.new_empty(self.n, 1, self.ho * self.wo))
        chans = self.xp[:, c0:c1]
        reduced = (chans.abs() if io.nm == "ABS_MAX" else chans).amax(dim=1, keepdim=True)
        return self.window_max(reduced).view(self.n, 1, -1)

    def nonzero(self, c0: int, c1: int) -> Tensor:
        """Whether each patch has a non-zero value in channels [c0, c1): (n, L) bool."""
        reduced = self.xp[:, c0:c1].abs().amax(dim=1, keepdim=True)
        return self.window_max(reduced).view(self.n, -1) > 0

    def window_max(self, reduced: Tensor) -> Tensor:
        """Maximum of a one-channel map ``reduced`` (n, 1, H, W) over every patch window."""
        # Separable: rows, then columns. On CPU 5x faster than max_pool2d on one channel.
        (kh, kw), (dh, dw), (sh, sw) = self.kernel, self.dilation, self.stride
        rows = reduced.unfold(2, dh * (kh - 1) + 1, sh)[..., ::dh].amax(-1)
        return rows.unfold(3, dw * (kw - 1) + 1, sw)[..., ::dw].amax(-1)

    def units(self, c0: int, c1: int, factor: Tensor) -> Tensor:
        """``patch * factor`` written once, contiguous as (n, (c1-c0)*kh*kw, L)."""
        part = self.view[:, c0:c1]
        out = torch.empty(part.shape, dtype=part.dtype, device=part.device)
        torch.mul(part, factor.view(self.n, 1, 1, 1, self.ho, self.wo), out=out)
        return out.view(self.n, -1, self.ho * self.wo)

    def vectors(self, c0: int, c1: int):
        def fetch(img: Tensor, pos: Tensor) -> Tensor:
            sub = self.view[img, c0:c1, :, :, pos // self.wo, pos % self.wo]  # (S, C', kh, kw)
            return sub.reshape(len(img), -1)

        return fetch

    def columns(self) -> Tensor:
        """The im2col matrix (n, C*kh*kw, L), for tile splits that cut through a channel."""
        return self.view.reshape(self.n, -1, self.ho * self.wo)


def _ranged_scale(raw: Tensor, r: float, io: IOModel) -> Tensor:
    """The noise management's raw scale of ``clip(x, -r, r) / r`` from that of ``x``: clipping
    and a positive factor commute with a max (constant management ignores the values)."""
    if io.nm not in ("ABS_MAX", "MAX"):
        return raw
    return raw.clamp(min=-r, max=r).div_(r)


def _out_hw(layer: nn.Conv2d, height: int, width: int) -> tuple[int, int]:
    if layer.padding == "same":
        return height, width
    pad = (0, 0) if layer.padding == "valid" else layer.padding
    return tuple((size + 2 * pad[i] - layer.dilation[i] * (layer.kernel_size[i] - 1) - 1)
                 // layer.stride[i] + 1 for i, size in enumerate((height, width)))


class FastLayer(nn.Module):
    """A Linear or Conv2d whose matrix-vector products run on emulated tiles."""

    def __init__(self, layer: nn.Linear | nn.Conv2d, rpu, io: IOModel, owner: FastAnalogModel):
        super().__init__()
        self.layer = layer  # keeps shapes, conv settings and the digital bias
        self._owner = [owner]  # a list, so the parent is not registered as a child module
        weight = layer.weight.detach().reshape(layer.weight.shape[0], -1)
        self.in_sizes = split_sizes(weight.shape[1], rpu.mapping.max_input_size)
        self.out_sizes = split_sizes(weight.shape[0], rpu.mapping.max_output_size)
        self.tiles = [[FastTile(w_out, rpu, io) for w_out in w_in.split(self.out_sizes, 0)]
                      for w_in in weight.split(self.in_sizes, 1)]
        self.io = io
        per_patch = layer.weight[0, 0].numel() if isinstance(layer, nn.Conv2d) else 1
        bounds = torch.tensor([0, *self.in_sizes]).cumsum(0).tolist()
        # tiles that start and end on channel boundaries can use the strided patch view
        self.channel_tiles = [(a // per_patch, b // per_patch)
                              for a, b in zip(bounds, bounds[1:], strict=False)]
        self.aligned = all(b % per_patch == 0 for b in bounds)
        # one scale for every input vector: run as convolutions of the quantized input map
        self.static = isinstance(layer, nn.Conv2d) and self.aligned and io.static_scale
        self.learned = learned_input_ranges(layer) is not None
        self.ranges = self._initial_ranges(layer, rpu)
        self.range_updates = [0] * len(self.in_sizes)

    def _initial_ranges(self, layer: nn.Module, rpu) -> list[float] | None:
        """Per tile row: the learned range, else aihwkit's ``init_value`` (None: no ranges)."""
        if not rpu.pre_post.input_range.enable:
            return None
        learned = learned_input_ranges(layer)
        if learned is None:
            return [float(rpu.pre_post.input_range.init_value)] * len(self.in_sizes)
        return [float(learned[min(i, len(learned) - 1)]) for i in range(len(self.in_sizes))]

    def _update_range(self, row: int, std: float) -> None:
        """aihwkit's ``apply_input_range(update_from_data=True)`` for one tile row, from the
        std of its inputs."""
        params = self.tiles[row][0].rpu.pre_post.input_range
        k = self.range_updates[row]
        if k >= params.init_from_data:
            return
        if std > 0.0:
            self.ranges[row] = abs((self.ranges[row] * k + params.init_std_alpha * std) / (k + 1))
            self.range_updates[row] = k + 1

    def all_tiles(self) -> list[FastTile]:
        return [tile for row in self.tiles for tile in row]

    def _row_stds(self, x: Tensor) -> list[float]:
        """The std of every tile row's input values for the batch ``x``."""
        if isinstance(self.layer, nn.Conv2d):
            if self.aligned:
                return [patch_std(self.layer, x, c0, c1) for c0, c1 in self.channel_tiles]
            parts = Patches(self.layer, x).columns().split(self.in_sizes, 1)
        else:
            parts = x.reshape(-1, self.layer.in_features).split(self.in_sizes, 1)
        return [float(part.std()) for part in parts]

    def _inputs(self, x: Tensor):
        """Per tile row: (raw scale, DAC-unit builder, vector fetcher) for the chunk ``x``."""
        if isinstance(self.layer, nn.Conv2d) and self.aligned:
            patches = Patches(self.layer, x)
            return [(patches.scale(self.io, c0, c1),
                     lambda f, c0=c0, c1=c1: patches.units(c0, c1, f), patches.vectors(c0, c1))
                    for c0, c1 in self.channel_tiles]
        if isinstance(self.layer, nn.Conv2d):
            cols = Patches(self.layer, x).columns()
        else:
            cols = x.reshape(-1, self.layer.in_features).T.unsqueeze(0)
        return [(self.io.nm_scale(part), lambda f, part=part: part * f,
                 lambda i, p, part=part: part[i, :, p])
                for part in cols.split(self.in_sizes, 1)]

    def _row_outputs(self, x: Tensor, weights: list[RowWeights] | None
                     ) -> Iterator[tuple[list[Tensor], Tensor | None]]:
        """Per tile row, the outputs (n, out_t, L) of its tiles for the chunk ``x`` and a
        factor still to apply to them (None: applied)."""
        gen, io = self._owner[0].generator, self.io
        if weights is not None:
            for row, (c0, c1) in enumerate(self.channel_tiles):
                r = None if self.ranges is None else self.ranges[row]
                q, s = dac_map(io, x[:, c0:c1], r, gen)
                yield tile_outputs(self.layer, io, q, weights[row], gen), out_factor(io, s)
            return
        for row, ((raw, build, fetch), tiles) in enumerate(zip(self._inputs(x), self.tiles,
                                                               strict=True)):
            if self.ranges is not None:
                # aihwkit clips to [-r, r] and divides by r *before* the tile, so the noise
                # management sees max |clip(x) / r| = min(max |x|, r) / r, not max |x|
                s, nonpositive = io.finish_scale(_ranged_scale(raw, self.ranges[row], io))
                bound = 1.0 / (s * io.i_unit)
                s = s * self.ranges[row]
                units = build(1.0 / (s * io.i_unit)).clamp_(min=-bound, max=bound)
            else:
                s, nonpositive = io.finish_scale(raw)
                units = build(1.0 / (s * io.i_unit))
            # rounding is idempotent, so tiles of one row may share the DAC buffer
            shared = len(tiles) == 1 or not (io.inp_sto or io.inp_noise > 0)
            yield [io.run(tile.weight, gen, s=s, units=units if shared else units.clone(),
                          vectors=fetch, nonpositive=nonpositive) for tile in tiles], None

    def _forward_chunk(self, x: Tensor, dest: Tensor | None,
                       weights: list[RowWeights] | None = None) -> Tensor:
        for row, (outputs, factor) in enumerate(self._row_outputs(x, weights)):
            start = 0
            for tile, y in zip(self.tiles[row], outputs, strict=True):
                if dest is None:
                    dest = y.new_empty(y.shape[0], sum(self.out_sizes), y.shape[2])
                rows = dest[:, start:start + y.shape[1]]
                scale = tile.out_scale() if factor is None else tile.out_scale() * factor
                scale = scale.view(1, -1, 1) if isinstance(scale, Tensor) else scale
                if row == 0:  # the first tile row covers every output: write, no zero-fill
                    torch.mul(y, scale, out=rows)
                elif isinstance(scale, Tensor):
                    rows.addcmul_(y, scale)
                else:
                    rows.add_(y, alpha=scale)
                start += y.shape[1]
        return dest

    def forward(self, x: Tensor) -> Tensor:
        if self.io.perfect:
            return self._perfect(x)
        if self.ranges is not None and self._owner[0].calibrating:
            # aihwkit updates a range once per forward call, from the whole batch
            for row, std in enumerate(self._row_stds(x)):
                self._update_range(row, std)
        layer = self.layer
        bias = None if layer.bias is None else layer.bias.view(1, -1, 1)
        if isinstance(layer, nn.Linear):
            out = self._forward_chunk(x, None)[0].T
            out = out.reshape(*x.shape[:-1], layer.out_features)
            return out if layer.bias is None else out + layer.bias
        # chunks of images keep the DAC buffer (or the products) and their passes in the CPU
        # caches
        h, w = _out_hw(layer, x.shape[2], x.shape[3])
        weights = None
        if self.static:
            positive = self.io.ir_drop > 0 and bool(x.amin() >= 0)  # then |q| = q
            weights = [RowWeights(self.io, layer, tiles, positive) for tiles in self.tiles]
            per_image = sum(len(rw.first) for rw in weights) * h * w
            budget = STATIC_CHUNK_ELEMENTS
        else:
            per_image, budget = layer.weight[0].numel() * h * w, CHUNK_ELEMENTS
        step = max(1, budget // per_image) if x.device.type == "cpu" else len(x)
        out = x.new_empty(len(x), layer.out_channels, h * w)
        for i in range(0, len(x), step):
            self._forward_chunk(x[i:i + step], out[i:i + step], weights)
        if bias is not None:
            out += bias
        return out.view(len(x), layer.out_channels, h, w)

    def _perfect(self, x: Tensor) -> Tensor:
        # Ideal periphery: the tiles add up to one dense matrix, so use the digital kernel.
        weight = torch.cat([torch.cat([t.effective_weight() for t in row], 0)
                            for row in self.tiles], 1)
        weight = weight.reshape(self.layer.weight.shape) * self.io.out_scale
        if isinstance(self.layer, nn.Linear):
            return F.linear(x, weight, self.layer.bias)
        return self.layer._conv_forward(x, weight, self.layer.bias)


class FastAnalogModel(nn.Module):
    """A digital model with every mappable layer on emulated aihwkit tiles.

    Mirrors the aihwkit model API used in drift experiments: ``program_analog_weights()``,
    ``drift_analog_weights(t)``; ``manual_seed(s)`` seeds the periphery (output noise) RNG.
    """

    def __init__(self, model: nn.Module, rpu, *, device: str | torch.device | None = None,
                 calib: Tensor | None = None, digital: list[str] | tuple[str, ...] = ()):
        super().__init__()
        reasons = fast_unsupported(model, rpu)
        if reasons:
            raise ValueError(f"fast analog path cannot emulate: {', '.join(reasons)}")
        keep = set(digital_layers(model, digital)) if digital else set()
        self.net = copy.deepcopy(model).eval()
        if device is not None:
            self.net.to(device)
        self.rpu = rpu
        self.io = IOModel.of(rpu.forward)
        self.generator = torch.Generator(device=next(self.net.parameters()).device)
        self.calibrating = False
        self._replace(self.net, keep, "")
        if any(layer.ranges is not None and not layer.learned for layer in self.layers()):
            if calib is None:
                raise ValueError("input ranges need calibration images (calib=) or HWA training")
            self.calibrate_input_ranges(calib.to(self.generator.device))

    def _replace(self, parent: nn.Module, keep: set[str], prefix: str) -> None:
        for name, child in parent.named_children():
            full = f"{prefix}{name}"
            if is_mappable(child) and full not in keep:
                setattr(parent, name, FastLayer(child, self.rpu, self.io, self))
            else:
                self._replace(child, keep, f"{full}.")

    @torch.no_grad()
    def calibrate_input_ranges(self, calib: Tensor, batch_size: int = 128) -> None:
        """aihwkit's ``init_from_data`` on the unprogrammed tiles, batch norms in eval mode
        (as ``analog.input_ranges.calibrate_input_ranges``)."""
        self.calibrating = True
        try:
            for start in range(0, len(calib), batch_size):
                self.net(calib[start:start + batch_size])
        finally:
            self.calibrating = False

    def layers(self) -> list[FastLayer]:
        return [m for m in self.net.modules() if isinstance(m, FastLayer)]

    def tiles(self) -> list[FastTile]:
        return [tile for layer in self.layers() for tile in layer.all_tiles()]

    def manual_seed(self, seed: int) -> None:
        self.generator.manual_seed(seed)

    @torch.no_grad()
    def program_analog_weights(self) -> None:
        for tile in self.tiles():
            tile.program(self.generator)

    @torch.no_grad()
    def drift_analog_weights(self, t_inference: float = 0.0) -> None:
        for tile in self.tiles():
            tile.drift(float(t_inference), self.generator)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)
