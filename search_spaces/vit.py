"""Vision-transformer space, built with timm's ``VisionTransformer``."""

from __future__ import annotations

import math
import re
from functools import partial
from typing import Any

from timm.layers import PatchEmbed
from timm.models.vision_transformer import VisionTransformer
from torch import nn

from search_spaces import choices, layout
from search_spaces.base import ArchError, TableSpace, register_space
from search_spaces.stats import reference_stats

_ARCH = re.compile(r"vit:p(\d+)-e(\d+)-d(\d+)-h(\d+)-m(\d+)")


@register_space("vit")
class ViTSpace(TableSpace):
    """Vision-transformer space (timm VisionTransformer, mean-pooled tokens, no class token).

    Arch string: vit:p<patch>-e<embed>-d<depth>-h<heads>-m<mlp ratio>
      patch  2|4|8 px square patches
      embed  64|96|128|192 token width (every choice divides by every head count)
      depth  2-8 transformer blocks
      heads  2|4|8 attention heads
      mlp    1|2|3|4 hidden width of the MLP as a multiple of embed
    Example: vit:p4-e128-d6-h4-m2
    Images whose side is not a multiple of the patch are zero-padded right/bottom to the next
    multiple (timm's dynamic_img_pad) and the position embedding covers the padded grid: a 28 px
    image with p8 gives 4x4 tokens, with p4 7x7 tokens; 8 px with p8 gives a single token.
    """

    example = "vit:p4-e128-d6-h4-m2"
    table: dict[str, choices.Values] = {
        "patch": (2, 4, 8), "embed": (64, 96, 128, 192), "depth": range(2, 9),
        "heads": (2, 4, 8), "mlp_ratio": range(1, 5)}

    def sample(self, trial: Any) -> str:
        return self.encode(choices.sample_params(trial, self.table))

    def decode(self, arch: str) -> dict[str, Any]:
        m = _ARCH.fullmatch(str(arch))
        if m is None:
            raise ArchError.bad(self, arch, "must read vit:p<patch>-e<embed>-d<depth>-h<heads>"
                                            "-m<mlp ratio>")
        params = dict(zip(self.table, map(int, m.groups()), strict=True))
        return self._checked(arch, params)

    def encode(self, spec: dict[str, Any]) -> str:
        return (f"vit:p{spec['patch']}-e{spec['embed']}-d{spec['depth']}-h{spec['heads']}"
                f"-m{spec['mlp_ratio']}")

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        layout.check_build_args(self.name, in_chans=in_chans, num_classes=num_classes,
                                img_size=img_size)
        p = self.decode(arch)
        padded = math.ceil(img_size / p["patch"]) * p["patch"]
        return VisionTransformer(
            img_size=padded, patch_size=p["patch"], in_chans=in_chans, num_classes=num_classes,
            embed_dim=p["embed"], depth=p["depth"], num_heads=p["heads"],
            mlp_ratio=float(p["mlp_ratio"]), class_token=False, global_pool="avg",
            # The patch embedding pads the real image up to ``padded`` (a fixed size, so no
            # position-embedding resampling ends up in exported graphs).
            dynamic_img_pad=True, embed_layer=partial(PatchEmbed, strict_img_size=False))

    def features(self, arch: str) -> dict[str, float]:
        p = self.decode(arch)
        out = {k: float(v) for k, v in p.items()}
        out["head_dim"] = p["embed"] / p["heads"]
        out["tokens_32px"] = float(math.ceil(32 / p["patch"]) ** 2)
        out["params"], out["macs"] = map(float, reference_stats(self, arch))
        return out
