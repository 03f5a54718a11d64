"""A trained supernet, rebuilt from its checkpoint (``hwnas.train.supernet``), and the
sub-networks it hands out with inherited weights."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from hwnas.train.supernet import read_checkpoint
from search_spaces.supernet import Supernet, build_supernet, recalibrate_bn


def load_supernet(path: str | Path, *, space: str | None = None) -> tuple[Supernet, dict]:
    """The trained supernet in eval mode and its checkpoint metadata (config, step, seconds)."""
    ck = read_checkpoint(path, space=space)
    net = build_supernet(ck["space"], in_chans=ck["in_chans"], num_classes=ck["num_classes"],
                         img_size=ck["img_size"])
    net.load_state_dict(ck["state_dict"])
    meta = {k: ck[k] for k in ("space", "config", "step", "seconds", "in_chans", "num_classes",
                               "img_size")}
    return net.eval(), meta


def inherit(net: Supernet, arch: str, calib: torch.Tensor, *, batch_size: int = 250
            ) -> nn.Module:
    """Sub-network ``arch`` with inherited weights and BN statistics re-estimated on ``calib``."""
    model = net.extract(arch)
    recalibrate_bn(model, calib, batch_size=batch_size)
    return model


__all__ = ["inherit", "load_supernet"]
