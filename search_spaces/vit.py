"""Vision-transformer space with per-block heads and MLP ratio and elastic depth (AutoFormer-like),
built with timm's ``VisionTransformer``."""

from __future__ import annotations

import math
import random
import re
from functools import partial
from typing import Any

from timm.layers import Attention, PatchEmbed
from timm.models.vision_transformer import Block, VisionTransformer
from torch import nn

from search_spaces import choices, layout
from search_spaces.base import ArchError, TableSpace, register_space
from search_spaces.stats import reference_stats

HEAD_DIM = 16  # fixed, so q/k/v width = heads x 16 (AutoFormer fixes 64 for 224 px ImageNet)
PATCHES, EMBEDS = (2, 4, 8), (64, 96, 128, 192)
DEPTHS, HEADS, MLPS = range(2, 9), (2, 4, 6, 8), range(1, 5)
_HEAD = re.compile(r"vit:p(\d+)-e(\d+)-(.+)")
_UNIFORM = re.compile(r"d(\d+)-h(\d+)-m(\d+)")
_BLOCK = re.compile(r"h(\d+)m(\d+)")


def _block_table(i: int) -> dict[str, choices.Values]:
    return {f"b{i}_heads": HEADS, f"b{i}_mlp": MLPS}


class FixedHeadAttention(Attention):
    """timm's ``Attention`` with ``HEAD_DIM`` per head, so q/k/v width follows the heads."""

    def __init__(self, dim: int, num_heads: int = 8, **kw: Any):
        super().__init__(dim, num_heads, attn_head_dim=HEAD_DIM, **kw)


def _per_block(heads: list[int], mlps: list[int]):  # noqa: ANN202 - a timm block_fn
    """timm ``block_fn`` giving block ``i`` (timm passes it as ``depth``) its own heads and MLP
    ratio."""

    def make(*, depth: int, num_heads: int, mlp_ratio: float, **kw: Any) -> Block:
        kw["attn_layer"] = FixedHeadAttention
        return Block(num_heads=heads[depth], mlp_ratio=float(mlps[depth]), depth=depth, **kw)

    return make


