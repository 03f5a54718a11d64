"""Energy per inference from the analog cost model, with the assumptions it rests on in view.

For a few networks and analog hardware models: the estimate (``hw_cost.analog_cost``), its
low/high range over the two unsourced assumptions (ADC share of a core MVM 0.3-0.7, ADC energy
per bit 2**(bits-8) or bits/8), the cores the network needs against HERMES' 64, and the
all-digital reference, which is a lower bound (arithmetic and one SRAM read per operand), so
the ratio between the two is not a finding. Effective TOPS/W = 2 * analog MACs / analog energy,
to hold against the chip's 9.76 TOPS/W (one-phase peak). Multi-pair conductance converters
(``--converters``, on ``--converter-hw``) are charged one unit cell per pair
(``hw_cost.analog_cells.CELL_RULE``).

``--sensitivity`` adds, per network, the energy at each ADC share and scaling, in the
four-phase read mode, with a weight's pairs converted apart, and with one ADC conversion per
tile instead of one per core slice. The bottom-up check (``hw_cost.analog_bottom_up``: one MVM
from ISAAC's published component powers beside the top-down estimate) is always printed.
The report goes to stdout and to ``--out``.

    .venv/bin/python -m bench.analog.energy --sensitivity
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch

from analog.fast import split_sizes
from bench import RESULTS, command_line
from bench._results import publish
from hw_cost.analog_bottom_up import ISAAC_MW, ISAAC_SOURCE, compare, per_read_pj
from hw_cost.analog_cells import CELL_RULE
from hw_cost.analog_cost import (
    ADC_SCALINGS,
    ADC_SHARE_RANGE,
    AnalogFigures,
    analog_cost,
    figures_for,
)
from hwnas.common.provenance import provenance
from search_spaces import get_space

NETS = (("resnet", "rn:s16-d1r1c16-d1r1c32", (1, 28, 28)),
        ("resnet", "rn:s32-d2r1c32-d2r2c64-d1r3c128", (1, 28, 28)),
        ("timm", "resnet18", (3, 32, 32)))


def _model(kind: str, arch: str, shape: tuple[int, ...]):
    if kind == "timm":
        import timm

        return timm.create_model(arch, pretrained=False, num_classes=10, in_chans=shape[0])
    return get_space(kind).build(arch, in_chans=shape[0], num_classes=10, img_size=shape[1])


def _per_tile_adc_uj(cost: dict, fig: AnalogFigures) -> float:
    """Analog energy if a tile converted its columns once, however many cores it spans."""
    nj = 0.0
    for layer in cost["layers"]:
        shapes = [fig.cells_shape(r, c) for r in split_sizes(layer["rows"], fig.tile_rows)
                  for c in split_sizes(layer["cols"], fig.tile_cols)]
        nj += layer["mvms"] * sum(fig.slice_mvm_nj(r, c) for r, c in shapes)
    return nj / 1e3


def _label(hw: str, options: dict) -> str:
    return hw + "".join(f", {k} {v}" for k, v in options.items())


def _main_row(name: str, label: str, cost: dict) -> str:
    macs = cost["analog_macs"] + cost["digital_macs"]
    eff = 2 * cost["analog_macs"] / (cost["analog_energy_uj"] * 1e-6) / 1e12
    span = cost["energy_uj_range"]
    fits = "yes" if cost["fits_on_chip"] else f"no: {cost['chips_needed']} chips"
    return (f"| {name} | {label} | {macs / 1e6:.2f} M | {cost['analog_mac_fraction']:.3f} | "
            f"{cost['cells_per_weight']} ({cost['devices_per_weight']}) | "
            f"{cost['cores_used']} ({fits}) | {cost['assumptions']['adc_bits']} | "
            f"{cost['energy_uj']:.2f} | {span['low']:.2f}-{span['high']:.2f} | "
            f"{cost['digital_energy_uj']:.3f} | >= {cost['digital_reference_energy_uj']:.2f} | "
            f"{eff:.2f} |")


def _sensitivity_row(name: str, label: str, model, shape, cost: dict,
                     fig: AnalogFigures) -> str:
    def energy(f: AnalogFigures) -> float:
        return analog_cost(model, shape, figures=f)["energy_uj"]

    cells = [energy(replace(fig, adc_share=share, adc_scaling=scaling))
             for share in (ADC_SHARE_RANGE[0], fig.adc_share, ADC_SHARE_RANGE[1])
             for scaling in ADC_SCALINGS]
    four = energy(replace(fig, read_mode="four_phase"))
    apart = energy(replace(fig, pair_readout="separate"))
    per_tile = _per_tile_adc_uj(cost, fig) + cost["digital_energy_uj"]
    return (f"| {name} | {label} | " + " | ".join(f"{c:.2f}" for c in cells)
            + f" | {four:.2f} | {apart:.2f} | {per_tile:.2f} "
            f"({100 * (cost['energy_uj'] / per_tile - 1):+.0f}% per core slice) |")


def _configs(args: argparse.Namespace) -> list[tuple[str, dict]]:
    hws = [(h.strip(), {}) for h in args.hw.split(",") if h.strip()]
    return hws + [(args.converter_hw, {"converter": c.strip()})
                  for c in args.converters.split(",") if c.strip()]


def _estimates(args: argparse.Namespace, base: AnalogFigures) -> tuple[list[str], list]:
    lines = ["| network | hw | MACs | analog MAC share | cells (devices) per weight | "
             "cores (fits?) | ADC bits | energy uJ | range uJ | digital part uJ | "
             "all-digital uJ (lower bound) | eff. TOPS/W |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    rows = []
    for kind, arch, shape in NETS:
        torch.manual_seed(0)
        model = _model(kind, arch, shape)
        for hw, options in _configs(args):
            cost = analog_cost(model, shape, hw=hw, hw_options=options, per_layer=True)
            label = _label(hw, options)
            lines.append(_main_row(f"{arch} {shape}", label, cost))
            rows.append((f"{arch} {shape}", label, model, shape, cost,
                         figures_for(hw, base, options)))
    return lines, rows


def _converter_lines(rows: list) -> list[str]:
    seen = {}
    for *_, cost, _fig in rows:
        seen.setdefault(cost["converter"], (cost["cells_per_weight"],
                                            cost["devices_per_weight"]))
    return ["| converter (as charged) | cells per weight | devices per weight |", "|---|---|---|",
            *(f"| {c} | {n} | {d} |" for c, (n, d) in seen.items())]


def _sensitivity(rows: list, base: AnalogFigures) -> list[str]:
    heads = [f"share {s}, {k}" for s in (ADC_SHARE_RANGE[0], base.adc_share,
                                          ADC_SHARE_RANGE[1]) for k in ADC_SCALINGS]
    return ["| network | hw | " + " | ".join(heads)
            + " | four-phase | pairs converted apart | one ADC pass per tile |",
            "|---|---|" + "---|" * (len(heads) + 3),
            *(_sensitivity_row(*row) for row in rows)]


def _bottom_up(sizes: tuple[int, ...]) -> list[str]:
    parts = ["| ISAAC component | power mW | crossbars served | pJ per 100 ns crossbar read | "
             "as listed |", "|---|---|---|---|---|",
             *(f"| {k} | {mw:g} | {n} | {per_read_pj(k):.3g} | {what} |"
               for k, (mw, n, what) in ISAAC_MW.items())]
    table = ["| MVM | estimate | node | energy nJ | TOPS/W | ADC conversions | pJ per "
             "conversion | top-down / this | same at 14 nm (x14/32) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        cmp = compare(n, n)
        top, ops = cmp["top_down"], cmp["ops"]
        lo, hi = top["nj_range"]
        span = "a full core: any adc_share" if hi - lo < 1e-9 else \
            f"adc_share 0.5; 0.3-0.7: {lo:.2f}-{hi:.2f} nJ"
        table.append(f"| {n}x{n} | top-down: `analog_cost` (HERMES-derived, {span}) | "
                     f"{top['node_nm']} nm | {top['nj']:.2f} | "
                     f"{ops / top['nj'] / 1e3:.2f} | {top['conversions']} | "
                     f"{top['pj_per_conversion']:.1f} | 1 | 1 |")
        table += [f"| {n}x{n} | bottom-up: {b['name']} | {b['node_nm']} nm | {b['nj']:.2f} | "
                  f"{ops / b['nj'] / 1e3:.2f} | {b['conversions']} | "
                  f"{cmp['adc_pj_per_conversion']:.2f} | {b['ratio']:.2f} | "
                  f"{b['ratio_at_14nm']:.2f} |" for b in cmp["bottom_up"]]
    return ["Published components (" + ISAAC_SOURCE + "); per read = power / crossbars "
            "served x 100 ns:", "", *parts, "",
            "One MVM at 8-bit inputs, weights and ADC, each way (`hw_cost.analog_bottom_up`). "
            "ISAAC dataflow: inputs bit-serial (8 reads), 8-bit weights on four 2-bit cells, "
            "every read converting 128 columns per crossbar. One pass: the top-down model's "
            "dataflow (one analog weight per cell, one conversion per output column) on "
            "ISAAC's parts, DAC/S+H/array charged as 8 read slots. Ratio > 1: the top-down "
            "estimate is the higher.", "", *table]


def report(args: argparse.Namespace) -> str:
    base = AnalogFigures(read_mode="one_phase")  # as the result file states: the chip's peak
    est, rows = _estimates(args, base)
    prov = provenance("cpu")
    text = [
        "## Analog energy model: estimates, assumptions, converters, bottom-up check", "",
        f"Command: `{command_line()}` (estimates, not measurements: no timing, so the host's "
        f"load does not enter; untrained networks, batch 1). git {prov.get('git')}; "
        f"versions {prov.get('versions')}.", "",
        f"HERMES published (Le Gallo et al., Nat. Electron. 2023, 14 nm): {base.tops_per_w} "
        f"TOPS/W one-phase ({base.mvm_nj:.2f} nJ per full 256x256 core MVM), "
        f"{base.tops_per_w_four_phase} TOPS/W four-phase; {base.cores} cores. Read mode: "
        "one-phase for every model (aihwkit's signed MVM), whatever its devices per weight.",
        "", *est, "",
        f"Range: ADC share {ADC_SHARE_RANGE[0]}-{ADC_SHARE_RANGE[1]} x ADC scaling "
        f"{'/'.join(ADC_SCALINGS)}. A model needing more than {base.cores} cores is priced "
        "as if spread over several chips, without reprogramming (a lower bound for one chip).",
        "", "### Devices per weight", "", f"Rule (`hw_cost.analog_cells.CELL_RULE`): "
        f"{CELL_RULE}.", "", *_converter_lines(rows)]
    if args.sensitivity:
        text += ["", "### Energy under each assumption (uJ; everything else as above)", "",
                 *_sensitivity(rows, base)]
    text += ["", "### Bottom-up check: ISAAC's components vs the HERMES-derived estimate", "",
             *_bottom_up((128, 256))]
    return "\n".join(text)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hw", default="pcm,pcm_hermes,pcm_static",
                   help="analog hardware models, comma-separated (tile size and ADC bits)")
    p.add_argument("--converters", default="dual:1/3,pairs:1/2/4",
                   help="conductance converters priced on --converter-hw, comma-separated")
    p.add_argument("--converter-hw", default="pcm_static")
    p.add_argument("--sensitivity", action="store_true",
                   help="also the energy at each assumption, four-phase, pairs converted "
                        "apart, and per-tile ADCs")
    p.add_argument("--out", default=str(RESULTS / "analog_energy.md"))
    args = p.parse_args()
    publish(report(args), args.out)


if __name__ == "__main__":
    main()
