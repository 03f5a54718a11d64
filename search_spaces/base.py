"""The search-space contract and its registry."""

from __future__ import annotations

import abc
import random
from typing import TYPE_CHECKING, Any, ClassVar

from torch import nn

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.registry import Registry
from search_spaces import choices

if TYPE_CHECKING:  # annotations only: data sets need not be loaded to build
    from hwnas.train.data import DataSplits

SPACES: Registry[type[SearchSpace]] = Registry("space")


class ArchError(ConfigError):
    """A malformed or out-of-range architecture string; the message shows the grammar."""

    @classmethod
    def bad(cls, space: SearchSpace, arch: str, rule: str) -> ArchError:
        return cls(Problem(f"{space.name} arch", rule, arch,
                           f"write it in the grammar:\n{space.grammar()}"))


class SearchSpace(abc.ABC):
    """One family of architectures, each named by one string.

    Subclasses set ``name`` and implement the abstract methods. The arch-string grammar is the
    class docstring (``grammar()`` returns it) so that error messages and ``--help`` show it.
    """

    name: ClassVar[str]
    example: ClassVar[str] = ""
    """A valid arch string of the space, also quoted in its grammar (docs, tests, benchmarks)."""

    @classmethod
    def grammar(cls) -> str:
        return (cls.__doc__ or "").strip()

    @abc.abstractmethod
    def sample(self, trial: Any) -> str:
        """Draw one arch string through Optuna's ``trial.suggest_*`` API (any sampler, Ray too)."""

    @abc.abstractmethod
    def decode(self, arch: str) -> Any:
        """Parse and validate ``arch`` into the space's spec; raise ``ArchError`` when malformed."""

    @abc.abstractmethod
    def encode(self, spec: Any) -> str:
        """Inverse of ``decode``: ``encode(decode(s)) == s`` for every valid ``s``."""

    @abc.abstractmethod
    def mutate(self, arch: str, rng: random.Random) -> str:
        """A valid neighbour of ``arch`` that differs in one choice."""

    @abc.abstractmethod
    def size(self) -> int:
        """Number of distinct architectures in the space."""

    @abc.abstractmethod
    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        """A freshly initialised digital model for ``arch`` and the data set's shape."""

    @abc.abstractmethod
    def features(self, arch: str) -> dict[str, float]:
        """Numeric description of ``arch`` (for latency regressors and reports)."""

    def build_for(self, arch: str, data: DataSplits) -> nn.Module:
        """``arch`` built for a data set's shape (its ``in_chans``, ``num_classes``,
        ``img_size``): the one spelling of "this candidate, for this data"."""
        return self.build(arch, in_chans=data.in_chans, num_classes=data.num_classes,
                          img_size=data.img_size)

    def random_arch(self, rng: random.Random) -> str:
        """Uniform-ish sample without Optuna, via a tiny trial stand-in."""
        return self.sample(_RandomTrial(rng))

    def validate(self, arch: str) -> str:
        self.decode(arch)
        return arch


class TableSpace(SearchSpace):
    """A space whose spec is a flat ``{param: value}`` dict checked against one choice table."""

    table: ClassVar[choices.Table]

    def _checked(self, arch: str, params: dict[str, Any],
                 problems: list[str] | None = None) -> dict[str, Any]:
        """``params`` if they are in the table and ``arch`` is their one canonical string."""
        problems = [*(problems or []), *choices.check(params, self.table)]
        if problems:
            raise ArchError.bad(self, arch, "; ".join(problems))
        if self.encode(params) != arch:  # e.g. leading zeros: keep one string per arch
            raise ArchError.bad(self, arch, f"is not canonical; write {self.encode(params)!r}")
        return params

    def mutate(self, arch: str, rng: random.Random) -> str:
        return self.encode(choices.mutate_one(self.decode(arch), self.table, rng))

    def size(self) -> int:
        return choices.count(self.table)


class _RandomTrial:
    """Duck-types the part of ``optuna.Trial`` a space uses, drawing with ``random``."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def suggest_categorical(self, name: str, choices):  # noqa: ANN001
        return self.rng.choice(list(choices))

    def suggest_int(self, name: str, low: int, high: int, step: int = 1, log: bool = False) -> int:
        return self.rng.randrange(low, high + 1, step)

    def suggest_float(self, name: str, low: float, high: float, **_: Any) -> float:
        return self.rng.uniform(low, high)


def register_space(name: str):
    """Class decorator: ``@register_space("mbconv")`` sets ``cls.name`` and registers it."""

    def deco(cls: type[SearchSpace]) -> type[SearchSpace]:
        cls.name = name
        return SPACES.register(name)(cls)

    return deco


def get_space(name: str) -> SearchSpace:
    return SPACES.get(name)()


def list_spaces(pattern: str = "*") -> list[str]:
    return SPACES.list(pattern)
