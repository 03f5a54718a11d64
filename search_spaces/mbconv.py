"""MobileNetV3/EfficientNet-style space, built from timm block strings by timm's builder."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from timm.layers import get_act_layer
from timm.models._efficientnet_blocks import SqueezeExcite
from timm.models._efficientnet_builder import decode_arch_def, round_channels
from timm.models.efficientnet import EfficientNet
from torch import nn

from search_spaces import choices, layout
from search_spaces.base import ArchError, TableSpace, register_space
from search_spaces.stats import reference_stats

ACTS = {"re": "relu", "hs": "hard_swish", "sw": "silu"}
# (widths, depths) per stage: widths grow with depth like MobileNetV3's 16-24-40-80-112/160.
STAGES: tuple[tuple[tuple[int, ...], range], ...] = (
    ((8, 16, 24), range(1, 3)),
    ((16, 24, 32), range(1, 5)),
    ((24, 40, 48), range(1, 5)),
    ((48, 64, 80), range(1, 5)),
    ((64, 96, 128), range(1, 5)),
)
HEAD_MULT = 4  # the 1x1 head conv widens the last stage 4x (MobileNetV3 uses a fixed 1280)
_STAGE = re.compile(r"k(\d+)e(\d+)c(\d+)d(\d+)(se)?")


def _table() -> dict[str, choices.Values]:
    table: dict[str, choices.Values] = {"act": tuple(ACTS), "stem": (8, 16, 24)}
    for i, (widths, depths) in enumerate(STAGES, 1):
        table |= {f"s{i}_kernel": (3, 5, 7), f"s{i}_expand": (1, 3, 4, 6),
                  f"s{i}_width": widths, f"s{i}_depth": depths, f"s{i}_se": (False, True)}
    return table


@register_space("mbconv")
class MBConvSpace(TableSpace):
    """MobileNetV3/EfficientNet-style MBConv space (5 stages, built by timm's EfficientNet builder).

    Arch string: mb:<act>-s<stem>-<stage1>-<stage2>-<stage3>-<stage4>-<stage5>
      act    re (ReLU) | hs (hard swish) | sw (SiLU), for every layer
      stem   8|16|24 channels of the 3x3 stem conv
      stage  k<kernel>e<expansion>c<width>d<depth>[se]
             kernel 3|5|7 (depthwise), expansion 1|3|4|6, depth = blocks in the stage,
             se = squeeze-excite (ratio 0.25 of the block input) on every block of the stage
      widths stage1 8|16|24, stage2 16|24|32, stage3 24|40|48, stage4 48|64|80, stage5 64|96|128
      depths stage1 1-2, stages 2-5 1-4
    Example: mb:hs-s16-k3e1c16d1-k5e4c24d2se-k3e3c40d2-k5e6c64d3se-k7e6c96d2se
    Downsampling points: the stem and the first block of stages 2-5; each halves the map only
    while its side is > 8 px (28 px: 28->14->7). Head: 1x1 conv to 4x the last width, average
    pool, linear.
    """

    example = "mb:hs-s16-k3e1c16d1-k5e4c24d2se-k3e3c40d2-k5e6c64d3se-k7e6c96d2se"
    table = _table()

    def sample(self, trial: Any) -> str:
        return self.encode(choices.sample_params(trial, self.table))

    def decode(self, arch: str) -> dict[str, Any]:
        head, _, body = str(arch).partition(":")
        tokens = body.split("-")
        if head != "mb" or len(tokens) != 2 + len(STAGES):
            raise ArchError.bad(self, arch, f"must be 'mb:' then {2 + len(STAGES)} '-' fields")
        params: dict[str, Any] = {"act": tokens[0]}
        if not re.fullmatch(r"s\d+", tokens[1]):
            raise ArchError.bad(self, arch, f"stem field must be s<channels>, got {tokens[1]!r}")
        params["stem"] = int(tokens[1][1:])
        for i, token in enumerate(tokens[2:], 1):
            m = _STAGE.fullmatch(token)
            if m is None:
                raise ArchError.bad(self, arch, f"stage {i} must be k<k>e<e>c<c>d<d>[se], "
                                                f"got {token!r}")
            k, e, c, d = map(int, m.groups()[:4])
            params |= {f"s{i}_kernel": k, f"s{i}_expand": e, f"s{i}_width": c, f"s{i}_depth": d,
                       f"s{i}_se": m.group(5) is not None}
        return self._checked(arch, params)

    def encode(self, spec: dict[str, Any]) -> str:
        stages = [
            f"k{spec[f's{i}_kernel']}e{spec[f's{i}_expand']}c{spec[f's{i}_width']}"
            f"d{spec[f's{i}_depth']}{'se' if spec[f's{i}_se'] else ''}"
            for i in range(1, len(STAGES) + 1)]
        return "-".join([f"mb:{spec['act']}", f"s{spec['stem']}", *stages])

    def block_strings(self, arch: str, img_size: int) -> tuple[int, list[list[str]]]:
        """(stem stride, timm block strings per stage) for ``arch`` at ``img_size``."""
        p = self.decode(arch)
        # Downsampling points: the stem, then the first block of stages 2-5.
        strides = layout.stride_plan(img_size, len(STAGES))
        defs = []
        for i, stride in enumerate([1, *strides[1:]], 1):
            se = "_se0.25" if p[f"s{i}_se"] else ""
            defs.append([f"ir_r{p[f's{i}_depth']}_k{p[f's{i}_kernel']}_s{stride}"
                         f"_e{p[f's{i}_expand']}_c{p[f's{i}_width']}{se}"])
        return strides[0], defs

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        layout.check_build_args(self.name, in_chans=in_chans, num_classes=num_classes,
                                img_size=img_size)
        p = self.decode(arch)
        stem_stride, defs = self.block_strings(arch, img_size)
        gate = "hard_sigmoid" if p["act"] == "hs" else "sigmoid"
        model = EfficientNet(
            decode_arch_def(defs), num_classes=num_classes, in_chans=in_chans,
            stem_size=p["stem"], num_features=HEAD_MULT * p[f"s{len(STAGES)}_width"],
            act_layer=get_act_layer(ACTS[p["act"]]), round_chs_fn=round_channels,
            se_layer=partial(SqueezeExcite, gate_layer=gate, rd_round_fn=round_channels))
        # timm's stem always has stride 2; small images keep full resolution instead. Padding
        # of a 3x3 conv is 1 at either stride, so only the stride changes.
        model.conv_stem.stride = (stem_stride, stem_stride)
        return model

    def features(self, arch: str) -> dict[str, float]:
        p = self.decode(arch)
        n = len(STAGES) + 1
        out: dict[str, float] = {"act_" + a: float(p["act"] == a) for a in ACTS}
        out["stem"] = float(p["stem"])
        for key in ("kernel", "expand", "width", "depth", "se"):
            for i in range(1, n):
                out[f"s{i}_{key}"] = float(p[f"s{i}_{key}"])
        out["depth"] = float(sum(p[f"s{i}_depth"] for i in range(1, n)))
        out["se_blocks"] = float(sum(p[f"s{i}_depth"] * p[f"s{i}_se"] for i in range(1, n)))
        out["params"], out["macs"] = map(float, reference_stats(self, arch))
        return out
