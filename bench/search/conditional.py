"""Search quality on the conditional ``resnet`` space: hypervolume at 100 and 300 evaluations.

``resnet`` is define-by-run: groups 2-4 exist only when ``groups`` is large enough, so a
sampler that works on the parameters every trial shares sees only stem, groups and group 1.
NB201 (``bench/search/quality.py``) has no such choices. Objectives, from the project's data:

* accuracy up: a ridge surrogate of pcm@1d accuracy (1 day of drift) over log params, log
  MACs, depth and conv count, fitted on the fidelity truth's resnet archs (trained on
  Fashion-MNIST) as pinned in ``bench/data/search_conditional_surrogate.csv``; its
  leave-one-out Kendall tau is reported. The pin keeps the objective fixed while the truth
  grows, so runs of different days share one table; ``--pin`` refits it on today's
  ``truth.csv``, after which every sampler must be run again;
* log10 parameters down (the analog tiles an arch needs), counted exactly from the space's
  layout (``counts``, checked against ``search_spaces.stats`` in the tests).

Each sampler runs ``--seeds`` searches (the same seeds for all). The hypervolume is a share of
the front of every arch any search evaluated (the best known front; the space has 2.9 million
archs). Reference point: the lowest surrogate accuracy and the largest log params seen. NSGA-II
gets a population of a tenth of the budget, so it runs once per budget. Medians, quartiles and
two-sided Mann-Whitney p-values against the default go to ``bench/results/search_conditional.md``.

    python -m bench.search.conditional --seeds 10
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import tempfile
import time
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np
import optuna
from scipy.stats import kendalltau

from bench import DATA, RESULTS, command_line
from bench.search.quality import _cell, _p_value
from hwnas.common.provenance import provenance
from nas.algorithms.pareto import hypervolume, pareto_mask
from nas.algorithms.samplers import make_sampler
from search_spaces import get_space, layout

OUT = RESULTS / "search_conditional.md"
PINNED = DATA / "search_conditional_surrogate.csv"  # the surrogate's training set (``pin``)
RAW = Path(tempfile.gettempdir()) / "search_conditional_raw.json"  # every evaluated arch: large
SAMPLERS = ("default", "tpe_mv", "nsga2", "gp", "random")
DIRS = ["maximize", "minimize"]
SHAPE = (1, 28, 28)  # Fashion-MNIST, the truth's data set
CLASSES = 10
RIDGE = 1.0  # on standardised features: 24 truth archs carry a few coefficients at most


def counts(arch: str, shape: tuple[int, int, int] = SHAPE) -> tuple[int, int]:
    """(params, MACs) of a ``resnet`` arch from its layout, without building it: convs and
    the classifier count MACs, batch norms count parameters only (as ``FlopCounterMode``)."""
    p = get_space("resnet").decode(arch)
    strides = layout.stride_plan(shape[1], p["groups"], stem_above=layout.STEM_HALVE_ABOVE)
    side = (shape[1] - 1) // strides[0] + 1
    params, macs = _conv(shape[0], p["stem"], 3, side)
    cin = p["stem"]
    for g in range(1, p["groups"] + 1):
        for b in range(p[f"g{g}_blocks"]):
            stride = strides[g - 1] if g > 1 and b == 0 else 1
            cout, side = p[f"g{g}_width"], (side - 1) // stride + 1
            for cin_k, k in [(cin, 3), (cout, 3)] * p[f"g{g}_branches"] + (
                    [(cin, 1)] if stride != 1 or cin != cout else []):
                pc, mc = _conv(cin_k, cout, k, side)
                params, macs = params + pc, macs + mc
            cin = cout
    return params + cin * CLASSES + CLASSES, macs + cin * CLASSES


def _conv(cin: int, cout: int, k: int, side: int) -> tuple[int, int]:
    """A bias-free conv and its batch norm: (params, MACs at an output ``side``)."""
    weights = cin * cout * k * k
    return weights + 2 * cout, weights * side * side


@cache
def features(arch: str) -> tuple[float, ...]:
    params, macs = counts(arch)
    p = get_space("resnet").decode(arch)
    gs = range(1, p["groups"] + 1)
    depth = 2 * sum(p[f"g{g}_blocks"] for g in gs) + 1
    convs = sum(2 * p[f"g{g}_blocks"] * p[f"g{g}_branches"] for g in gs) + 1
    return math.log(params), math.log(macs), float(depth), float(convs)


class Surrogate:
    """Ridge regression of pcm@1d accuracy on ``features``, fitted on the fidelity truth."""

    def __init__(self, archs: list[str], acc: list[float]):
        x = np.array([features(a) for a in archs])
        self.mean, self.std = x.mean(axis=0), x.std(axis=0)
        self.coef, self.icpt = _ridge((x - self.mean) / self.std, np.array(acc))

    @classmethod
    def from_truth(cls) -> Surrogate:
        archs, acc = truth()
        return cls(archs, acc)

    def __call__(self, arch: str) -> float:
        z = (np.array(features(arch)) - self.mean) / self.std
        return float(z @ self.coef + self.icpt)


def truth() -> tuple[list[str], list[float]]:
    """The surrogate's archs and their pcm@1d accuracy, as pinned (``PINNED``)."""
    with open(PINNED) as f:
        rows = list(csv.DictReader(f))
    return [r["arch"] for r in rows], [float(r["acc_pcm@1d"]) for r in rows]


