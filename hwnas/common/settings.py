"""Settings objects and the keyword arguments they replace.

The measuring and scoring protocols travel as one frozen dataclass each
(``hw_cost.MeasureSpec``, ``analog.ScoringProtocol``), built once from a study and passed whole.
Calls written against the earlier keyword form keep working for one release: ``settle`` applies
those keywords to the spec and warns, naming the spec field each one became.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, TypeVar

T = TypeVar("T")

REMOVED_IN = "0.3"
"""The release whose functions stop taking the settings as separate keyword arguments."""


def settle(cls: type[T], given: T | None, legacy: dict[str, Any], where: str) -> T:
    """The spec a call runs with: ``given`` (else ``cls()``) with the ``legacy`` keyword
    arguments applied, with a ``DeprecationWarning`` when there are any. A keyword that names
    no field of ``cls`` is the ``TypeError`` Python raises for an unknown keyword."""
    spec = given if given is not None else cls()
    if not legacy:
        return spec
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(legacy) - names)
    if unknown:
        raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r}; "
                        f"its settings are the fields of {cls.__name__}: {sorted(names)}")
    args = ", ".join(f"{k}={legacy[k]!r}" for k in sorted(legacy))
    warnings.warn(f"{where}(..., {', '.join(sorted(legacy))}=...) is deprecated and is removed "
                  f"in hwnas {REMOVED_IN}: pass {cls.__name__}({args}) as its spec",
                  DeprecationWarning, stacklevel=3)
    return dataclasses.replace(spec, **legacy)  # type: ignore[type-var]
