"""MBConv-space supernet: elastic depth, expansion, kernel, width, SE and activation (OFA).

Depth keeps each stage's leading blocks; expansion and width keep leading channels; SE blocks
share their reduce/expand convs whenever a sub-network switches SE on. Kernels follow
Once-for-All: the bank holds each depthwise conv at 7x7; a 5x5 kernel is the 7x7 kernel's centre
through a learned 25x25 transform, a 3x3 kernel the 5x5 kernel's centre through a 9x9 one (both
start as the identity). Activations have no weights, so every act shares all of them.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from search_spaces.mbconv import STAGES
from search_spaces.supernet.base import Supernet, leading
from search_spaces.supernet.registry import register_supernet

# (from, to): the bank's 7x7 first, then each smaller kernel from the one before
STEPS = ((7, 5), (5, 3))
_DW = re.compile(r"blocks\.\d+\.\d+\.conv_dw\.weight")


def _arch(act: str, stem: int, stages: list[tuple[int, int, int, int, bool]]) -> str:
    fields = [f"k{k}e{e}c{c}d{d}{'se' if se else ''}" for k, e, c, d, se in stages]
    return "-".join([f"mb:{act}", f"s{stem}", *fields])


def _centre(w: torch.Tensor, k: int) -> torch.Tensor:
    start = (w.shape[-1] - k) // 2
    return w[..., start:start + k, start:start + k]


@register_supernet("mbconv")
class MBConvSupernet(Supernet):
    def largest(self) -> str:
        return _arch("hs", 24, [(7, 6, max(w), d[-1], True) for w, d in STAGES])

    def smallest(self) -> str:
        return _arch("hs", 8, [(3, 1, min(w), d[0], False) for w, d in STAGES])

    def add_extra_parameters(self) -> None:
        self.kernel_tf = nn.ParameterDict()
        for name in self.params:
            if _DW.fullmatch(name.replace("~", ".")):
                for big, small in STEPS:
                    self.kernel_tf[f"{name}~{big}to{small}"] = nn.Parameter(
                        torch.eye(small * small))

    def derive(self, bank_key: str, bank: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        if not _DW.fullmatch(bank_key) or shape[-1] == bank.shape[-1]:
            return leading(bank, shape)
        w = bank[:shape[0]]
        name = bank_key.replace(".", "~")
        for big, small in STEPS:
            tf = self.kernel_tf[f"{name}~{big}to{small}"]
            w = (_centre(w, small).flatten(2) @ tf.T).view(*w.shape[:2], small, small)
            if small == shape[-1]:
                return w
        raise ValueError(f"no kernel transform to {tuple(shape)} for {bank_key}")


