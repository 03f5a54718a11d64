"""AnalogNAS-Bench read as a table: its keys map to valid ``nb201`` arch strings one to one, the
op order is the data's own (chance for all-none, NB201's best cell on top), the split is a fixed
half, and the unpickler admits nothing but the package's two record classes."""

from __future__ import annotations

import io
import pickle

import pytest

from bench.analognas.table import _Unpickler, arch_of, load, split
from search_spaces import get_space


@pytest.fixture(scope="module")
def table():  # noqa: ANN201
    return load()


def test_every_key_is_a_distinct_valid_arch(table) -> None:  # noqa: ANN001
    space = get_space("nb201")
    assert len(table) == 15_625 and table["arch"].nunique() == 15_625
    for arch in table["arch"].sample(200, random_state=0):
        assert space.encode(space.decode(arch)) == arch


def test_the_op_order_is_the_datas(table) -> None:  # noqa: ANN001
    rows = table.set_index("key")
    assert rows.loc[[(1,) * 6], "digital"].item() == pytest.approx(10.0)  # all none: chance
    best = table.loc[table["digital"].idxmax(), "arch"]
    assert best.count("nor_conv_3x3") >= 4 and best.split("+")[2].startswith("|skip_connect~0|")
    assert arch_of((2, 2, 0, 2, 2, 2)) == ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+"
                                            "|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|")
    assert (table["hwa_30d"] <= table["hwa_t0"] + 1).mean() > 0.99  # drift loses accuracy


def test_the_split_is_two_fixed_disjoint_halves(table) -> None:  # noqa: ANN001
    dev, test = split(table, 2026)
    again, _ = split(table, 2026)
    assert set(dev["arch"]) == set(again["arch"]) and not set(dev["arch"]) & set(test["arch"])
    assert len(dev) + len(test) == len(table)


def test_the_unpickler_refuses_any_other_class() -> None:
    with pytest.raises(pickle.UnpicklingError, match="may hold no posix.system"):
        _Unpickler(io.BytesIO(pickle.dumps(__import__("os").system))).load()
