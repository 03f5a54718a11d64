"""Energy per inference from the analog cost model, next to the published chip figure it derives
from and next to the previous model (main at 637f7ed), for a few networks.

The previous model charged every tile touched by a layer a full 256x256 MVM (13.4 nJ, HERMES
one-phase peak) whatever its fill, used 256-row tiles while the accuracy model used 512, and
compared with a 45 nm digital MAC (0.23 pJ) without memory access. Its figures are recomputed
here from that rule (``old_*`` columns), the corrected ones come from ``hw_cost.analog_cost``.
Effective TOPS/W = 2 * analog MACs / analog energy, to hold against the chip's 9.76 TOPS/W.

    .venv/bin/python bench/analog_energy.py
"""

from __future__ import annotations

import argparse
import math

import torch

from hw_cost.analog_cost import AnalogFigures, analog_cost
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


def _old(cost: dict, fig: AnalogFigures) -> tuple[float, float]:
    """Previous rule: ceil-tiled 256x256, full MVM per tile; digital 0.23 pJ/MAC only."""
    tile_mvms = sum(layer["mvms"] * math.ceil(layer["rows"] / 256) * math.ceil(layer["cols"] / 256)
                    for layer in cost["layers"])
    return tile_mvms * fig.mvm_nj / 1e3, cost["digital_macs"] * 0.23e-6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hw", default="pcm")
    args = p.parse_args()
    torch.manual_seed(0)
    fig = AnalogFigures()
    print(f"hardware model {args.hw}; HERMES published: {fig.tops_per_w} TOPS/W one-phase, "
          f"{fig.mvm_nj:.2f} nJ per full 256x256 MVM\n")
    print("| network | MACs | analog MAC share | old analog uJ | new analog uJ | new digital "
          "part uJ | all-digital reference uJ | new eff. TOPS/W | old eff. TOPS/W |")
    print("|---|---|---|---|---|---|---|---|---|")
    for kind, arch, shape in NETS:
        cost = analog_cost(_model(kind, arch, shape), shape, hw=args.hw, per_layer=True)
        old_analog, _old_digital = _old(cost, fig)
        macs = cost["analog_macs"] + cost["digital_macs"]
        eff = 2 * cost["analog_macs"] / (cost["analog_energy_uj"] * 1e-6) / 1e12
        old_eff = 2 * cost["analog_macs"] / (old_analog * 1e-6) / 1e12
        print(f"| {arch} {shape} | {macs / 1e6:.2f} M | {cost['analog_mac_fraction']:.3f} | "
              f"{old_analog:.2f} | {cost['analog_energy_uj']:.2f} | "
              f"{cost['digital_energy_uj']:.3f} | {cost['digital_reference_energy_uj']:.2f} | "
              f"{eff:.2f} | {old_eff:.2f} |")
    prov = provenance("cpu")
    print(f"\nversions: {prov.get('versions')}; git {prov.get('git')}")


if __name__ == "__main__":
    main()
