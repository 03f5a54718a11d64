"""Free baselines for the fidelity table: what a score must beat to be worth its seconds.

Per truth arch: parameter count and MACs (static), measured latency (the quickstart's setting,
from the cost cache that ``bench.fidelity bands`` filled), and two zero-cost proxies computed at
initialisation (``nas.scoring.zero_cost``): ``synflow`` and ``naswot``, each under the recipe
seeds (the model a study with that seed would build, never trained), with their seconds.

    python -m bench.fidelity baselines --seeds 1,2

Rows go to ``bench/data/fidelity/baselines.csv`` (one per arch and seed; rows already there
are kept).
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
import torch

from bench.fidelity import bands
from bench.fidelity.truth import DATA

BASELINES = DATA / "baselines.csv"
NASWOT_IMAGES = 64


def stored_latency(table: pd.DataFrame | None = None) -> pd.Series:
    """Each arch's latency as its baselines row recorded it (ms; ``table`` defaults to
    baselines.csv). The yardstick and the front's pool both read it from here, so that which
    archs fit the budget does not move with this machine's cost cache or its load."""
    if table is None:
        table = pd.read_csv(BASELINES) if BASELINES.is_file() else pd.DataFrame()
    return table.groupby("arch").latency_ms.first() if len(table) else pd.Series(dtype=float)


def _built(space: str, arch: str, seed: int, data: Any) -> torch.nn.Module:
    """The model a study with ``seed`` builds for ``arch`` (its seeded initialisation)."""
    from hwnas.common.seeds import TrialSeeds
    from search_spaces import get_space

    with torch.random.fork_rng():
        torch.manual_seed(TrialSeeds(seed).init)
        return get_space(space).build_for(arch, data)


def row(space: str, arch: str, seed: int, data: Any,
        measured: dict[str, dict[str, float]]) -> dict[str, Any]:
    from nas.scoring.zero_cost import naswot, synflow

    model = _built(space, arch, seed, data)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randperm(len(data.x_train), generator=gen)[:NASWOT_IMAGES]
    out: dict[str, Any] = {"space": space, "arch": arch, "seed": seed,
                           "params": sum(p.numel() for p in model.parameters())}
    out.update({k: measured.get(arch, {}).get(k) for k in ("macs", "latency_ms")})
    start = time.perf_counter()
    out["synflow"] = synflow(model, tuple(data.x_train.shape[1:]))
    out["synflow_s"] = time.perf_counter() - start
    start = time.perf_counter()
    out["naswot"] = naswot(model, data.x_train[idx])
    out["naswot_s"] = time.perf_counter() - start
    return out


def compute(space: str, archs: list[str], seeds: list[int]) -> pd.DataFrame:
    from hwnas.train.data import load_data

    data = load_data(name="fashion_mnist", val_fraction=0.0, seed=0)
    measured = bands.measure(space, archs)  # cache hits for every banded arch
    have = pd.read_csv(BASELINES) if BASELINES.is_file() else pd.DataFrame()
    done = set(zip(have.arch, have.seed, strict=True)) if len(have) else set()
    new = [row(space, a, s, data, measured) for a in archs for s in seeds if (a, s) not in done]
    table = pd.concat([have, pd.DataFrame(new)], ignore_index=True)
    table.to_csv(BASELINES, index=False)
    return table
