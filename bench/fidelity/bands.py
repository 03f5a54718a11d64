"""Truth v2: archs in latency bands, so that a fidelity figure measures ranking at equal cost.

The first truth set was spread evenly over log-MACs, so it mostly asked "is bigger better?",
which a parameter count answers for free. Here every truth arch belongs to a band of archs whose
measured latency (the quickstart's setting: batch 1, fp32, one CPU thread) lies within
``WIDTH`` of the band's centre, all inside the quickstart's 5 ms budget. Inside a band, the
ranking a recipe gets right is ranking that size and speed cannot give.

    python -m bench.fidelity bands --sample 240        # measure, pick, write bands.json

Archs already in the truth set are preferred when they fall in a band (their units are reused);
the rest are drawn from the measured sample nearest the centre. ``bands.json`` keeps each arch's
band, latency (median, CI) and MACs/params; the set only grows, like archs.json.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

from bench.fidelity import truth

BANDS = truth.DATA / "bands.json"
# The quickstart's latency setting (studies/quickstart.yaml), so a band is what its budget sees.
# The clock is the timing thread's CPU time: the host is shared while truth workers run, and a
# wall-clock band would move with the load (at idle the two clocks agree within a few percent).
LATENCY = {"device": "cpu", "batch_size": 1, "dtype": "fp32", "threads": 1, "max_seconds": 1.0,
           "clock": "thread"}
INPUT, CLASSES = (1, 28, 28), 10
# mbconv: 170 random archs measured 3.5-13 ms at this setting (2026-11-27, AMD EPYC); 5 and 8 ms
# hold 28 and 39 of them, the densest part of that range, and the first lies at the quickstart's
# 5 ms budget.
CENTRES_MS = {"resnet": (0.85, 1.5, 2.2), "mbconv": (5.0, 8.0)}
WIDTH = 1.12  # a band holds archs within x/WIDTH .. x*WIDTH of its centre (about +-12%)
PER_BAND = {"resnet": 8, "mbconv": 6}


def measure(space: str, archs: list[str]) -> dict[str, dict[str, float]]:
    """Latency (cached by the cost cache, the study's key) and size of each arch."""
    from hw_cost import MeasureSpec, cost_of

    out = {}
    for arch in archs:
        c = cost_of(space, arch, input_shape=INPUT, num_classes=CLASSES,
                    spec=MeasureSpec(**LATENCY), cache=True)
        out[arch] = {"latency_ms": float(c["latency_ms"]), "params": float(c["params"]),
                     "macs": float(c["macs"]), "latency_cv": float(c.get("latency_cv", 0.0))}
    return out


# Most random resnet archs take far longer than the 5 ms budget; archs with at most this many
# groups (resolution stages) hold the ones inside it, so they are the ones measured.
MAX_GROUPS = {"resnet": 2}


def candidates(space: str, n: int, seed: int = 0) -> list[str]:
    """``n`` random archs of the space (resnet: at most ``MAX_GROUPS`` groups) plus the first
    truth set's: their measured latency decides the bands."""
    from search_spaces import get_space

    sp = get_space(space)
    rng = random.Random(seed)
    limit = MAX_GROUPS.get(space, 99)
    draws = (sp.random_arch(rng) for _ in range(100 * n))
    pool = [a for a in dict.fromkeys(draws) if a.count("-") <= limit][:n]
    old = json.loads(truth.DATA.joinpath("archs.json").read_text()).get(space, [])
    return list(dict.fromkeys([*old, *pool, *_one_group(space)]))


def _one_group(space: str) -> list[str]:
    """Every one-group resnet arch (108): the fastest band needs all the small archs there are."""
    if space != "resnet":
        return []
    from search_spaces.resnet import BLOCKS, BRANCHES, STEMS, WIDTHS

    return [f"rn:s{s}-d{d}r{r}c{w}" for s in STEMS for d in BLOCKS for r in BRANCHES
            for w in WIDTHS[0]]


def pick(space: str, measured: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    """``PER_BAND`` archs per band centre: old truth archs first, then nearest the centre
    (in log latency), spread over params so a band is not one size."""
    old = set(json.loads(truth.DATA.joinpath("archs.json").read_text()).get(space, []))
    bands: dict[str, list[str]] = {}
    for centre in CENTRES_MS[space]:
        inside = [a for a, m in measured.items()
                  if centre / WIDTH <= m["latency_ms"] <= centre * WIDTH]
        inside.sort(key=lambda a: (a not in old,
                                   abs(math.log(measured[a]["latency_ms"] / centre))))
        bands[f"{centre:g}ms"] = inside[: PER_BAND[space]]
    return bands


def write(space: str, bands: dict[str, list[str]], measured: dict[str, Any]) -> Path:
    doc = json.loads(BANDS.read_text()) if BANDS.is_file() else {}
    have = doc.get(space, {}).get("bands", {})
    for name, archs in bands.items():  # the set only grows: a band keeps what it had
        have[name] = have.get(name, []) + [a for a in archs if a not in have.get(name, [])]
    doc[space] = {"setting": {**LATENCY, "input_shape": INPUT, "num_classes": CLASSES},
                  "width": WIDTH, "bands": have,
                  "archs": {a: measured[a] for names in have.values() for a in names
                            if a in measured}}
    BANDS.write_text(json.dumps(doc, indent=1))
    return BANDS


def band_archs(space: str) -> list[str]:
    """Every banded arch of ``space``, interleaved across bands so a partly built truth set
    has every band partly filled."""
    doc = json.loads(BANDS.read_text()) if BANDS.is_file() else {}
    bands = list(doc.get(space, {}).get("bands", {}).values())
    order = [a for i in range(max(map(len, bands), default=0)) for b in bands if i < len(b)
             for a in [b[i]]]
    return list(dict.fromkeys(order))


def band_of(space: str) -> dict[str, str]:
    doc = json.loads(BANDS.read_text()) if BANDS.is_file() else {}
    return {a: name for name, archs in doc.get(space, {}).get("bands", {}).items() for a in archs}


SECOND_SEED = 1001  # the truth's second training seed: disjoint from the recipes' seeds 0-2
N_SECOND = 9  # archs trained again under it: 3 per resnet band


def second_seed_archs(space: str = "resnet") -> list[str]:
    """Per band, the archs already trained under the second seed, then those whose seed-0
    truth is done (then the fastest): each second-seed unit pairs with a finished first seed as
    soon as it finishes, and an arch that finishes later never displaces one already started."""
    doc = json.loads(BANDS.read_text()) if BANDS.is_file() else {}
    entry = doc.get(space, {})
    lat = {a: m["latency_ms"] for a, m in entry.get("archs", {}).items()}
    per = max(1, N_SECOND // max(1, len(entry.get("bands", {}))))

    def order(arch: str) -> tuple[bool, bool, float]:
        return (not truth.Unit(space, arch, "train", SECOND_SEED).done(),
                not truth.Unit(space, arch, "score").done(), lat.get(arch, 0.0))

    return [a for archs in entry.get("bands", {}).values() for a in sorted(archs, key=order)[:per]]


def plan_v2() -> list[truth.Unit]:
    """Truth v2's work in order: the resnet bands (seed 0), interleaved with the second seed
    on ``N_SECOND`` of them; then the mbconv bands; then HWA for everything at seed 0."""
    first = [truth.Unit("resnet", a, p) for a in band_archs("resnet") for p in ("train", "score")]
    # A second seed is read only beside its first: those whose seed 0 is scored go in between,
    # the others after every first seed.
    ready = [a for a in second_seed_archs() if truth.Unit("resnet", a, "score").done()]
    later = [a for a in second_seed_archs() if a not in ready]
    again = [truth.Unit("resnet", a, p, SECOND_SEED) for a in ready for p in ("train", "score")]
    mixed = [u for pair in zip(first, again + [None] * len(first), strict=False) for u in pair if u]
    mixed += again[len(first):]
    mixed += [truth.Unit("resnet", a, p, SECOND_SEED) for a in later for p in ("train", "score")]
    mb = [truth.Unit("mbconv", a, p) for a in band_archs("mbconv") for p in ("train", "score")]
    hwa = [truth.Unit(s, a, p) for s in ("resnet", "mbconv") for a in band_archs(s)
           for p in ("hwa", "score_hwa")]
    return mixed + mb + hwa
