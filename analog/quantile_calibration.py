"""aihwkit's post-training input-range calibration (``CACHE_QUANTILE``), run on the digital layers.

``aihwkit.inference.calibration.calibrate_input_ranges`` converts the model, gives every tile a
perfect periphery and sends the calibration images through it. A hook on each tile caches the
tile's non-zero input vectors: the cache and the batch's vectors are shuffled with
``torch.randperm`` (torch's global generator) and the first ``max_samples`` are kept. The range
is the ``quantile`` of every value left in the cache. While this runs, each tile still clips its
inputs at its initial range (``init_value``) and a perfect tile computes the digital product.

Here the same hooks sit on the digital layers, which compute on their clipped inputs. A batch's
vectors are never unfolded: conv patches are a strided view (``analog.fast.Patches``), the
non-zero test is a windowed maximum, and only the vectors drawn into the cache are gathered.
``randperm`` is called with the same sizes in the same order (every tile, also those whose range
is not read), so the same vectors are kept and the ranges are aihwkit's, up to float rounding in
the layers before. It costs about one digital pass over the images instead of a pass through
aihwkit's tiles with the whole batch's vectors copied into every cache.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from analog.fast import Patches, split_sizes

Fetch = Callable[[Tensor], Tensor]
"""Row indices (among all of a batch's vectors, in aihwkit's order) -> those vectors."""


def emulated(layer: nn.Module) -> bool:
    """Layers whose tile inputs are laid out here as aihwkit lays them out."""
    return type(layer) in (nn.Linear, nn.Conv2d)


def _conv_rows(layer: nn.Conv2d, x: Tensor) -> Callable[[int, int], tuple[Tensor, Fetch]]:
    """For tile inputs [a, b) of every conv patch: the non-zero mask (n * L,) and a fetcher,
    in aihwkit's order (image-major, ``unfold(x).transpose(-1, -2)``)."""
    p = Patches(layer, x)
    xp = p.xp.contiguous()
    n, chans, height, width = xp.shape
    (kh, kw), (dh, dw), (sh, sw) = p.kernel, p.dilation, p.stride
    # offset of every patch value from its patch's corner, in unfold's (c, i, j) order
    taps = (torch.arange(chans).view(-1, 1, 1) * (height * width)
            + torch.arange(kh).view(1, -1, 1) * (dh * width)
            + torch.arange(kw).view(1, 1, -1) * dw).reshape(-1).to(xp.device)

    def rows(a: int, b: int) -> tuple[Tensor, Fetch]:
        per = kh * kw
        if a % per == 0 and b % per == 0:
            mask = p.nonzero(a // per, b // per)
        else:  # the split cuts through a channel's kernel: unfold the indicator (rare sizes)
            ind = F.unfold((xp != 0).to(x.dtype), p.kernel, dilation=p.dilation, stride=p.stride)
            mask = ind[:, a:b].amax(dim=1) > 0

        def fetch(idx: Tensor) -> Tensor:
            img, pos = idx // (p.ho * p.wo), idx % (p.ho * p.wo)
            corner = img * (chans * height * width) + (pos // p.wo) * (sh * width) \
                + (pos % p.wo) * sw
            return xp.view(-1)[corner.view(-1, 1) + taps[a:b].view(1, -1)]

        return mask.reshape(-1), fetch

    return rows


def _linear_rows(x: Tensor) -> Callable[[int, int], tuple[Tensor, Fetch]]:
    flat = x.reshape(-1, x.shape[-1])

    def rows(a: int, b: int) -> tuple[Tensor, Fetch]:
        part = flat[:, a:b]
        return (part != 0).any(dim=1), lambda idx: part[idx]

    return rows


class _LayerCache:
    """The vector caches of one layer's tiles: rows kept for each tile row's first tile (whose
    range the stored ranges read), and every tile's cache size (what ``randperm`` is given)."""

    def __init__(self, layer: nn.Module, rpu, max_samples: int):
        width = layer.weight[0].numel()
        self.in_sizes = split_sizes(width, rpu.mapping.max_input_size)
        self.per_row = len(split_sizes(layer.weight.shape[0], rpu.mapping.max_output_size))
        self.max_samples = max_samples
        self.rows: list[Tensor | None] = [None] * len(self.in_sizes)
        self.sizes = [[0] * self.per_row for _ in self.in_sizes]

    def add(self, layer: nn.Module, x: Tensor) -> None:
        split = _conv_rows(layer, x) if isinstance(layer, nn.Conv2d) else _linear_rows(x)
        start = 0
        for i, size in enumerate(self.in_sizes):
            mask, fetch = split(start, start + size)
            start += size
            found = mask.nonzero().squeeze(1)
            for j in range(self.per_row):  # aihwkit: every output tile of this input split
                total = self.sizes[i][j] + len(found)
                keep = torch.randperm(total)[:self.max_samples]
                self.sizes[i][j] = len(keep)
                if j == 0:
                    self.rows[i] = self._kept(self.rows[i], keep, found, fetch)

    @staticmethod
    def _kept(old: Tensor | None, keep: Tensor, found: Tensor, fetch: Fetch) -> Tensor:
        """``cat([old, new])[keep]`` without building the concatenation."""
        n_old = 0 if old is None else len(old)
        new = fetch(found[(keep[keep >= n_old] - n_old).to(found.device)]).detach().cpu()
        if old is None:
            return new
        out = new.new_empty(len(keep), new.shape[1])
        out[keep < n_old] = old[keep[keep < n_old]]
        out[keep >= n_old] = new
        return out

    def ranges(self, quantile: float, init_value: float) -> Tensor:
        """One range per tile row; a row that saw no non-zero vector keeps ``init_value``."""
        return torch.tensor([init_value if rows is None or rows.numel() == 0
                             else float(rows.flatten().quantile(quantile))
                             for rows in self.rows])


@torch.no_grad()
def quantile_ranges_torch(model: nn.Module, layers: dict[str, nn.Module], rpu, calib: Tensor, *,
                          quantile: float, max_samples: int, seed: int,
                          batch_size: int) -> dict[str, Tensor]:
    """Per-tile-row ranges of ``layers`` (name -> layer of ``model``, in eval mode) as aihwkit's
    ``CACHE_QUANTILE`` calibration sets them; ``seed`` seeds torch's global generator, as the
    caller seeds it around aihwkit's (the generator's state is restored afterwards)."""
    init = float(rpu.pre_post.input_range.init_value)
    out_scale = float(rpu.forward.out_scale)
    caches = {name: _LayerCache(layer, rpu, max_samples) for name, layer in layers.items()}
    handles = []
    for name, layer in layers.items():
        def pre(module, args, cache=caches[name]):
            cache.add(module, args[0])
            return (args[0].clamp(-abs(init), abs(init)), *args[1:])

        handles.append(layer.register_forward_pre_hook(pre))
        if out_scale != 1.0:  # a perfect tile applies forward.out_scale, the digital bias not
            handles.append(layer.register_forward_hook(_out_scaled(out_scale)))
    # the model may sit on an accelerator while the calibration images stay on the host
    device = next((p.device for p in model.parameters()), calib.device)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            for batch in calib.split(batch_size):
                model(batch.to(device))
    finally:
        for handle in handles:
            handle.remove()
    return {name: cache.ranges(quantile, init) for name, cache in caches.items()}


def _out_scaled(factor: float):
    def hook(module, args, output):
        bias = module.bias
        if bias is None:
            return output * factor
        view = bias.view(-1, *([1] * (output.dim() - 2))) if output.dim() > 2 else bias
        return (output - view) * factor + view

    return hook
