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


def _hwa_units(gain, seed_sd: float = 0.0, se: float = 0.002) -> pd.DataFrame:
    """Four archs: a digital unit and two HWA seeds each; HWA adds ``gain(i)``, its seeds sit
    ``seed_sd`` apart on either side."""
    from bench.hwtruth.hwa import SEEDS

    rows = []
    for i, arch in enumerate(ARCHS[:4]):
        base = 0.80 + 0.02 * i
        rows.append({"arch": arch, "kind": "digital", "seed": 0, "weights_acc_digital": 0.9,
                     "acc@1d": base, "acc@1d_se": se, "acc@30d": base - 0.05, "acc@30d_se": se})
        for s in SEEDS:
            shift = seed_sd if s == SEEDS[0] else -seed_sd
            rows.append({"arch": arch, "kind": "hwa", "seed": s, "weights_acc_digital": 0.9,
                         "hwa_seconds": 100.0, "acc@1d": base + gain(i) + shift,
                         "acc@1d_se": se, "acc@30d": base - 0.05 + gain(i) + shift,
                         "acc@30d_se": se})
    return pd.DataFrame(rows)


def test_hwa_gain_and_its_se_count_the_pooled_seed_noise() -> None:
    from bench.hwtruth import hwa_report
    from bench.hwtruth.hwa import plan as hwa_plan

    assert len({u.stem for u in hwa_plan(ARCHS)}) == 3 * len(ARCHS)
    quiet = hwa_report.table(_hwa_units(lambda i: 0.01 * i)).loc[list(ARCHS[:4])]
    assert quiet["gain@30d"].to_numpy() == pytest.approx([0.0, 0.01, 0.02, 0.03])
    # no seed spread beyond the programming noise: the gain's SE is the programming SEs alone
    assert quiet["gain@1d_se"].to_numpy() == pytest.approx([np.sqrt(0.002**2 / 2 + 0.002**2)] * 4)
    noisy_units = _hwa_units(lambda i: 0.01 * i, seed_sd=0.01)
    # two seeds 0.02 apart: variance 2e-4, less the programming variance 4e-6
    assert hwa_report.seed_var(noisy_units, "30d") == pytest.approx(2e-4 - 4e-6)
    noisy = hwa_report.table(noisy_units).loc[list(ARCHS[:4])]
    assert bool((noisy["gain@30d_se"] > quiet["gain@30d_se"] * 3).all())


def test_hwa_that_reverses_the_order_changes_the_front_and_tau() -> None:
    from bench.hwtruth import hwa_report

    t = hwa_report.table(_hwa_units(lambda i: -0.05 * i)).loc[list(ARCHS[:4])]
    # HWA costs the larger archs more than the 0.02 per arch they gain digitally
    t["latency_ms"] = [1.0, 2.0, 3.0, 4.0]
    assert hwa_report.front(t, "dig@30d") == set(ARCHS[:4])  # slower and better, each
    assert hwa_report.front(t, "hwa@30d") == {ARCHS[0]}
    tau, lo, hi = hwa_report.tau_interval(t["hwa@30d"].to_numpy(), np.full(4, 1e-6),
                                          t["dig@30d"].to_numpy(), np.full(4, 1e-6))
    assert tau == pytest.approx(-1.0) and lo == pytest.approx(-1.0) and hi == pytest.approx(-1.0)
