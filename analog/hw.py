"""The hardware-model registry: one name per accuracy model, applied from outside the model.

Entries are ``HardwareModel`` instances. Besides the registered names, families of names are
resolved on the fly by the resolvers their modules register (``register_resolver``):
``analog.quant`` resolves ``fqN`` (N-bit weights and activations) and ``wXaY`` (X-bit weights,
Y-bit activations). The registry names no hardware module, so every module may import it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from hwnas.common.errors import ConfigError
from hwnas.common.registry import Registry

HW: Registry[HardwareModel] = Registry("hardware model")

Resolver = Callable[[str], "HardwareModel | None"]
"""A model for a name of its family (e.g. ``fq5``), None for a name outside it; a name inside
the family with bad values raises ``ConfigError``."""
_RESOLVERS: dict[str, Resolver] = {}  # grammar (named in errors) -> resolver


@dataclass(frozen=True)
class HardwareModel:
    """How a digital model computes on one kind of hardware.

    ``kind`` is ``digital``, ``quant`` (deterministic fake-quant or int8) or ``analog``
    (aihwkit tiles with programming noise, drift and read noise, so results vary per repeat
    and with the drift time).
    """

    name: str
    description: str
    kind: ClassVar[str] = "digital"
    needs_calibration: ClassVar[bool] = False

    @property
    def stochastic(self) -> bool:
        return self.kind == "analog"

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              **overrides: Any) -> nn.Module:
        """A new module that computes like ``model`` on this hardware (``model`` is untouched)."""
        raise NotImplementedError

    def check_overrides(self, overrides: dict[str, Any], allowed: tuple[str, ...]) -> None:
        unknown = sorted(set(overrides) - set(allowed))
        if unknown:
            raise ConfigError.one(
                f"{self.name} options", f"must be among {list(allowed) or 'none'}", unknown,
                "drop the unknown keys or use a hardware model that has them "
                "(`hwnas analog list`)")


def register_resolver(grammar: str) -> Callable[[Resolver], Resolver]:
    """Decorator: ``get_hw`` asks this resolver about names the registry does not hold.
    ``grammar`` describes its names for error messages (e.g. ``"fqN / wXaY (bits 2..16)"``)."""

    def add(resolver: Resolver) -> Resolver:
        _RESOLVERS[grammar] = resolver
        return resolver

    return add


def get_hw(name: str) -> HardwareModel:
    """The hardware model called ``name``: registered, or resolved by a registered family."""
    if name in HW:
        return HW.get(name)
    for resolver in _RESOLVERS.values():
        found = resolver(str(name))
        if found is not None:
            return found
    families = "".join(f" or a generic {g}" for g in _RESOLVERS)
    raise ConfigError.one("hardware model", f"must be one of {HW.list()}{families}", name,
                          "pick a listed name (`hwnas analog list`)")


def list_hw(pattern: str = "*") -> list[str]:
    """Registered hardware-model names matching a shell pattern (generic fqN/wXaY not listed)."""
    return HW.list(pattern)


@dataclass(frozen=True)
class DigitalHW(HardwareModel):
    """Full-precision digital reference: the model as trained."""

    kind: ClassVar[str] = "digital"

    def apply(self, model: nn.Module, *, calib: Tensor | None = None,
              **overrides: Any) -> nn.Module:
        self.check_overrides(overrides, ())
        return copy.deepcopy(model).eval()


HW.register("digital")(DigitalHW("digital", "full-precision digital reference (fp32)"))
