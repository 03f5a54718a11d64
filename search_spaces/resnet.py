"""AnalogNAS-like macro space of dense residual blocks: the analog-friendly space."""

from __future__ import annotations

import random
import re
from typing import Any

import torch
from torch import nn

from search_spaces import choices, layout
from search_spaces.base import ArchError, TableSpace, register_space
from search_spaces.stats import reference_stats

MAX_GROUPS = 4
# Output channels per group: later groups run on smaller maps, so they may be wider.
WIDTHS = ((16, 24, 32, 48), (32, 48, 64, 96), (64, 96, 128), (96, 128, 160))
STEMS = (16, 24, 32)
BLOCKS = range(1, 4)
BRANCHES = range(1, 4)
_GROUP = re.compile(r"d(\d+)r(\d+)c(\d+)")


def _group_table(g: int) -> dict[str, choices.Values]:
    return {f"g{g}_blocks": BLOCKS, f"g{g}_branches": BRANCHES, f"g{g}_width": WIDTHS[g - 1]}


def _bn_conv(cin: int, cout: int, k: int, stride: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]


class BranchBlock(nn.Module):
    """Residual block whose body is a sum of parallel conv3x3-BN-ReLU-conv3x3-BN branches
    (AnalogNAS): branches widen a layer with dense convs only, which aihwkit maps to tiles."""

    def __init__(self, cin: int, cout: int, stride: int, branches: int):
        super().__init__()
        self.branches = nn.ModuleList(
            nn.Sequential(*_bn_conv(cin, cout, 3, stride), nn.ReLU(inplace=True),
                          *_bn_conv(cout, cout, 3, 1))
            for _ in range(branches))
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout
                         else nn.Sequential(*_bn_conv(cin, cout, 1, stride)))
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.shortcut(x)
        for branch in self.branches:
            out = out + branch(x)
        return self.act(out)


class ResNetLike(nn.Module):
    def __init__(self, stem: nn.Module, groups: nn.Sequential, width: int, num_classes: int):
        super().__init__()
        self.stem, self.groups = stem, groups
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.fc = nn.Linear(width, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.groups(self.stem(x))))


@register_space("resnet")
class ResNetSpace(TableSpace):
    """AnalogNAS-like ResNet macro space of dense 3x3 residual blocks with parallel branches.

    Arch string: rn:s<stem>-<group1>[-<group2>...]   (1-4 groups, one per resolution stage)
      stem   16|24|32 channels of the 3x3 stem conv
      group  d<blocks>r<branches>c<width>
             blocks 1-3 residual blocks, branches 1-3 parallel conv3x3-conv3x3 paths summed with
             the shortcut, width = output channels: group1 16|24|32|48, group2 32|48|64|96,
             group3 64|96|128, group4 96|128|160
    Example: rn:s32-d2r1c32-d2r2c64-d1r3c128
    Only dense convs (no groups, no depthwise), so the whole net maps to analog tiles. The first
    block of groups 2-4 is a downsampling point (halves only while the side is > 8 px); the stem
    halves only images larger than 32 px. Shortcuts are 1x1 convs where the shape changes.
    """

    example = "rn:s32-d2r1c32-d2r2c64-d1r3c128"
    table: dict[str, choices.Values] = {"stem": STEMS, "groups": range(1, MAX_GROUPS + 1)}
    for _g in range(1, MAX_GROUPS + 1):
        table |= _group_table(_g)

    def _active(self, groups: int) -> dict[str, choices.Values]:
        table = {"stem": STEMS, "groups": self.table["groups"]}
        for g in range(1, groups + 1):
            table |= _group_table(g)
        return table

    def sample(self, trial: Any) -> str:
        params = choices.sample_params(trial, {"stem": STEMS, "groups": self.table["groups"]})
        for g in range(1, params["groups"] + 1):  # conditional: Optuna is define-by-run
            params |= choices.sample_params(trial, _group_table(g))
        return self.encode(params)

    def decode(self, arch: str) -> dict[str, Any]:
        head, _, body = str(arch).partition(":")
        tokens = body.split("-")
        if head != "rn" or not 2 <= len(tokens) <= MAX_GROUPS + 1:
            raise ArchError.bad(self, arch, f"must be 'rn:' then a stem and 1-{MAX_GROUPS} "
                                            "groups joined by '-'")
        if not re.fullmatch(r"s\d+", tokens[0]):
            raise ArchError.bad(self, arch, f"stem field must be s<channels>, got {tokens[0]!r}")
        params: dict[str, Any] = {"stem": int(tokens[0][1:]), "groups": len(tokens) - 1}
        for g, token in enumerate(tokens[1:], 1):
            m = _GROUP.fullmatch(token)
            if m is None:
                raise ArchError.bad(self, arch, f"group {g} must be d<blocks>r<branches>c<width>, "
                                                f"got {token!r}")
            params |= dict(zip(_group_table(g), map(int, m.groups()), strict=True))
        return self._checked(arch, params)

    def encode(self, spec: dict[str, Any]) -> str:
        groups = [f"d{spec[f'g{g}_blocks']}r{spec[f'g{g}_branches']}c{spec[f'g{g}_width']}"
                  for g in range(1, spec["groups"] + 1)]
        return "-".join([f"rn:s{spec['stem']}", *groups])

    def mutate(self, arch: str, rng: random.Random) -> str:
        params = self.decode(arch)
        out = choices.mutate_elastic(params, self._active(params["groups"]), "groups",
                                     _group_table, rng)
        return self.encode(out)

    def size(self) -> int:
        total, per_prefix = 0, 1
        for g in range(1, MAX_GROUPS + 1):  # archs with exactly g groups
            per_prefix *= choices.count(_group_table(g))
            total += per_prefix
        return len(STEMS) * total

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        layout.check_build_args(self.name, in_chans=in_chans, num_classes=num_classes,
                                img_size=img_size)
        p = self.decode(arch)
        strides = layout.stride_plan(img_size, p["groups"], stem_above=layout.STEM_HALVE_ABOVE)
        stem = nn.Sequential(*_bn_conv(in_chans, p["stem"], 3, strides[0]), nn.ReLU(inplace=True))
        blocks, cin = [], p["stem"]
        for g in range(1, p["groups"] + 1):
            stride = strides[g - 1] if g > 1 else 1  # groups 2+ own the later points
            for b in range(p[f"g{g}_blocks"]):
                cout = p[f"g{g}_width"]
                blocks.append(BranchBlock(cin, cout, stride if b == 0 else 1,
                                          p[f"g{g}_branches"]))
                cin = cout
        return ResNetLike(stem, nn.Sequential(*blocks), cin, num_classes)

    def features(self, arch: str) -> dict[str, float]:
        p = self.decode(arch)
        out: dict[str, float] = {"stem": float(p["stem"]), "groups": float(p["groups"])}
        for g in range(1, MAX_GROUPS + 1):  # absent groups read as 0 so every arch has all keys
            for key in ("blocks", "branches", "width"):
                out[f"g{g}_{key}"] = float(p.get(f"g{g}_{key}", 0))
        gs = range(1, p["groups"] + 1)
        out["depth"] = float(2 * sum(p[f"g{g}_blocks"] for g in gs) + 1)
        out["convs"] = float(sum(2 * p[f"g{g}_blocks"] * p[f"g{g}_branches"] for g in gs) + 1)
        out["max_width"] = float(max(p[f"g{g}_width"] for g in gs))
        out["params"], out["macs"] = map(float, reference_stats(self, arch))
        return out
