"""Can a study's cost budgets be met at all? Checked by ``--check`` before any work.

A budget below every candidate's cost passes the file's own rules (it is positive) and then
turns every trial infeasible, after the search has spent its time. Here a seeded sample of the
space is costed: parameter count and MACs exactly (on the meta device, no time), latency by one
measurement of the sample's fewest-MACs candidate at the study's latency setting. A sample
cannot prove that no rarer candidate fits, so the rule reads "below every sampled candidate"
and the fix names the smallest one seen. Latency is refused only under half the smallest
candidate's measured latency: a candidate with more MACs is rarely twice as fast, and timing
noise on a busy host is well under 2x.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from hwnas.common.errors import Problem
from nas.scoring import glue
from nas.scoring.evaluate import Evaluator
from search_spaces.stats import reference_stats

if TYPE_CHECKING:
    from nas.study.config import StudyConfig
    from nas.study.objectives import Budget

SAMPLE = 32  # candidates costed; exact counts take milliseconds each on the meta device
STATIC = ("params", "macs")
LATENCY_SLACK = 0.5  # refuse a latency budget under this share of the smallest one's latency


def _capped(cfg: StudyConfig) -> list[tuple[int, Budget]]:
    return [(i, b) for i, b in enumerate(cfg.budgets())
            if b.max is not None and b.key in (*STATIC, "latency_ms")]


def _sample(cfg: StudyConfig, n: int, seed: int) -> tuple[dict[str, dict[str, float]], tuple,
                                                            int]:
    """``{arch: {"params", "macs"}}`` of ``n`` seeded draws, with the data's input shape and
    class count."""
    ev = Evaluator(cfg)  # the space and the data set exactly as the search will read them
    space, data = ev.space, ev.data
    shape, classes = tuple(data.input_shape), data.num_classes
    rng = random.Random(seed)
    archs = {space.random_arch(rng) for _ in range(n)}
    stats = {}
    for arch in sorted(archs):
        params, macs = reference_stats(space, arch, shape, classes)
        stats[arch] = {"params": float(params), "macs": float(macs)}
    return stats, shape, classes


def reach_problems(cfg: StudyConfig, n: int = SAMPLE, seed: int = 0) -> list[Problem]:
    """A ``Problem`` per cost budget no sampled candidate meets (none without a cost budget, or
    on a table study: its rows hold every candidate's cost and the search reads them)."""
    capped = _capped(cfg)
    if not capped or cfg.tabular is not None:
        return []
    stats, shape, classes = _sample(cfg, n, seed)
    out = []
    for i, b in capped:
        where = f"constraints[{i}].max"
        if b.key in STATIC:
            arch = min(stats, key=lambda a: stats[a][b.key])
            low = stats[arch][b.key]
            if b.max < low:
                out.append(Problem(
                    where, f"below the {b.key} of every one of {len(stats)} sampled candidates "
                    f"(smallest: {low:,.0f}, {arch})", b.max,
                    f"raise it to at least {low:,.0f}, or search a smaller space"))
            continue
        arch = min(stats, key=lambda a: stats[a]["macs"])
        metrics, _ = glue.costs(cfg, cfg.space, arch, shape, classes)
        low = metrics["latency_ms"]
        if b.max < LATENCY_SLACK * low:
            out.append(Problem(
                where, f"below half the latency of the fewest-MACs of {len(stats)} sampled "
                f"candidates ({arch}: {low:.3g} ms measured on {cfg.latency.device}, batch "
                f"{cfg.latency.batch_size})", b.max,
                f"raise it to at least {low:.3g} ms, or measure on a faster device"))
    return out
