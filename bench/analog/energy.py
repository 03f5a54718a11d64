"""Energy per inference from the analog cost model, with the assumptions it rests on in view.

For a few networks and analog hardware models: the estimate (``hw_cost.analog_cost``), its
low/high range over the two unsourced assumptions (ADC share of a core MVM 0.3-0.7, ADC energy
per bit 2**(bits-8) or bits/8), the cores the network needs against HERMES' 64, and the
all-digital reference, which is a lower bound (arithmetic and one SRAM read per operand), so
the ratio between the two is not a finding. Effective TOPS/W = 2 * analog MACs / analog energy,
to hold against the chip's 9.76 TOPS/W (one-phase peak).

``--sensitivity`` adds, per network, the energy at each ADC share and scaling, in the
four-phase read mode, and with one ADC conversion per tile instead of one per core slice
(what the model charged before a tile taller than a core paid per core).

    .venv/bin/python -m bench.analog.energy --sensitivity
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import torch

from analog.fast import split_sizes
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
        shapes = [(r, c) for r in split_sizes(layer["rows"], fig.tile_rows)
                  for c in split_sizes(layer["cols"], fig.tile_cols)]
        nj += layer["mvms"] * sum(fig.slice_mvm_nj(r, c) for r, c in shapes)
    return nj / 1e3


def _main_row(name: str, hw: str, cost: dict) -> str:
    macs = cost["analog_macs"] + cost["digital_macs"]
    eff = 2 * cost["analog_macs"] / (cost["analog_energy_uj"] * 1e-6) / 1e12
    span = cost["energy_uj_range"]
    fits = "yes" if cost["fits_on_chip"] else f"no: {cost['chips_needed']} chips"
    return (f"| {name} | {hw} | {macs / 1e6:.2f} M | {cost['analog_mac_fraction']:.3f} | "
            f"{cost['cores_used']} ({fits}) | {cost['assumptions']['adc_bits']} | "
            f"{cost['energy_uj']:.2f} | {span['low']:.2f}-{span['high']:.2f} | "
            f"{cost['digital_energy_uj']:.3f} | >= {cost['digital_reference_energy_uj']:.2f} | "
            f"{eff:.2f} |")


def _sensitivity_row(name: str, hw: str, model, shape, cost: dict, fig: AnalogFigures) -> str:
    cells = []
    for share in (ADC_SHARE_RANGE[0], fig.adc_share, ADC_SHARE_RANGE[1]):
        for scaling in ADC_SCALINGS:
            other = replace(fig, adc_share=share, adc_scaling=scaling)
            cells.append(analog_cost(model, shape, figures=other)["energy_uj"])
    four = analog_cost(model, shape, figures=replace(fig, read_mode="four_phase"))["energy_uj"]
    per_tile = _per_tile_adc_uj(cost, fig) + cost["digital_energy_uj"]
    return (f"| {name} | {hw} | " + " | ".join(f"{c:.2f}" for c in cells)
            + f" | {four:.2f} | {per_tile:.2f} ({100 * (cost['energy_uj'] / per_tile - 1):+.0f}%"
            " per core slice) |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hw", default="pcm,pcm_hermes,pcm_static",
                   help="analog hardware models, comma-separated (tile size and ADC bits)")
    p.add_argument("--sensitivity", action="store_true",
                   help="also the energy at each assumption, four-phase, and per-tile ADCs")
    args = p.parse_args()
    hws = [h.strip() for h in args.hw.split(",") if h.strip()]
    base = AnalogFigures()
    print(f"HERMES published: {base.tops_per_w} TOPS/W one-phase ({base.mvm_nj:.2f} nJ per "
          f"full 256x256 core MVM), {base.tops_per_w_four_phase} TOPS/W four-phase; "
          f"{base.cores} cores. Read mode: one-phase for every model (aihwkit's signed MVM).\n")
    print("| network | hw | MACs | analog MAC share | cores (fits?) | ADC bits | energy uJ | "
          "range uJ | digital part uJ | all-digital uJ (lower bound) | eff. TOPS/W |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for kind, arch, shape in NETS:
        torch.manual_seed(0)
        model = _model(kind, arch, shape)
        for hw in hws:
            cost = analog_cost(model, shape, hw=hw, per_layer=True)
            print(_main_row(f"{arch} {shape}", hw, cost))
            rows.append((f"{arch} {shape}", hw, model, shape, cost, figures_for(hw, base)))
    print(f"\nrange: ADC share {ADC_SHARE_RANGE[0]}-{ADC_SHARE_RANGE[1]} x ADC scaling "
          f"{'/'.join(ADC_SCALINGS)}; a model needing more than {base.cores} cores is priced "
          "as if spread over several chips, without reprogramming (a lower bound for one chip)")
    if args.sensitivity:
        heads = [f"share {s}, {k}" for s in (ADC_SHARE_RANGE[0], base.adc_share,
                                              ADC_SHARE_RANGE[1]) for k in ADC_SCALINGS]
        print("\nenergy uJ under each assumption (everything else as above)\n")
        print("| network | hw | " + " | ".join(heads) + " | four-phase | one ADC pass per tile |")
        print("|---|---|" + "---|" * (len(heads) + 2))
        for row in rows:
            print(_sensitivity_row(*row))
    prov = provenance("cpu")
    print(f"\nversions: {prov.get('versions')}; git {prov.get('git')}")


if __name__ == "__main__":
    main()
