"""The bottom-up MVM energy from ISAAC's components: the published figures hold together, a hand
count of one MVM, and the top-down side is the energy model's own estimate."""

from __future__ import annotations

import pytest
from torch import nn

from hw_cost.analog_bottom_up import (
    IMA_PARTS,
    ISAAC_MW,
    adc_pj_per_conversion,
    compare,
    isaac_mvm,
    one_pass_mvm,
    per_read_pj,
)
from hw_cost.analog_cost import AnalogFigures, analog_cost


def test_the_published_component_powers_add_up():
    # the IMA parts sum to one IMA, 12 IMAs to the tile's 289 mW, ADCs to 58 % of the tile
    ima = sum(ISAAC_MW[p][0] for p in IMA_PARTS)
    assert 12 * ima == pytest.approx(289.0, abs=0.1)
    assert 12 * ISAAC_MW["adc"][0] / 330.0 == pytest.approx(0.58, abs=0.005)
    # one ADC (16 mW / 8) converts 128 columns per 100 ns read
    assert adc_pj_per_conversion() == pytest.approx(2.0 * 100 / 128)


def test_isaac_dataflow_by_hand():
    # 128 x 128 weights at 8 bits on 2-bit cells: 512 columns = 4 crossbars; 8-bit inputs one
    # bit per read: 32 reads, each converting 128 columns
    mvm = isaac_mvm(128, 128)
    assert (mvm.reads, mvm.conversions) == (32, 32 * 128)
    per_read = 200 + 50 + 0.125 + 30 + 2.5 + 18.375  # pJ: ADC, DAC, S+H, array, S+A, registers
    assert mvm.nj == pytest.approx(32 * per_read / 1e3)
    with_tile = isaac_mvm(128, 128, periphery=True)
    assert with_tile.nj - mvm.nj == pytest.approx(32 * 41.0 / 96 * 100 / 1e3)
    assert isaac_mvm(256, 256).reads == 4 * mvm.reads  # 2 x 8 crossbars


def test_one_pass_counts_one_conversion_per_column():
    mvm = one_pass_mvm(128, 128)
    assert mvm.conversions == 128
    assert mvm.parts_nj["adc"] == pytest.approx(128 * adc_pj_per_conversion() / 1e3)
    assert mvm.parts_nj["array"] == pytest.approx(8 * per_read_pj("array") / 1e3)


def test_top_down_is_the_energy_models_estimate():
    fig = AnalogFigures(read_mode="one_phase")  # the anchor: the chip's published MVM
    out = compare(128, 128)
    direct = analog_cost(nn.Linear(128, 128, bias=False), (128,), figures=fig)
    assert out["top_down"]["nj"] == pytest.approx(direct["analog_energy_uj"] * 1e3)
    # half a core's columns and a quarter of its cells: 0.5 * 1/2 + 0.5 * 1/4 of a full MVM
    assert out["top_down"]["nj"] == pytest.approx(0.375 * fig.mvm_nj)
    assert compare(256, 256)["top_down"]["nj"] == pytest.approx(fig.mvm_nj)  # the anchor
    isaac = out["bottom_up"][0]
    assert isaac["ratio"] == pytest.approx(out["top_down"]["nj"] / isaac["nj"])
    assert isaac["ratio_at_14nm"] == pytest.approx(isaac["ratio"] * 32 / 14)
