"""The NAS-Bench-201 cell space, built as the benchmark's real network."""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import nn

from search_spaces import choices, layout
from search_spaces.base import ArchError, TableSpace, register_space
from search_spaces.stats import reference_stats

OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
NODES = 4  # node 0 is the cell input; node j sums one op from every node i < j
EDGES = tuple((j, i) for j in range(1, NODES) for i in range(j))
_NODE = re.compile(r"\|(?:[a-z0-9_]+~\d+\|)+")


def edge_name(j: int, i: int) -> str:
    """Optuna parameter (and spec key) of the edge into node ``j`` from node ``i``."""
    return f"node{j}_in{i}"




class ReLUConvBN(nn.Sequential):
    def __init__(self, cin: int, cout: int, k: int, stride: int = 1):
        super().__init__(nn.ReLU(inplace=False),
                         nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout))


class Zero(nn.Module):
    """The ``none`` op: the benchmark network still runs what follows it, on zeros."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.mul(0.0)


def make_op(op: str, c: int) -> nn.Module:
    if op == "none":
        return Zero()
    if op == "skip_connect":
        return nn.Identity()
    if op == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    return ReLUConvBN(c, c, 1 if op == "nor_conv_1x1" else 3)


class Cell(nn.Module):
    def __init__(self, ops: dict[tuple[int, int], str], c: int):
        super().__init__()
        self.edges = nn.ModuleDict({f"{j}_{i}": make_op(ops[j, i], c) for j, i in EDGES})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes = [x]
        for j in range(1, NODES):
            nodes.append(sum(self.edges[f"{j}_{i}"](nodes[i]) for i in range(j)))
        return nodes[-1]


class Reduction(nn.Module):
    """The benchmark's residual basic block between stages (stride 2 where the map halves)."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv_a, self.conv_b = ReLUConvBN(cin, cout, 3, stride), ReLUConvBN(cout, cout, 3)
        if stride == 2:  # ceil_mode keeps odd sides in step with the padded stride-2 conv
            self.shortcut = nn.Sequential(nn.AvgPool2d(2, 2, ceil_mode=True),
                                          nn.Conv2d(cin, cout, 1, bias=False))
        else:
            self.shortcut = ReLUConvBN(cin, cout, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.shortcut(x) + self.conv_b(self.conv_a(x))


class NB201Net(nn.Module):
    def __init__(self, layers: list[nn.Module], in_chans: int, c: int, c_last: int,
                 num_classes: int):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(in_chans, c, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(c))
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(c_last), nn.ReLU(inplace=True))
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classifier = nn.Linear(c_last, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.lastact(self.cells(self.stem(x)))))


@register_space("nb201")
class NB201Space(TableSpace):
    """NAS-Bench-201 cell space: 6 edges of a 4-node cell, 5 ops each (15,625 cells).

    Arch string: the benchmark's own, one |op~i| per edge into node j from node i < j, nodes
    separated by '+':  |op~0|+|op~0|op~1|+|op~0|op~1|op~2|
      op  none | skip_connect | nor_conv_1x1 | nor_conv_3x3 | avg_pool_3x3
    Example:
      |nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|
    Network: 3x3 stem conv (C=16), 3 stages of N=5 cells with C, 2C, 4C channels (defaults of
    NB201Space(cells=5, channels=16)), a residual basic block between stages, BN-ReLU, average
    pool, linear. The reductions halve the map only while its side is > 8 px (32 px:
    32->16->8; 8 px: no halving); nor_conv = ReLU-conv-BN.
    """

    example = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|"
               "nor_conv_3x3~1|skip_connect~2|")
    table: dict[str, choices.Values] = {edge_name(j, i): OPS for j, i in EDGES}

    def __init__(self, *, cells: int = 5, channels: int = 16):
        self.cells, self.channels = cells, channels

    def sample(self, trial: Any) -> str:
        return self.encode(choices.sample_params(trial, self.table))

    def decode(self, arch: str) -> dict[str, Any]:
        nodes = str(arch).split("+")
        if len(nodes) != NODES - 1 or not all(_NODE.fullmatch(n) for n in nodes):
            raise ArchError.bad(self, arch, f"must be {NODES - 1} '|op~i|...|' groups joined "
                                            "by '+'")
        params, problems = {}, []
        for j, node in enumerate(nodes, 1):
            edges = [e.split("~") for e in node.strip("|").split("|")]
            if [int(i) for _, i in edges] != list(range(j)):
                problems.append(f"node {j} must take inputs ~0..~{j - 1} in order")
                continue
            params |= {edge_name(j, int(i)): op for op, i in edges}
        return self._checked(arch, params, problems)

    def encode(self, spec: dict[str, Any]) -> str:
        nodes = ["|" + "".join(f"{spec[edge_name(j, i)]}~{i}|" for i in range(j))
                 for j in range(1, NODES)]
        return "+".join(nodes)

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        layout.check_build_args(self.name, in_chans=in_chans, num_classes=num_classes,
                                img_size=img_size)
        p = self.decode(arch)
        ops = {(j, i): p[edge_name(j, i)] for j, i in EDGES}
        strides = layout.stride_plan(img_size, 2)  # the two reductions
        layers: list[nn.Module] = []
        c = self.channels
        for stage in range(3):
            if stage:
                layers.append(Reduction(c, 2 * c, strides[stage - 1]))
                c *= 2
            layers += [Cell(ops, c) for _ in range(self.cells)]
        return NB201Net(layers, in_chans, self.channels, c, num_classes)

    def features(self, arch: str) -> dict[str, float]:
        p = self.decode(arch)
        out = {f"n_{op}": float(sum(v == op for v in p.values())) for op in OPS}
        out |= {name: float(OPS.index(op)) for name, op in p.items()}
        out["params"], out["macs"] = map(float, reference_stats(self, arch))
        return out
