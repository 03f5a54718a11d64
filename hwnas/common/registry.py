"""A registry is a dict plus a decorator (like timm's ``register_model``)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from hwnas.common import plugins
from hwnas.common.errors import ConfigError

T = TypeVar("T")

# The CLI commands that list a kind's names; a kind without one gets no command in its fix.
# tests/hwnas/common/test_registry_hints.py checks every command here exists in `hwnas --help`.
LIST_COMMANDS: dict[str, str] = {
    "space": "hwnas spaces list",
    "data set": "hwnas data list",
    "hardware model": "hwnas analog list",
}
ALL: list[Registry] = []  # every registry created, so tests can walk them all


class Registry(Generic[T]):
    """Named entries of one kind (spaces, data sets, hardware models, latency backends).

    ``@REG.register("name")`` adds an entry, ``REG.get(name)`` fetches it with an error that lists
    the known names, ``REG.list("*pat*")`` filters names with shell-style patterns. A name taken
    twice is an error naming both origins (two plugins must not silently replace each other);
    ``replace=True`` overrides on purpose. Reading a registry first imports the installed
    entry-point plugins (``hwnas.common.plugins``), so their names are there in every process.
    """

    def __init__(self, kind: str, group: str | None = None):
        self.kind = kind
        self.group = group  # the entry-point group a plugin declares its entries in, if any
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        ALL.append(self)

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
            raise ConfigError.one(self.kind, f"must be one of {sorted(self._entries)}", name,
                                  self.fix())
        return self._entries[name]

    def fix(self) -> str:
        """The fix a miss suggests: the command that lists this kind, where the CLI has one."""
        command = LIST_COMMANDS.get(self.kind)
        where = f" (see `{command}`)" if command else ""
        via = f" (entry-point group {self.group}, docs/plugins.md)" if self.group else ""
        return (f"use one of the registered {self.kind} names above{where}, or register a "
                f"plugin{via}")

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
