"""Devices per weight in the energy model: aihwkit's converters, cells, cores and energy against a
cell-by-cell count, the converter recorded with every estimate, bad input."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch import nn

from analog.fast import split_sizes
from hw_cost.analog_cells import CELL_RULE, converter_cells
from hw_cost.analog_cost import AnalogFigures, analog_cost
from hwnas.common.errors import ConfigError

# two pairs (F 1 and 3) whose sum runs -20, -10, 0, 10, 20 uS: invertible, as aihwkit requires
CUSTOM = {"f_lst": [1, 3], "g_lst": [[0, 0, 0, 4, 5], [5, 4, 0, 0, 0],
                                     [0, 0, 0, 2, 5], [5, 2, 0, 0, 0]]}


def _converters():
    from aihwkit.inference import (
        CustomPairConductanceConverter,
        DualPairConductanceConverter,
        NPairConductanceConverter,
        SingleDeviceConductanceConverter,
        SinglePairConductanceConverter,
    )

    return [SinglePairConductanceConverter(), DualPairConductanceConverter(f_lst=[1.0, 3.0]),
            NPairConductanceConverter(f_lst=[1.0, 2.0, 4.0]),
            CustomPairConductanceConverter(f_lst=[1.0, 3.0], g_lst=CUSTOM["g_lst"]),
            SingleDeviceConductanceConverter()]


@pytest.mark.parametrize("index", range(5))
def test_devices_per_weight_match_aihwkits_own_conversion(index):
    conv = _converters()[index]
    conductances, _ = conv.convert_to_conductances(torch.randn(4, 6))
    # aihwkit returns one tensor per device (a bare tensor for its single-device converter)
    devices = len(conductances) if isinstance(conductances, list) else 1
    cells = converter_cells(conv)
    assert cells.devices == devices
    assert cells.cells == max(devices // 2, 1)  # one cell per (g+, g-) pair


def test_hermes_devices_share_one_cell():
    from aihwkit.inference import HermesNoiseModel

    from hw_cost.analog_cells import cells_of

    cells = cells_of(HermesNoiseModel(num_devices=2))
    assert (cells.cells, cells.devices) == (1, 4)


def test_an_unknown_converter_is_a_clear_error():
    # aihwkit's Fusion converter models one conductance of a pair whose zero device is not
    # programmed: its devices per weight are not the model's to guess
    from aihwkit.inference.converter.fusion import FusionConductanceConverter

    with pytest.raises(ConfigError, match="converter: the energy model knows the devices per "
                       "weight .*'FusionConductanceConverter'.*Fix: use one of those"):
        converter_cells(FusionConductanceConverter())


def _brute_force(layers: list[tuple[int, int, int]], fig: AnalogFigures) -> tuple[float, int]:
    """Energy (nJ) and cores from placing every cell of every weight, one at a time.

    ``layers``: (rows, cols, mvms). A weight's pair p sits in row p*r + i of its column
    (shared readout) or in column p*c + j of its row (separate readout); each core converts the
    columns it holds and pays array energy for the cells it holds."""
    n, core = fig.cells_per_weight, fig.core_rows
    total, cores = 0.0, 0
    for rows, cols, mvms in layers:
        for r in split_sizes(rows, fig.tile_rows):
            for c in split_sizes(cols, fig.tile_cols):
                used: dict[tuple[int, int], tuple[set, int]] = {}
                for p in range(n):
                    for i in range(r):
                        for j in range(c):
                            y, x = (p * r + i, j) if fig.pair_readout == "shared" \
                                else (i, p * c + j)
                            key = (y // core, x // core)
                            columns, count = used.get(key, (set(), 0))
                            columns.add(x)
                            used[key] = (columns, count + 1)
                cores += len(used)
                for columns, count in used.values():
                    adc = fig.adc_share * fig.mvm_nj * len(columns) / core * fig.adc_factor
                    total += mvms * (adc + (1 - fig.adc_share) * fig.mvm_nj * count / core**2)
    return total, cores


def _model() -> nn.Module:
    # conv 3 -> 40 (27 x 40 matrix, 16 positions) and a 300 -> 40 linear (two 150-row tiles)
    return nn.Sequential(nn.Conv2d(3, 40, 3, padding=1), nn.AdaptiveAvgPool2d(2), nn.Flatten(),
                         nn.Linear(160, 300), nn.Linear(300, 40))


@pytest.mark.parametrize("readout", ["shared", "separate"])
@pytest.mark.parametrize("cells", [1, 2, 3])
def test_energy_and_cores_follow_a_cell_by_cell_count(cells, readout):
    fig = AnalogFigures(tile_rows=256, tile_cols=256, cells_per_weight=cells,
                        pair_readout=readout)
    cost = analog_cost(_model(), (3, 4, 4), figures=fig, per_layer=True)
    energy, cores = _brute_force([(27, 40, 16), (160, 300, 1), (300, 40, 1)], fig)
    assert cost["cores_used"] == cores
    assert cost["analog_energy_uj"] * 1e3 == pytest.approx(energy)
    weights = 27 * 40 + 160 * 300 + 300 * 40
    assert cost["cells_used"] == cells * weights


def test_more_pairs_cost_more_and_separate_reads_convert_more():
    fig = AnalogFigures(tile_rows=256, tile_cols=256)
    energy = {n: analog_cost(_model(), (3, 4, 4), figures=replace(fig, cells_per_weight=n))
              ["analog_energy_uj"] for n in (1, 2, 3)}
    assert energy[1] < energy[2] < energy[3]
    # one core slice, a 27-row conv: shared stacks 2 x 27 rows under 40 columns (40
    # conversions); separate puts 80 columns side by side (80 conversions)
    one = {r: replace(fig, cells_per_weight=2, pair_readout=r) for r in ("shared", "separate")}
    adc = fig.adc_share * fig.mvm_nj / 256
    assert one["separate"].tile_mvm_nj(*one["separate"].cells_shape(27, 40)) - \
        one["shared"].tile_mvm_nj(*one["shared"].cells_shape(27, 40)) == pytest.approx(40 * adc)


def test_the_estimate_records_the_converter_it_charged():
    plain = analog_cost(_model(), (3, 4, 4), hw="pcm_static")
    dual = analog_cost(_model(), (3, 4, 4), hw="pcm_static", hw_options={"converter": "dual:1/3"})
    assert (plain["converter"], plain["cells_per_weight"], plain["devices_per_weight"]) == \
        ("SinglePairConductanceConverter", 1, 2)
    assert (dual["converter"], dual["cells_per_weight"], dual["devices_per_weight"]) == \
        ("DualPairConductanceConverter(f=[1.0, 3.0])", 2, 4)
    assert dual["assumptions"]["converter"] == dual["converter"]
    assert dual["assumptions"]["cells"] == CELL_RULE and dual["pair_readout"] == "shared"
    assert dual["cells_used"] == 2 * plain["cells_used"]
    assert dual["cores_used"] > plain["cores_used"]
    assert dual["analog_energy_uj"] > plain["analog_energy_uj"]
    hermes = analog_cost(_model(), (3, 4, 4), hw="pcm_hermes")  # 4 devices, one HERMES cell
    assert (hermes["cells_per_weight"], hermes["devices_per_weight"]) == (1, 4)
    assert analog_cost(_model(), (3, 4, 4), hw="pcm", hw_options={"converter": CUSTOM})[
        "cells_per_weight"] == 2


def test_a_converter_outside_the_grammar_is_refused():
    with pytest.raises(ConfigError, match="converter must be single, dual:F1/F2 or pairs"):
        analog_cost(_model(), (3, 4, 4), hw="pcm", hw_options={"converter": "triple:1/2/3"})


@pytest.mark.parametrize(("field", "value"), [("cells_per_weight", 0),
                                              ("cells_per_weight", 1.5),
                                              ("pair_readout", "interleaved")])
def test_bad_cell_figures_are_clear_errors(field, value):
    with pytest.raises(ConfigError, match=f"{field}: must be"):
        AnalogFigures(**{field: value})


def test_cores_count_matches_the_tile_and_core_arithmetic():
    # a 512 x 100 weight matrix on 256-row tiles: two tiles, each 256 x 100; with three pairs
    # stacked (shared) each tile is 768 cell rows: three cores per tile
    fig = AnalogFigures(tile_rows=256, tile_cols=256, cells_per_weight=3)
    cost = analog_cost(nn.Sequential(nn.Linear(512, 100)), (512,), figures=fig)
    assert cost["cores_used"] == 2 * math.ceil(3 * 256 / 256)
    apart = analog_cost(nn.Sequential(nn.Linear(512, 100)), (512,),
                        figures=replace(fig, pair_readout="separate"))
    assert apart["cores_used"] == 2 * math.ceil(3 * 100 / 256)
