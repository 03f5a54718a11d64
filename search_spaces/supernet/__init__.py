"""Weight-sharing supernets over the search spaces (OFA / BigNAS / AutoFormer style).

``build_supernet(space, in_chans=..., num_classes=..., img_size=...)`` returns the space's
supernet; ``activate(arch)`` selects the sub-network ``forward`` runs and ``extract(arch)`` returns
it as the space's own model with the inherited weights. See ``search_spaces.supernet.base``.
"""

from __future__ import annotations

from search_spaces.supernet.base import Supernet, recalibrate_bn
from search_spaces.supernet.registry import SUPERNETS, register_supernet

# Importing the modules registers the supernets.
from search_spaces.supernet import mbconv, resnet, vit  # noqa: E402,F401  isort: skip


def build_supernet(space: str, *, in_chans: int, num_classes: int, img_size: int) -> Supernet:
    return SUPERNETS.get(space)(in_chans=in_chans, num_classes=num_classes, img_size=img_size)


def list_supernets() -> list[str]:
    return SUPERNETS.list()


__all__ = ["SUPERNETS", "Supernet", "build_supernet", "list_supernets", "recalibrate_bn",
           "register_supernet"]
