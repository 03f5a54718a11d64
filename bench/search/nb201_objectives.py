"""More objectives for the 15,625-cell NB201 table: edge-device latency, params, analog energy.

``bench/search/nb201_table.py`` gives an accuracy proxy and the measured CPU latency. The sampler
benchmark (``bench/search/quality.py``) needs objective pairs of different shapes, so this adds,
for the same network (N=5 cells per stage, C=16, 1x28x28 input, batch 1):

* ``edge_latency_ms``: a roofline model of a small edge accelerator (``EDGE``: 1 TFLOP/s,
  25.6 GB/s, 20 us per layer launch). Per leaf layer: ``max(flops / peak, bytes / bandwidth)``
  plus the launch cost, summed. It ranks cells differently from the CPU (launch-bound: every
  non-``none`` op costs a launch whatever its FLOPs), which is the point of a second device;
* ``params``: trainable parameters;
* ``analog_energy_uj``: ``hw_cost.analog_cost`` energy per image (PCM crossbars, 256x256 tiles).

All three are sums over layers, and each of the 15 identical cells' layers depends on one edge's
op only, so each is an exact linear function of the per-edge one-hot ops. They are computed on
``--sample`` real networks, fitted by least squares, checked (the largest residual is printed and
must be ~0) and predicted for every cell.

    python -m bench.search.nb201_objectives       # writes bench/data/nb201_objectives.parquet
"""

from __future__ import annotations

import argparse
import random

import numpy as np
import pandas as pd
import torch
from torch import nn

from bench.search.nb201_table import DATA, all_archs, one_hot
from bench.search.nb201_table import OUT as BASE

OUT = DATA / "nb201_objectives.parquet"
EDGE = {"peak_flops": 1.0e12, "bytes_per_s": 25.6e9, "launch_s": 20e-6}


def _layer_seconds(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    params = sum(p.numel() for p in module.parameters(recurse=False))
    flops = 0
    if isinstance(module, nn.Conv2d):
        k = module.kernel_size[0] * module.kernel_size[1]
        flops = 2 * y.numel() * (module.in_channels // module.groups) * k
    elif isinstance(module, nn.Linear):
        flops = 2 * module.in_features * module.out_features
    elif isinstance(module, nn.AvgPool2d):
        flops = y.numel() * 9
    else:
        flops = y.numel()
    nbytes = 4 * (x.numel() + y.numel() + params)
    return max(flops / EDGE["peak_flops"], nbytes / EDGE["bytes_per_s"]) + EDGE["launch_s"]


def edge_latency_ms(model: nn.Module, x: torch.Tensor) -> float:
    total = [0.0]

    def hook(mod: nn.Module, inp: tuple, out: torch.Tensor) -> None:
        if isinstance(out, torch.Tensor) and inp and isinstance(inp[0], torch.Tensor):
            total[0] += _layer_seconds(mod, inp[0], out)

    leaves = [m for m in model.modules() if not list(m.children())]
    handles = [m.register_forward_hook(hook) for m in leaves]
    with torch.inference_mode():
        model(x)
    for h in handles:
        h.remove()
    return 1e3 * total[0]


def measure(archs: list[str]) -> pd.DataFrame:
    from hw_cost.analog_cost import analog_cost
    from search_spaces.nb201 import NB201Space

    space, x, rows = NB201Space(), torch.randn(1, 1, 28, 28), []
    for a in archs:
        model = space.build(a, in_chans=1, num_classes=10, img_size=28).eval()
        rows.append({"arch": a, "edge_latency_ms": edge_latency_ms(model, x),
                     "params": float(sum(p.numel() for p in model.parameters())),
                     "analog_energy_uj": float(analog_cost(model, (1, 28, 28))["energy_uj"])})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=int, default=120)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    archs = all_archs()
    sample = measure(random.Random(0).sample(archs, args.sample))
    x_s = np.hstack([one_hot(list(sample.arch)), np.ones((len(sample), 1))])
    x_all = np.hstack([one_hot(archs), np.ones((len(archs), 1))])
    table = pd.read_parquet(BASE)[["arch", "acc_digital", "latency_ms"]].set_index("arch")
    table = table.loc[archs].reset_index()
    for col in ("edge_latency_ms", "params", "analog_energy_uj"):
        coef, *_ = np.linalg.lstsq(x_s, sample[col].to_numpy(), rcond=None)
        resid = np.abs(x_s @ coef - sample[col].to_numpy()) / sample[col].abs().max()
        print(f"{col}: exact-additivity check, largest residual {resid.max():.2e} of the max")
        table[col] = x_all @ coef
    table.to_parquet(OUT, index=False)
    print(f"wrote {OUT} ({len(table)} rows, {OUT.stat().st_size / 1e6:.2f} MB)")
    print(table.describe().T.to_string())
    print(table.drop(columns="arch").corr(method="spearman").round(2).to_string())


if __name__ == "__main__":
    main()
