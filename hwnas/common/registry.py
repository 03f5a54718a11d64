"""A registry is a dict plus a decorator (like timm's ``register_model``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from hwnas.common import plugins
from hwnas.common.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Named entries of one kind (spaces, data sets, hardware models, latency backends).

    ``@REG.register("name")`` adds an entry, ``REG.get(name)`` fetches it with an error that lists
    the known names, ``REG.list("*pat*")`` filters names with shell-style patterns. A name taken
    twice is an error naming both origins (two plugins must not silently replace each other);
    ``replace=True`` overrides on purpose. Reading a registry first imports the installed
    entry-point plugins (``hwnas.common.plugins``), so their names are there in every process.
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}

    def register(self, name: str, *, replace: bool = False) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            origin = plugins.current() or getattr(obj, "__module__", None) or "?"
            if name in self._entries and not replace:
                raise ConfigError.one(
                    f"{self.kind} {name!r}", "a name is registered once", origin,
                    f"it is already registered by {self._origins[name]}: rename one of them "
                    "(or register with replace=True to override on purpose)")
            self._entries[name] = obj
            self._origins[name] = origin
            return obj

        return deco

    def get(self, name: str) -> T:
        plugins.load_entry_points()
        if name not in self._entries:
            raise ConfigError.one(
                self.kind, f"must be one of {sorted(self._entries)}", name,
                f"use a registered {self.kind} (see `hwnas {self.kind.split()[0]}s list`)")
        return self._entries[name]

    def list(self, pattern: str = "*") -> list[str]:
        plugins.load_entry_points()
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def __contains__(self, name: object) -> bool:
        plugins.load_entry_points()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.list())

    def __len__(self) -> int:
        plugins.load_entry_points()
        return len(self._entries)
