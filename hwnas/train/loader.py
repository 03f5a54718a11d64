"""An on-device loader: the whole data set lives on the training device, batches are index
slices of it and augmentation runs batched on the device (as airbench does). No DataLoader
workers: small images are then bound by the model, not by Python-side decoding.

Random draws come from two CPU generators derived from ``seed`` (``hwnas.common.seeds``): one
for the batch order, one for augmentation (translations, flips), so a run reproduces on any
device, changing the augmentation never reorders the batches, and ranks of a distributed run
that share the seed share the permutation and take disjoint shards of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.seeds import stream_seed


@dataclass(frozen=True)
class Augment:
    """Label-preserving augmentation: random translate by up to ``crop_pad`` pixels (the
    pad-and-random-crop of CIFAR training) and, when ``flip``, a random horizontal flip."""

    crop_pad: int = 0
    flip: bool = False

    @property
    def active(self) -> bool:
        return self.crop_pad > 0 or self.flip


def random_translate(x: torch.Tensor, shifts: torch.Tensor, pad: int) -> torch.Tensor:
    """Shift each image of ``x`` (N, C, H, W) by ``shifts`` (N, 2) in ``[-pad, pad]`` pixels.

    Equivalent to reflect-padding by ``pad`` and cropping at a per-image offset, done as one
    gather. Reflection (not zeros) because zero in normalized space is a grey border that the
    original images never have.
    """
    n, _, h, w = x.shape
    padded = F.pad(x, (pad, pad, pad, pad), mode="reflect").permute(0, 2, 3, 1)
    off = (shifts + pad).to(x.device)
    rows = (off[:, 0, None] + torch.arange(h, device=x.device))[:, :, None]
    cols = (off[:, 1, None] + torch.arange(w, device=x.device))[:, None, :]
    batch = torch.arange(n, device=x.device)[:, None, None]
    return padded[batch, rows, cols].permute(0, 3, 1, 2).contiguous()


def augment_batch(x: torch.Tensor, aug: Augment, gen: torch.Generator) -> torch.Tensor:
    """Apply ``aug`` to a batch with draws from ``gen`` (CPU); the shape is unchanged."""
    n = x.shape[0]
    pad = min(aug.crop_pad, x.shape[-1] - 1, x.shape[-2] - 1)  # reflect needs pad < size
    if pad > 0:
        shifts = torch.randint(-pad, pad + 1, (n, 2), generator=gen)
        x = random_translate(x, shifts, pad)
    if aug.flip:
        mask = (torch.rand(n, generator=gen) < 0.5).to(x.device)
        x = torch.where(mask[:, None, None, None], x.flip(3), x)
    return x


class DeviceLoader:
    """Yields ``(x, y)`` batches of a data set held on ``device``; one epoch per iteration.

    Every epoch draws a fresh permutation from the seeded generator. With ``drop_last`` (the
    default for training) every batch has ``batch_size`` images, so batch norm never sees a
    batch of one; a batch size above the data set size shrinks to it. ``rank``/``world_size``
    shard each epoch's permutation for distributed training.
    """

    def __init__(self, x: torch.Tensor, y: torch.Tensor, *, batch_size: int, device: str = "cpu",
                 shuffle: bool = True, drop_last: bool = True, augment: Augment | None = None,
                 seed: int = 0, rank: int = 0, world_size: int = 1):
        _check(x, y, batch_size, rank, world_size)
        self.x = x.to(device)
        self.y = y.to(device)
        self.device = device
        self.shard = len(y) // world_size
        self.batch_size = min(batch_size, self.shard)
        self.shuffle, self.drop_last = shuffle, drop_last
        self.augment = augment or Augment()
        self.rank, self.world_size = rank, world_size
        self.gen = torch.Generator().manual_seed(stream_seed(seed, "order"))
        self.aug_gen = torch.Generator().manual_seed(stream_seed(seed, "augment", rank))
        self.epoch = 0

    def rng_state(self) -> dict[str, torch.Tensor]:
        """Both generators' states (a resumed epoch replays its draws from here)."""
        return {"order": self.gen.get_state(), "augment": self.aug_gen.get_state()}

    def set_rng_state(self, state: dict[str, torch.Tensor]) -> None:
        self.gen.set_state(state["order"])
        self.aug_gen.set_state(state["augment"])

    def __len__(self) -> int:
        full, rest = divmod(self.shard, self.batch_size)
        return full + (1 if rest and not self.drop_last else 0)

    def _indices(self) -> torch.Tensor:
        n = len(self.y)
        order = torch.randperm(n, generator=self.gen) if self.shuffle else torch.arange(n)
        # Equal shards, like DistributedSampler with drop_last: the tail of the permutation
        # (fewer than world_size images) is skipped this epoch.
        return order[self.rank:self.shard * self.world_size:self.world_size]

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        idx = self._indices().to(self.device)
        self.epoch += 1
        for b in range(len(self)):
            sel = idx[b * self.batch_size:(b + 1) * self.batch_size]
            x = self.x[sel]
            if self.augment.active:
                x = augment_batch(x, self.augment, self.aug_gen)
            yield x, self.y[sel]


def _check(x: torch.Tensor, y: torch.Tensor, batch_size: int, rank: int, world_size: int) -> None:
    problems = []
    if x.ndim != 4 or len(x) != len(y):
        problems.append(Problem("loader data", "x must be (N, C, H, W) with one label per image",
                                (tuple(x.shape), tuple(y.shape)), "pass DataSplits tensors"))
    if not (isinstance(batch_size, int) and batch_size >= 1):
        problems.append(Problem("batch_size", "must be an int >= 1", batch_size, "pass e.g. 128"))
    if not (0 <= rank < world_size) or len(y) < world_size:
        problems.append(Problem("rank/world_size", "need 0 <= rank < world_size <= N images",
                                (rank, world_size, len(y)), "check the launcher's environment"))
    if problems:
        raise ConfigError(problems)
