"""Errors that say which rule was broken, the value received and how to fix it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


class HwnasError(Exception):
    """Base class of every error hwnas raises on bad input."""


@dataclass(frozen=True)
class Problem:
    """One broken rule: where, what rule, the value received and the fix."""

    where: str
    rule: str
    value: object
    fix: str

    def __str__(self) -> str:
        return f"{self.where}: {self.rule}; got {self.value!r}. Fix: {self.fix}"


def format_problems(problems: Iterable[Problem]) -> str:
    items = list(problems)
    head = f"{len(items)} problem(s):" if len(items) > 1 else ""
    lines = [str(p) for p in items]
    return "\n  ".join([head, *lines]) if head else lines[0]


class ConfigError(HwnasError, ValueError):
    """Bad input. Carries every problem found, so a user fixes them all in one pass."""

    def __init__(self, problems: Problem | Iterable[Problem]):
        self.problems = [problems] if isinstance(problems, Problem) else list(problems)
        super().__init__(format_problems(self.problems))

    @classmethod
    def one(cls, where: str, rule: str, value: object, fix: str) -> ConfigError:
        return cls(Problem(where, rule, value, fix))
