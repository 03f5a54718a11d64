"""ViT-space supernet with AutoFormer weight entanglement: elastic embed dim, heads, MLP ratio
and depth share one set of block weights.

Every sub-network's linear layers are the leading rows and columns of the largest ones; the
fused ``qkv`` projection is cut per part (q, k and v each keep their leading ``embed`` rows).
Heads split the same q/k/v rows differently and own no weights. Depth keeps the leading blocks.
Patch size changes the token grid, so each patch size keeps its own patch embedding and
position embedding (their width is still entangled).
"""

from __future__ import annotations

from typing import Any

import torch

from search_spaces.supernet.base import Supernet, leading
from search_spaces.supernet.registry import register_supernet

_PATCH_KEYS = ("pos_embed", "patch_embed.")


@register_supernet("vit")
class ViTSupernet(Supernet):
    def _table(self, name: str) -> tuple[int, ...]:
        return tuple(self.space.table[name])

    def _arch(self, patch: int, pick) -> str:  # noqa: ANN001 - min or max
        t = self._table
        return (f"vit:p{patch}-e{pick(t('embed'))}-d{pick(t('depth'))}-h{pick(t('heads'))}"
                f"-m{pick(t('mlp_ratio'))}")

    def largest(self) -> str:
        # p4, not p2: 4x fewer tokens keeps the sandwich's teacher affordable on a CPU
        return self._arch(4, max)

    def smallest(self) -> str:
        return self._arch(max(self._table("patch")), min)

    def cover_archs(self) -> list[str]:
        return [self._arch(p, max) for p in self._table("patch")]

    def bank_key(self, arch: str, spec: dict[str, Any], key: str) -> str:
        if key.startswith(_PATCH_KEYS):
            return f"p{spec['patch']}.{key}"
        return key

    def derive(self, bank_key: str, bank: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        if not bank_key.endswith(("attn.qkv.weight", "attn.qkv.bias")):
            return leading(bank, shape)
        parts = bank.view(3, bank.shape[0] // 3, *bank.shape[1:])
        return leading(parts, torch.Size((3, shape[0] // 3, *shape[1:]))).reshape(shape)
