"""Supernets by space name (one per space), so tests and commands iterate over them."""

from __future__ import annotations

from hwnas.common.registry import Registry

SUPERNETS: Registry[type] = Registry("supernet")


def register_supernet(space: str):
    """Class decorator: ``@register_supernet("resnet")`` sets ``space_name`` and registers it."""

    def deco(cls: type) -> type:
        cls.space_name = space
        return SUPERNETS.register(space)(cls)

    return deco
