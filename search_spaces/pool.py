"""A space restricted to a given pool of its archs (``space_pool:`` in a study file).

A study over a pool searches only those archs: for example the fidelity truth set, whose true
accuracies are known, so the front a search returns can be scored against the pool's true front.
The pool keeps its space's grammar, builder and features; sampling draws one pool member by
index, so every Optuna sampler (and Ray's searcher) works on it, and a mutation moves to a pool
member that the base space's own ``mutate`` reaches when there is one.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from torch import nn

from hwnas.common.errors import ConfigError, Problem
from search_spaces.base import ArchError, SearchSpace

_MUTATE_TRIES = 32  # base-space mutations tried before falling back to a random member


class PoolSpace(SearchSpace):
    """The archs of ``pool`` from the base space, one per line of the pool file."""

    def __init__(self, base: SearchSpace, archs: list[str]):
        self.base, self.archs = base, list(dict.fromkeys(archs))
        self.name = base.name  # type: ignore[misc] - a pool searches its base space
        self._index = {a: i for i, a in enumerate(self.archs)}

    def grammar(self) -> str:  # type: ignore[override]
        return f"one of the {len(self.archs)} pool archs of {self.base.name}:\n" \
               f"{self.base.grammar()}"

    def sample(self, trial: Any) -> str:
        return self.archs[trial.suggest_categorical("pool_index", list(range(len(self.archs))))]

    def decode(self, arch: str) -> dict[str, int]:
        """The trial parameters that sample ``arch``: its index in the pool."""
        return {"pool_index": self._index[self.validate(arch)]}

    def encode(self, spec: dict[str, int]) -> str:
        return self.archs[spec["pool_index"]]

    def mutate(self, arch: str, rng: random.Random) -> str:
        for _ in range(_MUTATE_TRIES):
            arch = self.base.mutate(arch, rng)
            if arch in self._index:
                return arch
        return rng.choice(self.archs)

    def size(self) -> int:
        return len(self.archs)

    def build(self, arch: str, *, in_chans: int, num_classes: int, img_size: int) -> nn.Module:
        return self.base.build(arch, in_chans=in_chans, num_classes=num_classes,
                               img_size=img_size)

    def features(self, arch: str) -> dict[str, float]:
        return self.base.features(arch)

    def validate(self, arch: str) -> str:
        self.base.validate(arch)
        if arch not in self._index:
            raise ArchError(Problem(f"{self.base.name} pool arch",
                                    "must be one of the pool's archs", arch,
                                    "search the whole space (drop space_pool) or add it to "
                                    "the pool file"))
        return arch


def read_pool(base: SearchSpace, path: str | Path) -> PoolSpace:
    """The pool in ``path`` (one arch per line; blank lines and ``#`` comments skipped), every
    arch checked against the base space: all bad lines are reported at once."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError.one("space_pool", "must be a file of arch strings", str(p),
                              "pass the path of a text file with one arch per line")
    archs = [line.split("#", 1)[0].strip() for line in p.read_text().splitlines()]
    archs = [a for a in archs if a]
    problems = []
    for i, arch in enumerate(archs):
        try:
            base.validate(arch)
        except ConfigError as err:
            problems += [Problem(f"space_pool line {i + 1}", f"must be a {base.name} arch",
                                 arch, e.fix) for e in err.problems]
    if problems:
        raise ConfigError(problems)
    if len(archs) < 2:
        raise ConfigError.one("space_pool", "must hold at least 2 archs", len(archs),
                              f"list the archs to search in {p}, one per line")
    return PoolSpace(base, archs)
