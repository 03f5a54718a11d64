"""The hardware-model registry: one name per accuracy model, applied from outside the model.

Entries are ``HardwareModel`` instances. Besides the registered names, generic quantization
names are parsed on the fly: ``fqN`` (N-bit weights and activations) and ``wXaY`` (X-bit
weights, Y-bit activations), N, X, Y in 2..16.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, ClassVar

from torch import Tensor, nn

from hwnas.common.errors import ConfigError
from hwnas.common.registry import Registry

HW: Registry[HardwareModel] = Registry("hardware model")

_GENERIC = re.compile(r"^(?:fq(?P<n>\d+)|w(?P<w>\d+)a(?P<a>\d+))$")
BITS_RANGE = (2, 16)


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


def get_hw(name: str) -> HardwareModel:
    """The hardware model called ``name`` (registered, or a generic ``fqN``/``wXaY``)."""
    if name in HW:
        return HW.get(name)
    match = _GENERIC.match(str(name))
    if match:
        from analog.quant import FakeQuantHW  # deferred: torchao is a heavy import

        w_bits = int(match["n"] or match["w"])
        a_bits = int(match["n"] or match["a"])
        lo, hi = BITS_RANGE
        bad = [b for b in (w_bits, a_bits) if not lo <= b <= hi]
        if bad:
            raise ConfigError.one("hardware model", f"bit widths must be in {lo}..{hi}", name,
                                  "use e.g. fq8, fq4 or w4a8")
        return FakeQuantHW(name=name, description=f"{w_bits}-bit weights, {a_bits}-bit "
                           "activations (torchao PT2E fake-quant)", w_bits=w_bits, a_bits=a_bits)
    raise ConfigError.one(
        "hardware model", f"must be one of {HW.list()} or a generic fqN / wXaY "
                          f"(bits {BITS_RANGE[0]}..{BITS_RANGE[1]})", name,
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
        import copy

        self.check_overrides(overrides, ())
        return copy.deepcopy(model).eval()


HW.register("digital")(DigitalHW("digital", "full-precision digital reference (fp32)"))
