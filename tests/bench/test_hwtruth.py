"""The hardware truth's arithmetic: variance shares, the equal-time bill, heuristics and the
regret simulation, on synthetic grids whose answers are known."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from bench.hwtruth import report
from bench.hwtruth.configs import ARCHS, CONFIGS
from bench.hwtruth.units import HwUnit, plan
from nas.study.hardware import parse_hardware


def _grid(acc, n_archs: int = 4) -> pd.DataFrame:
    """Every arch on every chip; ``acc(i_arch, i_chip)``; energy grows with both."""
    rows = []
    for (i, arch), (j, hw) in itertools.product(enumerate(ARCHS[:n_archs]), enumerate(CONFIGS)):
        rows.append({"arch": arch, "hardware": hw.code, "acc": acc(i, j), "acc_se": 0.001,
                     "analog_energy_uj": (1 + i) * (1 + j % 3), "params": 1000 * (i + 1),
                     "train_seconds": 100.0, "score_seconds": 10.0})
    return pd.DataFrame(rows)


def test_the_grid_has_eight_or_more_valid_distinct_chips() -> None:
    assert len(CONFIGS) >= 8 and len({c.code for c in CONFIGS}) == len(CONFIGS)
    for c in CONFIGS:  # each is a chip a hardware study could sample
        parse_hardware({"device": c.device, "adc_bits": c.adc_bits, "dac_bits": c.dac_bits,
                        "read_mode": c.read_mode, "digital": c.digital})
    units = plan(ARCHS)
    assert len({u.stem for u in units}) == len(units) == len(ARCHS) * len(CONFIGS)
    assert HwUnit(ARCHS[0], CONFIGS[0]).path.name.endswith(".json")


def test_additive_effects_have_no_interaction_and_shares_sum_to_one() -> None:
    s = report.shares(_grid(lambda i, j: 0.5 + 0.02 * i + 0.05 * (j % 2)), "acc")
    assert s["interaction"] == pytest.approx(0.0, abs=1e-12)
    assert s["arch"] + s["hardware"] + s["interaction"] == pytest.approx(1.0)
    only_arch = report.shares(_grid(lambda i, j: 0.5 + 0.02 * i), "acc")
    assert only_arch["arch"] == pytest.approx(1.0)


def test_a_second_chip_on_a_trained_arch_costs_only_its_scoring() -> None:
    bill = report.Bill(_grid(lambda i, j: 0.5), budget=125.0)
    assert bill.pay(ARCHS[0]) and bill.left == pytest.approx(15.0)  # 100 s training + 10 s
    assert bill.pay(ARCHS[0]) and bill.left == pytest.approx(5.0)   # scoring only
    assert not bill.pay(ARCHS[1]) and bill.left == pytest.approx(5.0)


def test_heuristics_take_their_chip_and_the_largest_arch() -> None:
    t = _grid(lambda i, j: 0.5)
    cells = report.heuristic_cells(t)
    assert set(t.loc[cells["max bits, all analog"], "hardware"]) == {CONFIGS[0].code}
    greedy = t.loc[cells["size-greedy arch, max bits"]]
    assert list(greedy.arch) == [ARCHS[3]] and list(greedy.hardware) == [CONFIGS[0].code]


def test_regret_is_seeded_and_an_all_seeing_search_reaches_the_whole_front() -> None:
    t = _grid(lambda i, j: 0.6 + 0.03 * i - 0.02 * (j % 3) + 0.01 * (j % 2))
    a = report.regret(t, seeds=2, budget=10_000.0, sd_train=0.0)
    b = report.regret(t, seeds=2, budget=10_000.0, sd_train=0.0)
    pd.testing.assert_frame_equal(a, b)
    full = a[a.searcher == "joint search (random)"].hv_fraction  # budget buys every cell
    assert np.allclose(full, 1.0)
    assert (a.hv_fraction <= 1.0 + 1e-9).all()


def test_a_budget_below_one_arch_buys_no_front_for_anyone() -> None:
    t = _grid(lambda i, j: 0.6 + 0.03 * i - 0.02 * (j % 3))
    res = report.regret(t, seeds=1, budget=50.0, sd_train=0.0)  # one arch: 100 s + 10 s
    assert (res.hv_fraction == 0.0).all()