@register_space("vit")
class ViTSpace(TableSpace):
    """Vision-transformer space: heads and MLP ratio per block, elastic depth, fixed head width.

    Arch string: vit:p<patch>-e<embed>-<blocks>
      patch  2|4|8 px square patches
      embed  64|96|128|192 token width
      blocks one h<heads>m<mlp> per transformer block, 2-8 blocks joined by '-';
             when every block is the same, written d<depth>-h<heads>-m<mlp> instead (the one
             canonical string of such an arch)
      heads  2|4|6|8 attention heads of 16 dims each: q/k/v width = 16 x heads, whatever embed
      mlp    1|2|3|4 hidden width of the block's MLP as a multiple of embed
    Example: vit:p4-e128-h4m2-h4m2-h8m3-h2m1
    Uniform: vit:p4-e128-d6-h4-m2 (six blocks of 4 heads, MLP ratio 2)
    Mean-pooled tokens, no class token. Images whose side is not a multiple of the patch are
    zero-padded right/bottom to the next multiple (timm's dynamic_img_pad) and the position
    embedding covers the padded grid: a 28 px image with p8 gives 4x4 tokens, with p4 7x7.
    """

    example = "vit:p4-e128-h4m2-h4m2-h8m3-h2m1"
    table: dict[str, choices.Values] = {"patch": PATCHES, "embed": EMBEDS, "depth": DEPTHS}
    for _i in range(1, DEPTHS[-1] + 1):
        table |= _block_table(_i)

    def _active(self, depth: int) -> dict[str, choices.Values]:
        table = {k: self.table[k] for k in ("patch", "embed", "depth")}
        for i in range(1, depth + 1):
            table |= _block_table(i)
        return table

    def sample(self, trial: Any) -> str:
        params = choices.sample_params(trial, self._active(0))
        for i in range(1, params["depth"] + 1):  # conditional: Optuna is define-by-run
            params |= choices.sample_params(trial, _block_table(i))
        return self.encode(params)

    def decode(self, arch: str) -> dict[str, Any]:
        m = _HEAD.fullmatch(str(arch))
        if m is None:
            raise ArchError.bad(self, arch, "must read vit:p<patch>-e<embed>-<blocks>")
        params: dict[str, Any] = {"patch": int(m.group(1)), "embed": int(m.group(2))}
        uniform = _UNIFORM.fullmatch(m.group(3))
        if uniform:
            depth, heads, mlp = map(int, uniform.groups())
            blocks = [(heads, mlp)] * depth
        else:
            tokens = m.group(3).split("-")
            found = [_BLOCK.fullmatch(t) for t in tokens]
            if not all(found):
                raise ArchError.bad(self, arch, "blocks must be h<heads>m<mlp> joined by '-', "
                                                "or d<depth>-h<heads>-m<mlp>")
            blocks = [tuple(map(int, f.groups())) for f in found]
        params["depth"] = len(blocks)
        if not DEPTHS[0] <= len(blocks) <= DEPTHS[-1]:
            raise ArchError.bad(self, arch, f"depth must be one of {choices.describe(DEPTHS)} "
                                            f"(got {len(blocks)})")
        for i, (heads, mlp) in enumerate(blocks, 1):
            params |= {f"b{i}_heads": heads, f"b{i}_mlp": mlp}
        return self._checked(arch, params)

    def encode(self, spec: dict[str, Any]) -> str:
        blocks = [(spec[f"b{i}_heads"], spec[f"b{i}_mlp"]) for i in range(1, spec["depth"] + 1)]
        head = f"vit:p{spec['patch']}-e{spec['embed']}"
        if len(set(blocks)) == 1:
            return f"{head}-d{spec['depth']}-h{blocks[0][0]}-m{blocks[0][1]}"
        return "-".join([head, *(f"h{h}m{m}" for h, m in blocks)])

    def mutate(self, arch: str, rng: random.Random) -> str:
        params = self.decode(arch)
        out = choices.mutate_elastic(params, self._active(params["depth"]), "depth",
                                     _block_table, rng)
        return self.encode(out)

    def size(self) -> int:
        per_block = choices.count(_block_table(1))
        return len(PATCHES) * len(EMBEDS) * sum(per_block**d for d in DEPTHS)

    def blocks(self, arch: str) -> tuple[list[int], list[int]]:
        """(heads, MLP ratios) of every block of ``arch``, in order."""
        p = self.decode(arch)
        idx = range(1, p["depth"] + 1)
        return [p[f"b{i}_heads"] for i in idx], [p[f"b{i}_mlp"] for i in idx]

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        layout.check_build_args(self.name, in_chans=in_chans, num_classes=num_classes,
                                img_size=img_size)
        p = self.decode(arch)
        heads, mlps = self.blocks(arch)
        padded = math.ceil(img_size / p["patch"]) * p["patch"]
        return VisionTransformer(
            img_size=padded, patch_size=p["patch"], in_chans=in_chans, num_classes=num_classes,
            embed_dim=p["embed"], depth=p["depth"], num_heads=heads[0],
            block_fn=_per_block(heads, mlps), class_token=False, global_pool="avg",
            # The patch embedding pads the real image up to ``padded`` (a fixed size, so no
            # position-embedding resampling ends up in exported graphs).
            dynamic_img_pad=True, embed_layer=partial(PatchEmbed, strict_img_size=False))

    def features(self, arch: str) -> dict[str, float]:
        p = self.decode(arch)
        heads, mlps = self.blocks(arch)
        out = {"patch": float(p["patch"]), "embed": float(p["embed"]), "depth": float(p["depth"]),
               "heads": sum(heads) / len(heads), "mlp_ratio": sum(mlps) / len(mlps),
               "max_heads": float(max(heads)), "max_mlp_ratio": float(max(mlps)),
               "head_dim": float(HEAD_DIM), "qkv_width": float(HEAD_DIM * sum(heads)) / len(heads)}
        out["tokens_32px"] = float(math.ceil(32 / p["patch"]) ** 2)
        out["params"], out["macs"] = map(float, reference_stats(self, arch))
        return out
