"""Flat choice tables shared by the spaces: sample, count, mutate and check them.

A space's spec is a flat ``{param: value}`` dict whose keys are the Optuna parameter names, so
``space.encode(trial.params)`` rebuilds the arch string of a finished trial. A table maps each
name to its allowed values: a ``range`` is ordinal and sampled with ``suggest_int`` (TPE and GP
then model its order), a tuple is categorical and sampled with ``suggest_categorical``. Every
name keeps one fixed table, since Optuna rejects a parameter whose distribution changes.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping
from typing import Any

Values = range | tuple
Table = Mapping[str, Values]


def suggest(trial: Any, name: str, values: Values) -> Any:
    if isinstance(values, range):
        return trial.suggest_int(name, values.start, values[-1], step=values.step)
    return trial.suggest_categorical(name, values)


def sample_params(trial: Any, table: Table) -> dict[str, Any]:
    """One value per name, in table order (the order fixes the random stream)."""
    return {name: suggest(trial, name, values) for name, values in table.items()}


def count(table: Table) -> int:
    return math.prod(len(values) for values in table.values())


def mutate_one(params: dict[str, Any], table: Table, rng: random.Random) -> dict[str, Any]:
    """Copy of ``params`` with one name of ``table`` set to another of its values."""
    name = rng.choice([n for n in table if len(table[n]) > 1])
    out = dict(params)
    out[name] = rng.choice([v for v in table[name] if v != params[name]])
    return out


def mutate_elastic(params: dict[str, Any], active: Table, count: str,
                   unit_table: Callable[[int], Table], rng: random.Random) -> dict[str, Any]:
    """``mutate_one`` on a space whose ``count`` (depth, groups) decides which units exist: a
    unit the mutation adds draws its choices from ``unit_table(i)``, one it removes loses them."""
    out = mutate_one(params, active, rng)
    for i in range(params[count] + 1, out[count] + 1):
        out |= {k: rng.choice(list(v)) for k, v in unit_table(i).items()}
    for i in range(out[count] + 1, params[count] + 1):
        for key in unit_table(i):
            out.pop(key)
    return out


def describe(values: Values) -> str:
    if isinstance(values, range):
        return f"{values.start}-{values[-1]}"
    return "|".join(str(v) for v in values)


def check(params: Mapping[str, Any], table: Table) -> list[str]:
    """A rule for every value outside its table (empty when all are allowed)."""
    return [f"{name} must be one of {describe(values)} (got {params[name]})"
            for name, values in table.items()
            if name in params and params[name] not in values]
