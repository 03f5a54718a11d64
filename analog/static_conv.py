"""Conv tiles whose inputs all get one scale, run as convolutions of the quantized input map.

With constant (or no) noise management, no bound management, no input noise and rounding to
nearest (``IOModel.static_scale``: ``pcm_static``, ``pcm_hwa``), a tile row scales every input
vector by the same factor, so its DAC acts on each input value alone. Quantizing the layer's
input map once therefore gives the quantized values of every patch, and each product of the
tile (the MVM, IR drop's ``(W * position) x`` and ``|W| |x|``, the read noise's ``|W| x^2``)
is a convolution of that map: oneDNN's kernels, no patch copy. The DAC units are the same
float values the patch path computes, and the outputs leave through the same ADC chain
(``IOModel.analog_out``) with the same random draws in the same order, so the two paths agree
up to float summation order. A tile row's tiles (output splits) share one convolution.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from analog.periphery import IOModel


def dac_map(io: IOModel, x: Tensor, r: float | None,
            gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """DAC units of every value of the input map ``x`` and the vectors' scale ``s``, computed
    as ``FastLayer`` scales conv patches (float32 scalars, the same operations in the same
    order): inputs clipped to ``[-r, r]`` and divided by ``r`` when the tile has a range."""
    s = x.new_full((1,), io.nm_const)
    if r is None:
        return io.dac(x * (1.0 / (s * io.i_unit)), gen), s
    bound = 1.0 / (s * io.i_unit)
    s = s * r
    q = (x * (1.0 / (s * io.i_unit))).clamp_(min=-bound, max=bound)
    if io.inp_step > 0 and float(bound.round()) <= io.inp_bound / io.i_unit:
        return q.round_(), s  # rounding keeps |q| <= round(bound): the DAC's clip is a no-op
    return io.dac(q, gen), s


class RowWeights:
    """A tile row's convolution weights, built once per forward call: the convolution of the
    DAC-unit map ``q`` gives every tile's ``y`` (then ``z`` and, for a non-negative map, ``a``),
    that of ``|q|`` gives ``a`` otherwise, and that of ``q^2`` the read-noise variance."""

    def __init__(self, io: IOModel, layer: nn.Conv2d, tiles, positive: bool):
        first, absq, sq = [], [], []
        for tile in tiles:
            main, pos, absw, read = io.product_weights(tile.weight)
            first += [main] if pos is None else [main, pos] + ([absw] if positive else [])
            if pos is not None and not positive:
                absq.append(absw)
            if read is not None:
                sq.append(read)
        self.sizes = [t.weight.shape[0] for t in tiles]
        shape = (-1, tiles[0].weight.shape[1] // (layer.kernel_size[0] * layer.kernel_size[1]),
                 *layer.kernel_size)
        self.first = torch.cat(first).view(shape)
        self.absq = torch.cat(absq).view(shape) if absq else None
        self.sq = torch.cat(sq).view(shape) if sq else None
        # the output noise's variance rides on the read-noise convolution as its bias
        self.sq_bias = None if self.sq is None else self.sq.new_full((len(self.sq),), io.out_var)
        self.positive = positive
        self.per_tile = len(self.first) // sum(self.sizes)  # y; y, z; or y, z, a


def tile_outputs(layer: nn.Conv2d, io: IOModel, q: Tensor, weights: RowWeights,
                 gen: torch.Generator) -> list[Tensor]:
    """Each tile's ADC output (n, out_t, Ho * Wo) for the DAC-unit map ``q`` of its row's
    channels: ``IOModel.run``'s output for the same vectors, before its factor ``s * o_unit *
    out_scale`` (``out_factor``), which the caller folds into the tile's output scale."""
    def conv(inp: Tensor, w: Tensor, bias: Tensor | None = None) -> Tensor:
        out = F.conv2d(inp, w, bias, layer.stride, layer.padding, layer.dilation)
        return out.flatten(2)

    y_all = conv(q, weights.first)
    a_all = conv(q.abs(), weights.absq) if weights.absq is not None else None
    v_all = conv(q * q, weights.sq, weights.sq_bias) if weights.sq is not None else None
    out, start, v_start, per_tile = [], 0, 0, weights.per_tile
    for k, size in enumerate(weights.sizes):
        parts = y_all[:, start:start + per_tile * size].split(size, dim=1)
        start += per_tile * size
        y, z, a = parts[0], None, None
        if io.ir_drop > 0:
            z = parts[1]
            a = parts[2] if weights.positive else a_all[:, k * size:(k + 1) * size]
        var = None
        if v_all is not None:
            rows = size if io.w_noise_type == "PCM_READ" else 1
            var, v_start = v_all[:, v_start:v_start + rows], v_start + rows
        y = io.analog_out(y, gen, a=a, z=z, var=var)
        out.append(io.clip_out(y))
    return out


def out_factor(io: IOModel, s: Tensor) -> Tensor:
    """The digital factor of the row's ADC outputs (``IOModel.run`` multiplies by it)."""
    return s * (io.o_unit * io.out_scale)
