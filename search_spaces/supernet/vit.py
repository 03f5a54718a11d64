"""ViT-space supernet with AutoFormer weight entanglement: elastic embed dim, per-block heads and
MLP ratio, and depth share one set of block weights.

Every sub-network's linear layers are the leading rows and columns of the largest ones; the
fused ``qkv`` projection is cut per part (q, k and v each keep their leading ``16 x heads``
rows: the head width is fixed, so a block with fewer heads keeps the leading heads, as in
AutoFormer). Each block has its own bank tensors, so blocks with different heads or MLP ratios
cut their own leading rows. Depth keeps the leading blocks.
Patch size changes the token grid, so each patch size keeps its own patch embedding and
position embedding (their width is still entangled).
"""

from __future__ import annotations

from typing import Any

import torch

from search_spaces.supernet.base import Supernet, leading
from search_spaces.supernet.registry import register_supernet
from search_spaces.vit import DEPTHS, EMBEDS, HEADS, MLPS, PATCHES

_PATCH_KEYS = ("pos_embed", "patch_embed.")


@register_supernet("vit")
class ViTSupernet(Supernet):
    @staticmethod
    def _arch(patch: int, pick) -> str:  # noqa: ANN001 - min or max
        # every block the same: the space's uniform spelling
        return (f"vit:p{patch}-e{pick(EMBEDS)}-d{pick(DEPTHS)}-h{pick(HEADS)}"
                f"-m{pick(MLPS)}")

    def largest(self) -> str:
        # p4, not p2: 4x fewer tokens keeps the sandwich's teacher affordable on a CPU
        return self._arch(4, max)

    def smallest(self) -> str:
        return self._arch(max(PATCHES), min)

    def cover_archs(self) -> list[str]:
        return [self._arch(p, max) for p in PATCHES]

    def bank_key(self, arch: str, spec: dict[str, Any], key: str) -> str:
        if key.startswith(_PATCH_KEYS):
            return f"p{spec['patch']}.{key}"
        return key

    def derive(self, bank_key: str, bank: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        if not bank_key.endswith(("attn.qkv.weight", "attn.qkv.bias")):
            return leading(bank, shape)
        parts = bank.view(3, bank.shape[0] // 3, *bank.shape[1:])
        return leading(parts, torch.Size((3, shape[0] // 3, *shape[1:]))).reshape(shape)