def pin() -> int:
    """Pin today's resnet truth (each arch's mean pcm@1d over the truth's rows) as the
    surrogate's training set; returns how many archs."""
    by_arch: dict[str, list[float]] = {}
    with open(DATA / "fidelity" / "truth.csv") as f:
        for row in csv.DictReader(f):
            if row["space"] == "resnet":
                by_arch.setdefault(row["arch"], []).append(float(row["acc_pcm@1d"]))
    with open(PINNED, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["arch", "acc_pcm@1d"])
        out.writerows([a, repr(float(np.mean(v)))] for a, v in by_arch.items())
    return len(by_arch)


def _ridge(z: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    icpt = float(y.mean())
    coef = np.linalg.solve(z.T @ z + RIDGE * np.eye(z.shape[1]), z.T @ (y - icpt))
    return coef, icpt


def loo_tau() -> float:
    """Kendall tau between each truth arch's accuracy and the surrogate fitted without it."""
    archs, acc = truth()
    pred = [Surrogate(archs[:i] + archs[i + 1:], acc[:i] + acc[i + 1:])(archs[i])
            for i in range(len(archs))]
    return float(kendalltau(pred, acc).statistic)


def run_search(sampler: str, seed: int, n: int, surrogate: Surrogate) -> list[str]:
    """The archs a sampler evaluates in ``n`` trials, in order."""
    space = get_space("resnet")
    archs: list[str] = []

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = space.sample(trial)
        archs.append(arch)
        return values(arch, surrogate)

    options = {"population_size": max(n // 10, 2)} if sampler == "nsga2" else None
    study = optuna.create_study(directions=DIRS, sampler=make_sampler(sampler, seed=seed,
                                                                      options=options))
    study.optimize(objective, n_trials=n)
    return archs


def values(arch: str, surrogate: Surrogate) -> tuple[float, float]:
    return surrogate(arch), math.log10(counts(arch)[0])


def hv_shares(runs: dict[str, dict[str, dict[str, list[str]]]], surrogate: Surrogate) -> dict:
    """{sampler: {budget: [HV share per seed]}}, as shares of the union's front."""
    union = sorted({a for s in runs.values() for b in s.values() for r in b.values() for a in r})
    table = np.array([values(a, surrogate) for a in union])
    ref = [float(table[:, 0].min()), float(table[:, 1].max())]
    best = hypervolume(table[pareto_mask(table, DIRS)], DIRS, ref)
    out: dict = {}
    for name, by_budget in runs.items():
        for budget, by_seed in by_budget.items():
            out.setdefault(name, {})[budget] = [
                hypervolume(_front(archs[:int(budget)], surrogate), DIRS, ref) / best
                for archs in by_seed.values()]
    return {"hv": out, "archs": len(union), "ref": ref}


def _front(archs: list[str], surrogate: Surrogate) -> np.ndarray:
    vals = np.array([values(a, surrogate) for a in archs])
    return vals[pareto_mask(vals, DIRS)]


def measure(samplers: list[str], seeds: range, budgets: list[int], surrogate: Surrogate,
            raw: dict, save: Callable[[], None]) -> None:
    """Every search's evaluated archs into ``raw["runs"]`` ({sampler: {budget: {seed: archs}}})
    and its wall time into ``raw["seconds"]``, saved after each search (a long sampler can be
    stopped and still reported). One search per seed serves every budget (its first ``b``
    trials), except NSGA-II, whose population depends on the budget."""
    runs, secs = raw.setdefault("runs", {}), raw.setdefault("seconds", {})
    for name in samplers:
        secs[name] = []
        for budget in budgets if name == "nsga2" else [max(budgets)]:
            for seed in seeds:
                t0 = time.perf_counter()
                archs = run_search(name, seed, budget, surrogate)
                secs[name].append(time.perf_counter() - t0)
                for b in budgets if name != "nsga2" else [budget]:
                    runs.setdefault(name, {}).setdefault(str(b), {})[str(seed)] = archs
                save()
            print(name, budget, f"{np.median(secs[name]):.1f} s/search", flush=True)


def report(raw: dict, surrogate: Surrogate) -> str:
    shares = hv_shares(raw["runs"], surrogate)
    budgets = sorted({int(b) for s in shares["hv"].values() for b in s})
    mine = shares["hv"].get("default", {})  # a process that ran other samplers only
    lines = [
        "## Search quality on the conditional `resnet` space", "",
        f"Command: `{raw['command']}`", "",
        "Objectives: a ridge surrogate of pcm@1d accuracy fitted on the "
        f"{len(truth()[0])} resnet fidelity-truth archs pinned in "
        f"`{PINNED.relative_to(DATA.parent.parent)}` (leave-one-out Kendall tau "
        f"{raw['loo_tau']:.2f}), up; log10 parameters (exact, from the layout), down. "
        "Hypervolume as a share of the front of all "
        f"{shares['archs']:,} archs any search evaluated; reference point: the lowest "
        "accuracy and the largest log params among them. Median [p25, p75] over "
        "seeds (n per cell); p: two-sided Mann-Whitney U against `default`. NSGA-II's "
        "population is a tenth of the budget. s/search: median wall time of one search at "
        "the sampler's largest budget.", "",
        "| sampler | " + " | ".join(f"HV@{b} | p@{b}" for b in budgets) + " | s/search |",
        "|---|" + "---|---|" * len(budgets) + "---|"]
    for name, by_budget in shares["hv"].items():
        cells = []
        for b in budgets:
            hv = by_budget.get(str(b))
            if not hv:  # a sampler too slow to run at this budget
                cells += ["not run", "-"]
                continue
            p = f"{_p_value(mine[str(b)], hv):.3g}" if name != "default" and mine else "-"
            cells += [f"{_cell(hv)} (n={len(hv)})", p]
        lines.append(f"| {name} | " + " | ".join(cells)
                     + f" | {np.median(raw['seconds'][name]):.1f} |")
    prov = provenance("cpu")
    lines += ["", f"Device: {prov['device']}, shared with other jobs (wall times are "
              "indicative); versions: " + ", ".join(
                  f"{k} {v}" for k, v in prov["versions"].items() if k in ("python", "optuna",
                                                                         "numpy")),
              f"git {prov['git']}, {prov['time_utc']}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds run are first-seed .. first-seed+seeds-1 (more seeds of a slow "
                         "sampler in another process, merged by --raw)")
    ap.add_argument("--budgets", default="100,300")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--raw", type=Path, nargs="+", default=[RAW],
                    help="raw JSON: written to the first; the report merges all (a slow "
                         "sampler can run in its own process)")
    ap.add_argument("--report", action="store_true", help="only rewrite the report from --raw")
    ap.add_argument("--pin", action="store_true",
                    help="refit the surrogate on today's truth.csv (then rerun every sampler)")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    if args.pin:
        print(f"pinned {pin()} archs to {PINNED}")
        return
    surrogate = Surrogate.from_truth()
    if not args.report:
        raw = {"command": command_line(), "seeds": args.seeds, "loo_tau": loo_tau()}
        budgets = [int(b) for b in args.budgets.split(",")]
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        measure(args.samplers.split(","), seeds, budgets, surrogate, raw,
                lambda: args.raw[0].write_text(json.dumps(raw)))
    text = report(merge([json.loads(p.read_text()) for p in args.raw if p.exists()]),
                  surrogate)
    print(text)
    OUT.write_text(text + "\n")


def merge(raws: list[dict]) -> dict:
    """One raw from several processes' (their samplers side by side, their commands listed)."""
    out: dict = {"runs": {}, "seconds": {}, "command": "`; `".join(r["command"] for r in raws),
                 "seeds": max(r["seeds"] for r in raws), "loo_tau": raws[0]["loo_tau"]}
    for r in raws:  # per seed: one sampler's seeds may come from several processes
        for name, by_budget in r["runs"].items():
            for budget, by_seed in by_budget.items():
                out["runs"].setdefault(name, {}).setdefault(budget, {}).update(by_seed)
        for name, secs in r["seconds"].items():
            out["seconds"].setdefault(name, []).extend(secs)
    return out


if __name__ == "__main__":
    main()
