"""Every registered data set: shapes, dtypes, seeded disjoint splits, normalization, errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from datagen import make_idx_dir, make_image_folder, write_idx

from hwnas.common.errors import ConfigError
from hwnas.train import data as data_mod
from hwnas.train.data import load_data
from hwnas.train.datasets import get_dataset, list_datasets
from hwnas.train.datasets.idx import read_idx

DATASETS = list_datasets()


def test_registry_has_the_issue_data_sets():
    assert {"fashion_mnist", "digits", "cifar10", "imagefolder", "synthetic"} <= set(DATASETS)


@pytest.mark.parametrize("name", DATASETS)
def test_loads_with_declared_shape_and_types(name, dataset_kwargs):
    d = load_data(name, **dataset_kwargs(name))
    spec = get_dataset(name)
    c, h, w = d.input_shape
    assert (c, h) == (d.in_chans, d.img_size) and h == w
    if name != "imagefolder" and name != "synthetic":  # those two take shape options
        assert d.input_shape == spec.shape
        assert d.num_classes == spec.num_classes
    for x, y in ((d.x_train, d.y_train), (d.x_val, d.y_val), (d.x_test, d.y_test)):
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert x.shape[1:] == d.input_shape and len(x) == len(y)
        assert x.device.type == "cpu" and torch.isfinite(x).all()
        assert int(y.min()) >= 0 and int(y.max()) < d.num_classes
    assert len(d.y_test) > 0 and len(d.mean) == len(d.std) == d.in_chans
    assert len(torch.unique(d.y_train)) == d.num_classes  # every class is in the train split
    assert len(d.classes) == d.num_classes


@pytest.mark.parametrize("name", DATASETS)
def test_train_split_is_normalized(name, dataset_kwargs):
    d = load_data(name, **dataset_kwargs(name))
    per_channel = d.x_train.transpose(0, 1).reshape(d.in_chans, -1)
    assert torch.allclose(per_channel.mean(1), torch.zeros(d.in_chans), atol=1e-3)
    assert torch.allclose(per_channel.std(1), torch.ones(d.in_chans), atol=1e-3)


@pytest.mark.parametrize("name", DATASETS)
def test_split_is_seeded(name, dataset_kwargs):
    kwargs = dataset_kwargs(name)
    a, b = load_data(name, seed=3, **kwargs), load_data(name, seed=3, **kwargs)
    c = load_data(name, seed=4, **kwargs)
    assert torch.equal(a.x_val, b.x_val) and torch.equal(a.y_train, b.y_train)
    assert not torch.equal(a.x_val, c.x_val)
    assert torch.equal(a.y_test, c.y_test)  # the test split does not depend on the seed
    if "train_limit" in kwargs:  # the subset itself is drawn by the seed too
        assert len(a.y_train) == kwargs["train_limit"]
        assert not torch.equal(a.y_train, c.y_train)
    else:
        total = len(a.y_train) + len(a.y_val)
        assert len(a.y_val) == round(0.1 * total)


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("limit", [None, 50])
def test_split_indices_disjoint_and_complete(seed, limit):
    tr, val = data_mod._split(200, 0.25, limit, seed)
    assert len(val) == 50 and len(tr) == (limit or 150)  # the limit never shrinks validation
    assert len(set(tr) & set(val)) == 0 and max(np.concatenate([tr, val])) < 200


def test_splits_disjoint_in_the_data():
    # Synthetic images are continuous noise: equal rows can only be the same sample.
    d = load_data("synthetic", n_train=300, n_test=20, img_size=4, val_fraction=0.2)
    rows = {tuple(r.tolist()) for r in d.x_train.flatten(1)}
    assert not any(tuple(r.tolist()) in rows for r in d.x_val.flatten(1))


def test_limits_and_zero_val():
    d = load_data("digits", val_fraction=0.0)
    n = d.sizes()["train"]
    assert d.sizes()["val"] == 0 and d.x_val.shape[1:] == d.input_shape
    d = load_data("digits", train_limit=100, test_limit=30, val_fraction=0.2)
    assert d.sizes() == {"train": 100, "val": round(0.2 * n), "test": 30}


def test_decoded_arrays_are_cached_and_protected():
    data_mod._read.cache_clear()
    load_data("digits", seed=0)
    load_data("digits", seed=1)
    assert data_mod._read.cache_info().hits == 1
    raw = data_mod._read("digits", None, ())
    assert not raw.x_train.flags.writeable
    # Normalizing in place must never touch the cached arrays.
    before = raw.x_test.copy()
    load_data("digits")
    assert np.array_equal(before, raw.x_test)


def test_augmentation_defaults_per_data_set():
    assert get_dataset("fashion_mnist").flip and get_dataset("cifar10").flip
    assert not get_dataset("digits").flip  # a mirrored 2 is not a 2


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_from_a_given_root(tmp_path, gz):
    root = make_idx_dir(tmp_path / "fm", n_train=40, n_test=20, gz=gz)
    d = load_data("fashion_mnist", root=root, val_fraction=0.25)
    assert d.sizes() == {"train": 30, "val": 10, "test": 20}
    assert d.source == str(root)


def test_idx_round_trip(tmp_path):
    arr = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    assert np.array_equal(read_idx(write_idx(tmp_path / "a.gz", arr)), arr)
    assert np.array_equal(read_idx(write_idx(tmp_path / "a", arr)), arr)


def test_idx_bad_files(tmp_path):
    (tmp_path / "junk").write_bytes(b"\x50\x4b\x03\x04rest")
    with pytest.raises(ConfigError, match="IDX magic"):
        read_idx(tmp_path / "junk")
    path = write_idx(tmp_path / "short", np.zeros((4, 5), dtype=np.uint8))
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(ConfigError, match="truncated"):
        read_idx(path)


def test_unknown_data_set_lists_known_names():
    with pytest.raises(ConfigError) as err:
        load_data("mnistt")
    msg = str(err.value)
    assert "mnistt" in msg and "fashion_mnist" in msg and "hwnas data list" in msg


@pytest.mark.parametrize("name", ["fashion_mnist", "cifar10"])
def test_missing_directory_names_path_and_fix(name, tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(ConfigError) as err:
        load_data(name, root=missing)
    msg = str(err.value)
    assert str(missing) in msg and "--data-root" in msg
    if name == "fashion_mnist":
        assert "apt-get install dataset-fashion-mnist" in msg


def test_missing_file_in_existing_directory(tmp_path):
    root = make_idx_dir(tmp_path / "fm")
    (root / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(ConfigError, match="t10k-labels-idx1-ubyte"):
        load_data("fashion_mnist", root=root)


def test_imagefolder_layouts(tmp_path):
    root = make_image_folder(tmp_path / "v", classes=("a", "b"), test_name="val")
    d = load_data("imagefolder", root=root, img_size=16, channels=1, val_fraction=0.0)
    assert d.input_shape == (1, 16, 16) and d.classes == ("a", "b") and len(d.y_test) == 4
    (tmp_path / "only_train" / "train" / "a").mkdir(parents=True)
    with pytest.raises(ConfigError, match="test"):
        load_data("imagefolder", root=tmp_path / "only_train")
    with pytest.raises(ConfigError) as err:
        load_data("imagefolder", img_size=2, channels=2)
    assert len(err.value.problems) == 3 and "needs a root" in str(err.value)


def test_every_bad_argument_reported_at_once():
    with pytest.raises(ConfigError) as err:
        load_data("digits", root="/tmp/digits", val_fraction=1.5, train_limit=0, colour="blue")
    assert len(err.value.problems) == 4
    msg = str(err.value)
    for part in ("val_fraction", "train_limit", "colour", "takes no root", "Fix:"):
        assert part in msg


def test_bad_reader_options_are_reported_together():
    with pytest.raises(ConfigError) as err:
        load_data("synthetic", num_classes=1, img_size=2)
    assert len(err.value.problems) == 2


def test_fashion_mnist_real_files_full_size():
    d = load_data("fashion_mnist")
    assert d.sizes() == {"train": 54000, "val": 6000, "test": 10000}
    assert torch.bincount(d.y_test).tolist() == [1000] * 10
    assert d.classes[0] == "T-shirt/top" and d.source == "/usr/share/datasets/fashion-mnist"
    assert d.mean[0] == pytest.approx(0.286, abs=0.002)  # the known Fashion-MNIST pixel mean
