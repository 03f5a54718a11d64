"""The fidelity table and plot: each recipe's ranking against the truth, across seeds, and cost.

Per recipe, over the truth architectures it scored:

- tau vs truth: Kendall tau between the recipe's ``pcm@1d`` (mean over its seeds) and the
  truth's ``pcm@1d`` (digitally trained), with a 95% bootstrap interval over architectures;
- top-5 overlap: how many of the truth's 5 best the recipe also puts in its 5 best;
- tau seeds: Kendall tau between the recipe's scores under seed 0 and seed 1;
- seconds per candidate: median wall time of training and scoring one candidate;
- median SE and median seed gap (points): the reported standard error of one score (evaluation
  noise) next to how far one architecture's score moves between seed 0 and seed 1 (mostly
  training noise: initialisation and batch order).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _results import markdown
from fidelity_recipes import RECIPES, SCORES, TIMING
from fidelity_truth import DATA, ROOT
from scipy.stats import kendalltau

RESULTS = ROOT / "bench" / "results"
KEY = "acc_pcm@1d"


def _tau(a: np.ndarray, b: np.ndarray) -> float:
    return float(kendalltau(a, b).statistic) if len(a) >= 3 else float("nan")


def _bootstrap(a: np.ndarray, b: np.ndarray, n: int, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    taus = [_tau(a[i], b[i]) for i in (rng.integers(0, len(a), len(a)) for _ in range(n))]
    taus = [t for t in taus if np.isfinite(t)]
    return (float(np.percentile(taus, 2.5)), float(np.percentile(taus, 97.5))) if taus else (
        float("nan"), float("nan"))


# Below these counts a bootstrap interval of tau is degenerate (resamples of 4 points repeat
# points; a tau of 1 gives [1, 1]) and a top-5 overlap is trivially near 5/5.
MIN_BOOT, MIN_TOP = 6, 10


def _interval(a: np.ndarray, b: np.ndarray, n: int) -> str:
    if len(a) < MIN_BOOT:
        return f"n/a (< {MIN_BOOT} archs)"
    lo, hi = _bootstrap(a, b, n)
    return f"[{lo:.2f}, {hi:.2f}]"


def _top_overlap(a: np.ndarray, b: np.ndarray, k: int = 5) -> int:
    k = min(k, len(a))
    return len(set(np.argsort(-a)[:k]) & set(np.argsort(-b)[:k]))


def _seconds(recipe: str, mine: pd.DataFrame, timing: pd.DataFrame | None) -> float:
    """Median seconds per candidate: from the same-run timing (``fidelity.py time``) when it has
    the recipe, else from the scoring runs (which shared the host with other jobs)."""
    if timing is not None and recipe in set(timing.recipe):
        return float(timing[timing.recipe == recipe].seconds.median())
    return float(mine.seconds.median())


def rows(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
         timing: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    ref = truth[(truth.space == "resnet") & (truth.recipe == "digital")].set_index("arch")[KEY]
    out = []
    for recipe in [r for r in RECIPES if r in set(scores.recipe)]:
        mine = scores[scores.recipe == recipe]
        per_seed = mine.pivot_table(index="arch", columns="seed", values="acc")
        both = per_seed.dropna()
        row: dict[str, Any] = {"recipe": recipe, "archs scored": len(per_seed),
                               "s / candidate": _seconds(recipe, mine, timing)}
        row["median SE (pt)"] = 100 * float(mine.acc_se.median())
        if both.shape[1] >= 2:
            row["tau seeds"] = _tau(both.iloc[:, 0].values, both.iloc[:, 1].values)
            row["archs (seeds)"] = len(both)
            # training noise next to evaluation noise: how far one arch moves with the seed
            gap = (both.iloc[:, 0] - both.iloc[:, 1]).abs()
            row["median seed gap (pt)"] = 100 * float(gap.median())
        common = per_seed.mean(axis=1).index.intersection(ref.index)
        if len(common):
            a, b = per_seed.mean(axis=1)[common].values, ref[common].values
            row.update({"tau vs truth": _tau(a, b), "95% CI": _interval(a, b, bootstrap),
                        "top-5 overlap": f"{_top_overlap(a, b)}/5" if len(a) >= MIN_TOP
                        else f"n/a (< {MIN_TOP} archs)", "archs (truth)": len(common)})
        out.append(row)
    return out


def plot(table: pd.DataFrame, path: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4))
    ax = fig.subplots()
    for _, r in table.iterrows():
        for col, marker in (("tau vs truth", "o"), ("tau seeds", "s")):
            if col in r and np.isfinite(r.get(col, np.nan)):
                ax.scatter(r["s / candidate"], r[col], marker=marker,
                           c="C0" if marker == "o" else "C1")
                ax.annotate(r["recipe"], (r["s / candidate"], r[col]), fontsize=7,
                            xytext=(3, 3), textcoords="offset points")
    ax.scatter([], [], marker="o", c="C0", label="Kendall tau vs truth (pcm@1d)")
    ax.scatter([], [], marker="s", c="C1", label="Kendall tau, seed 0 vs seed 1")
    ax.set_xlabel("seconds per candidate (median, 1 CPU thread)")
    ax.set_ylabel("Kendall tau")
    ax.axhline(0.8, ls="--", c="0.5", lw=0.8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def write(*, bootstrap: int = 2000) -> str:
    truth = pd.read_csv(DATA / "truth.csv") if (DATA / "truth.csv").stat().st_size > 1 else (
        pd.DataFrame(columns=["space", "arch", "recipe", KEY]))
    scores = pd.read_csv(SCORES)
    timing = pd.read_csv(TIMING) if TIMING.is_file() else None
    table = pd.DataFrame(rows(truth, scores, bootstrap, timing))
    plot(table, RESULTS / "fidelity" / "tau_vs_cost.png")
    text = markdown(table.to_dict("records"))
    (RESULTS / "fidelity.md").write_text(_page(text, truth, scores, timing))
    return text


def _page(text: str, truth: pd.DataFrame, scores: pd.DataFrame,
          timing: pd.DataFrame | None) -> str:
    n_truth = int(((truth.space == "resnet") & (truth.recipe == "digital")).sum()) if len(
        truth) else 0
    when = (f"Seconds per candidate: `python bench/fidelity.py time` ({timing.arch.nunique()} "
            f"cheapest truth archs, every recipe in one process, seed 0, "
            f"{int(timing.threads.iloc[0])} thread), where it has the recipe; else the "
            "scoring runs' median." + _asis(timing) + "\n\n" if timing is not None else "")
    return (f"## Fidelity: ranking quality of scoring recipes\n\n"
            f"Command: `python bench/fidelity.py report` (after `truth` and `score`), "
            f"1 CPU thread per process. Truth set: {n_truth} resnet architectures so far "
            f"(bench/data/fidelity/truth.csv, recipe in recipe.json); recipe scores: "
            f"{len(scores)} candidate evaluations (scores.csv).\n\n{when}{text}\n\n"
            f"![tau vs cost](fidelity/tau_vs_cost.png)\n{_findings()}")


def _asis(timing: pd.DataFrame) -> str:
    """The quickstart recipe's cost as 637f7ed ran it (a validation pass per epoch), same run."""
    old = timing[timing.recipe == "quickstart_637f7ed"].seconds
    if old.empty:
        return ""
    return (f" The quickstart recipe as 637f7ed ran it (`quickstart_637f7ed`: the same scores, "
            f"plus a pass over the 6,000 validation images after each epoch) took "
            f"{old.median():.1f} s per candidate in the same run.")


def _findings() -> str:
    """The reading of the figures, written by hand next to the data it reads."""
    path = DATA / "findings.md"
    return "\n" + path.read_text() if path.is_file() else ""
