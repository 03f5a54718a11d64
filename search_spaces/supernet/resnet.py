"""ResNet-space supernet: elastic groups (depth), blocks per group, branches, widths and stem.

The space's model numbers its blocks globally (``groups.<i>``); the bank numbers them by group
and position (``g<g>.b<b>``), so block ``b`` of group ``g`` shares its weights across every
depth choice of the groups before it. Branches are the leading ones, widths the leading
channels. Each group count keeps its own classifier (the last group's width and meaning differ).
"""

from __future__ import annotations

from typing import Any

from search_spaces.resnet import BLOCKS, BRANCHES, MAX_GROUPS, STEMS, WIDTHS
from search_spaces.supernet.base import Supernet
from search_spaces.supernet.registry import register_supernet


def _arch(stem: int, groups: list[tuple[int, int, int]]) -> str:
    return "-".join([f"rn:s{stem}", *(f"d{d}r{r}c{c}" for d, r, c in groups)])


@register_supernet("resnet")
class ResNetSupernet(Supernet):
    def largest(self) -> str:
        return _arch(max(STEMS), [(max(BLOCKS), max(BRANCHES), max(w)) for w in WIDTHS])

    def smallest(self) -> str:
        return _arch(min(STEMS), [(min(BLOCKS), min(BRANCHES), min(WIDTHS[0]))])

    def cover_archs(self) -> list[str]:
        full = [(max(BLOCKS), max(BRANCHES), max(w)) for w in WIDTHS]
        return [_arch(max(STEMS), full[:g]) for g in range(MAX_GROUPS, 0, -1)]

    def bank_key(self, arch: str, spec: dict[str, Any], key: str) -> str:
        if key.startswith("fc."):
            return f"fc@{spec['groups']}.{key[3:]}"
        if not key.startswith("groups."):
            return key
        _, index, rest = key.split(".", 2)
        g, b = _group_block(spec, int(index))
        return f"g{g}.b{b}.{rest}"


def _group_block(spec: dict[str, Any], index: int) -> tuple[int, int]:
    """(group, block in group) of the model's ``index``-th block."""
    for g in range(1, spec["groups"] + 1):
        if index < spec[f"g{g}_blocks"]:
            return g, index
        index -= spec[f"g{g}_blocks"]
    raise IndexError(index)
