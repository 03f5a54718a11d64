"""A registry is a dict plus a decorator (like timm's ``register_model``)."""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from hwnas.common.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind (spaces, data sets, hardware models, latency backends).

    ``@REG.register("name")`` adds an entry, ``REG.get(name)`` fetches it with an error that lists
    the known names, ``REG.list("*pat*")`` filters names with shell-style patterns.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._entries:
                warnings.warn(f"{self.kind} {name!r} registered twice; the later one wins",
                              stacklevel=2)
            self._entries[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        if name not in self._entries:
            raise ConfigError.one(
                self.kind, f"must be one of {sorted(self._entries)}", name,
                f"use a registered {self.kind} (see `hwnas {self.kind.split()[0]}s list`)")
        return self._entries[name]

    def list(self, pattern: str = "*") -> list[str]:
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.list())

    def __len__(self) -> int:
        return len(self._entries)
