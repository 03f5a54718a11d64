"""Sampler registry: ``default`` (ours) and Optuna's nsga2, nsga3, tpe, gp and random samplers.

Every factory takes the seed plus the options written under ``sampler.options`` in a study file;
the accepted option names are the keyword arguments of the sampler class, so a typo is reported
before the first trial. ``tpe`` is Optuna's plain TPE (what a user runs without us); ``tpe_mv`` is
its multivariate, grouped, constant-liar variant, kept for the search-quality benchmark.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from typing import Any

import optuna
from optuna.samplers import BaseSampler

from hwnas.common.errors import ConfigError
from hwnas.common.registry import Registry
from nas.algorithms.hybrid import HybridSampler

SamplerFactory = Callable[..., BaseSampler]
SAMPLERS: Registry[tuple[type[BaseSampler], dict[str, Any]]] = Registry("sampler")

# name -> (class, fixed keyword arguments); options from the study file come on top.
SAMPLERS.register("default")((HybridSampler, {}))
SAMPLERS.register("tpe")((optuna.samplers.TPESampler, {}))
SAMPLERS.register("tpe_mv")((optuna.samplers.TPESampler,
                             {"multivariate": True, "group": True, "constant_liar": True}))
SAMPLERS.register("nsga2")((optuna.samplers.NSGAIISampler, {}))
SAMPLERS.register("nsga3")((optuna.samplers.NSGAIIISampler, {}))
SAMPLERS.register("gp")((optuna.samplers.GPSampler, {}))
SAMPLERS.register("random")((optuna.samplers.RandomSampler, {}))


def list_samplers(pattern: str = "*") -> list[str]:
    return SAMPLERS.list(pattern)


def option_names(name: str) -> list[str]:
    cls, fixed = SAMPLERS.get(name)
    params = inspect.signature(cls.__init__).parameters
    return sorted(p for p in params if p not in ("self", "seed", "constraints_func", *fixed)
                  and params[p].kind in (params[p].KEYWORD_ONLY, params[p].POSITIONAL_OR_KEYWORD))


def option_problems(name: str, options: dict[str, Any]) -> list[str]:
    """Unknown option names for sampler ``name`` (empty when all are accepted)."""
    if name not in SAMPLERS:
        return []
    known = option_names(name)
    return [k for k in options if k not in known]


def make_sampler(name: str, *, seed: int, options: dict[str, Any] | None = None) -> BaseSampler:
    """A seeded sampler instance; the same ``(name, seed, options)`` proposes the same trials."""
    cls, fixed = SAMPLERS.get(name)
    options = dict(options or {})
    bad = option_problems(name, options)
    if bad:
        raise ConfigError.one(f"sampler.options ({name})", "option names must be known", bad,
                              f"use some of {option_names(name)}")
    with warnings.catch_warnings():  # "group is experimental": a deliberate choice, not news
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return cls(seed=seed, **fixed, **options)
