"""The on-device loader: coverage per epoch, seeding, sharding, augmentation."""

from __future__ import annotations

import pytest
import torch

from hwnas.common.errors import ConfigError
from hwnas.train.loader import Augment, DeviceLoader, augment_batch, random_translate


def _indexed(n: int, size: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """Images whose label is their index, so batches reveal which samples they hold."""
    x = torch.arange(n, dtype=torch.float32)[:, None, None, None].expand(n, 1, size, size)
    return x.contiguous(), torch.arange(n)


@pytest.mark.parametrize("drop_last", [False, True])
def test_each_sample_once_per_epoch(drop_last):
    x, y = _indexed(103)
    loader = DeviceLoader(x, y, batch_size=10, drop_last=drop_last, seed=1)
    for _ in range(3):
        seen = torch.cat([yb for _, yb in loader])
        assert len(seen) == len(torch.unique(seen))
        assert len(seen) == (100 if drop_last else 103)
        batches = [len(yb) for _, yb in loader]
        assert len(batches) == len(loader)
        if drop_last:
            assert set(batches) == {10}


def test_images_travel_with_their_labels():
    x, y = _indexed(50)
    for xb, yb in DeviceLoader(x, y, batch_size=7, seed=0):
        assert torch.equal(xb[:, 0, 0, 0].long(), yb)


def test_seeded_order_new_each_epoch():
    x, y = _indexed(64)
    a = [yb.clone() for _ in range(2) for _, yb in DeviceLoader(x, y, batch_size=64, seed=5)]
    b = [yb.clone() for _ in range(2) for _, yb in DeviceLoader(x, y, batch_size=64, seed=5)]
    assert all(torch.equal(p, q) for p, q in zip(a, b, strict=True))
    loader = DeviceLoader(x, y, batch_size=64, seed=5)
    first, second = (torch.cat([yb for _, yb in loader]) for _ in range(2))
    assert not torch.equal(first, second)
    other = torch.cat([yb for _, yb in DeviceLoader(x, y, batch_size=64, seed=6)])
    assert not torch.equal(first, other)


def test_no_shuffle_keeps_order():
    x, y = _indexed(20)
    seen = torch.cat([yb for _, yb in DeviceLoader(x, y, batch_size=8, shuffle=False,
                                                    drop_last=False)])
    assert torch.equal(seen, y)


def test_batch_larger_than_data_shrinks():
    x, y = _indexed(5)
    loader = DeviceLoader(x, y, batch_size=128)
    assert len(loader) == 1 and len(next(iter(loader))[1]) == 5


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_take_disjoint_shards_of_one_permutation(world):
    x, y = _indexed(31)
    shards = [torch.cat([yb for _, yb in DeviceLoader(x, y, batch_size=4, seed=2, rank=r,
                                                       world_size=world, drop_last=False)])
              for r in range(world)]
    union = torch.cat(shards)
    assert len(union) == len(torch.unique(union)) == (31 // world) * world
    assert len({len(s) for s in shards}) == 1


def test_translate_zero_is_identity_and_shift_moves_pixels():
    x = torch.randn(2, 3, 7, 7)
    assert torch.equal(random_translate(x, torch.zeros(2, 2, dtype=torch.long), 2), x)
    out = random_translate(x, torch.tensor([[1, 0], [0, -2]]), 2)
    assert torch.equal(out[0, :, :-1], x[0, :, 1:])  # content moved up by one row
    assert torch.equal(out[1, :, :, 2:], x[1, :, :, :-2])  # content moved right by two columns


@pytest.mark.parametrize("aug", [Augment(crop_pad=2), Augment(flip=True), Augment(4, True)])
def test_augmentation_keeps_shape_and_is_seeded(aug):
    x = torch.randn(16, 3, 8, 8)
    a = augment_batch(x, aug, torch.Generator().manual_seed(0))
    b = augment_batch(x, aug, torch.Generator().manual_seed(0))
    c = augment_batch(x, aug, torch.Generator().manual_seed(1))
    assert a.shape == x.shape and torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a, x)


def test_flip_only_mirrors():
    x = torch.randn(64, 1, 5, 5)
    out = augment_batch(x, Augment(flip=True), torch.Generator().manual_seed(0))
    same = (out == x).flatten(1).all(1)
    mirrored = (out == x.flip(3)).flatten(1).all(1)
    assert bool((same | mirrored).all()) and 0 < int(mirrored.sum()) < 64


def test_bad_loader_arguments_reported_together():
    x, y = _indexed(10)
    with pytest.raises(ConfigError) as err:
        DeviceLoader(x, y[:5], batch_size=0, rank=2, world_size=2)
    assert len(err.value.problems) == 3


@pytest.mark.gpu
def test_loader_on_cuda_matches_cpu():
    x, y = _indexed(40)
    aug = Augment(2, True)
    cpu = [xb for xb, _ in DeviceLoader(x, y, batch_size=8, augment=aug, seed=3)]
    gpu = [xb.cpu() for xb, _ in DeviceLoader(x, y, batch_size=8, augment=aug, seed=3,
                                              device="cuda")]
    assert all(torch.equal(a, b) for a, b in zip(cpu, gpu, strict=True))
