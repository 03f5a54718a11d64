"""The fidelity table and plot (yardstick v2): each scorer's ranking of the truth at equal cost.

Rows are scorers: the free baselines (parameter count, MACs, measured latency, the zero-cost
proxies ``synflow`` and ``naswot`` at initialisation; bench/fidelity/baselines.py) and every
recipe under each seed it ran, one row per seed, since a study runs one seed. A mean over seeds is
its own row, labelled with its real cost (seeds x seconds). Seed 0 shares its initial weights and
programming seeds with the truth, so its rows are marked; seeds 1 and 2 are disjoint from it.

Columns (bench/fidelity/measures.py): Kendall tau against the truth; the headline measures at
equal cost, residual tau after log(params) and concordance on pairs whose latencies are within
1.25x (number of pairs in brackets); the mean tau inside truth v2's latency bands where the truth
has them; top-5 overlap; seconds per candidate: from the same-run timing (``bench.fidelity time``)
where it has the recipe, and ``s (its runs)``, the median of the scoring runs themselves (which
shared a loaded host: compare them only with each other). Intervals: 95% bootstrap over archs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from bench import RESULTS
from bench._results import markdown
from bench.fidelity import bands, front
from bench.fidelity import measures as fm
from bench.fidelity.baselines import BASELINES as BASE_CSV
from bench.fidelity.baselines import stored_latency
from bench.fidelity.recipes import RECIPES, SCORES, TIMING
from bench.fidelity.truth import DATA
from nas.algorithms.pareto import comparison_se
from nas.algorithms.shrink import shrunk

KEY = "acc_pcm@1d"
# A recipe that scores another hardware model is ranked against the truth's column of that
# model (scored on the same trained weights), where the truth has it.
RECIPE_KEY = {"default_static": "acc_pcm_static@1d"}
BAND_RATIO = 1.25
# The quickstart's latency budget: archs above it are never trained by such a study, so the
# yardstick ranks the truth archs inside it (their latency as bands.json measured it).
BUDGET_MS = 5.0
# Per space: mbconv's truth is its two latency bands (bands.json), all of it ranked.
SPACE_BUDGET_MS: dict[str, float | None] = {"resnet": BUDGET_MS, "mbconv": None}
# Below these counts a bootstrap interval of tau is degenerate (resamples of 4 points repeat
# points; a tau of 1 gives [1, 1]) and a top-5 overlap is trivially near 5/5.
MIN_BOOT, MIN_TOP = 6, 10
# Baseline scores: larger means "predicted better" (a larger net ranks higher, as on the truth).
BASELINES = ("params", "macs", "latency_ms", "synflow", "naswot")


def _seconds(recipe: str, mine: pd.DataFrame, timing: pd.DataFrame | None) -> float:
    """Median seconds per candidate: from the same-run timing (``bench.fidelity time``) when it has
    the recipe, else from the scoring runs (which shared the host with other jobs)."""
    if timing is not None and recipe in set(timing.recipe):
        return float(timing[timing.recipe == recipe].seconds.median())
    return float(mine.seconds.median())


def _ci(fn, cols: list[np.ndarray], n: int) -> str:  # noqa: ANN001
    if len(cols[0]) < MIN_BOOT or n <= 0:
        return "n/a"
    lo, hi = fm.bootstrap(fn, cols, n)
    return f"[{lo:.2f}, {hi:.2f}]"


def measures(score: np.ndarray, ref: pd.DataFrame, bootstrap: int,
             key: str = KEY) -> dict[str, Any]:
    """Every yardstick measure of ``score`` (aligned with ``ref``'s rows) against the truth's
    ``key`` column."""
    t, params = ref[key].values, ref.params.values.astype(float)
    lat, band = ref.latency_ms.values.astype(float), ref.band.values
    conc, pairs = fm.band_concordance(score, t, lat, BAND_RATIO)
    return {
        "archs": len(t),
        "tau": fm.tau(score, t), "tau CI": _ci(fm.tau, [score, t], bootstrap),
        "residual tau": fm.residual_tau(score, t, params),
        "residual CI": _ci(fm.residual_tau, [score, t, params], bootstrap),
        f"concordance, latency {BAND_RATIO}x": f"{conc:.2f} ({pairs} pairs)",
        "within-band tau": fm.within_band_tau(score, t, band),
        "top-5": f"{fm.top_overlap(score, t)}/5" if len(t) >= MIN_TOP else "n/a"}


def reference(truth: pd.DataFrame, baselines: pd.DataFrame,
              space: str = "resnet") -> pd.DataFrame:
    """A space's truth (seed 0) with each arch's params, latency and band, inside the space's
    budget (``SPACE_BUDGET_MS``; an arch without a measured latency is left out)."""
    ref = truth[(truth.space == space) & (truth.recipe == "digital")].set_index("arch")
    lat = stored_latency(baselines)
    ref = ref.assign(latency_ms=lat.reindex(ref.index).values,
                     band=[bands.band_of(space).get(a, "") for a in ref.index])
    budget = SPACE_BUDGET_MS.get(space)
    return ref[ref.latency_ms <= budget] if budget else ref[ref.latency_ms.notna()]


def baseline_rows(ref: pd.DataFrame, baselines: pd.DataFrame,
                  bootstrap: int) -> list[dict[str, Any]]:
    out = []
    for seed, per in baselines.groupby("seed"):
        per = per.set_index("arch").reindex(ref.index)
        for name in BASELINES:
            static = name in ("params", "macs", "latency_ms")
            if static and seed != baselines.seed.min():
                continue  # a static count has no seed: one row
            # log of the static counts: the same ranks, and log(params) is exactly the size
            # trend the residual measure removes (its residual tau is 0 by construction)
            score = per[name].values.astype(float)
            score = np.log(score) if static else score
            secs = per.get(f"{name}_s", pd.Series(0.0, index=per.index)).median()
            out.append({"scorer": name if static else f"{name} seed {seed}", "kind": "free",
                        **measures(score, ref, bootstrap), "s / candidate": float(secs)})
    return out


def recipe_rows(ref: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
                timing: pd.DataFrame | None) -> list[dict[str, Any]]:
    out = []
    for recipe in [r for r in RECIPES if r in set(scores.recipe)]:
        mine, key = scores[scores.recipe == recipe], RECIPE_KEY.get(recipe, KEY)
        held = ref[ref[key].notna()] if key in ref else ref.iloc[:0]
        per_seed = mine.pivot_table(index="arch", columns="seed", values="acc").reindex(held.index)
        secs = _seconds(recipe, mine, timing)
        for seed in per_seed.columns:
            col = per_seed[seed].dropna()
            if len(col) < 3:
                continue
            label = f"{recipe} seed {seed}" + (" (the truth's seed)" if seed == 0 else "")
            here = float(mine[(mine.seed == seed) & mine.arch.isin(col.index)].seconds.median())
            label += "" if key == KEY else f" (vs truth {key[4:]})"
            out.append({"scorer": label, "kind": "one run",
                        **measures(col.values, ref.loc[col.index], bootstrap, key),
                        "s / candidate": secs, "s (its runs)": here})
        disjoint = [s for s in per_seed.columns if s != 0]  # a mean away from the truth's seed
        both = per_seed[disjoint if len(disjoint) >= 2 else list(per_seed.columns)].dropna()
        if both.shape[1] >= 2 and len(both) >= 3:
            seeds = ",".join(str(s) for s in both.columns)
            out.append({"scorer": f"{recipe} mean of seeds {seeds}", "kind": "seed mean",
                        **measures(both.mean(axis=1).values, ref.loc[both.index], bootstrap,
                                   key),
                        "s / candidate": secs * both.shape[1]})
    return out


# The combinations measured, every one of {recipe, TSE, synflow} with the recipe or TSE in it
# (all are by-products of one run), so no single favourite is picked after seeing the table.
COMBOS = (("recipe", "synflow"), ("recipe", "TSE"), ("TSE", "synflow"),
          ("recipe", "TSE", "synflow"))


def derived_rows(ref: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
                 timing: pd.DataFrame | None, recipe: str = "default",
                 baselines: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """Scorers computed from ``recipe``'s own runs, per seed: the training-speed estimate
    (minus the sum of the epochs' training losses; its cost is the training alone), rank means
    (``COMBOS``), and the recipe's score shrunk toward its trend on log(params) or on
    log(SynFlow) (``shrunk``)."""
    mine = scores[scores.recipe == recipe]
    out = []
    for seed, per in mine.groupby("seed"):
        per = per.set_index("arch").reindex(ref.index).dropna(subset=["acc"])
        if len(per) < 3:
            continue
        sub = ref.loc[per.index]
        if "train_loss_sum" in per and per.train_loss_sum.notna().all():
            out.append({"scorer": f"TSE ({recipe} training) seed {seed}", "kind": "one run",
                        **measures(-per.train_loss_sum.values, sub, bootstrap),
                        "s / candidate": float("nan"),
                        "s (its runs)": float(per.train_seconds.median())})
        syn = (baselines[baselines.seed == seed].set_index("arch").synflow.reindex(per.index)
               if baselines is not None and len(baselines) else None)
        parts = {recipe: per.acc.values}
        if "train_loss_sum" in per and per.train_loss_sum.notna().all():
            parts["TSE"] = -per.train_loss_sum.values
        if syn is not None and syn.notna().all():  # the free proxy at the same seed's init
            parts["synflow"] = syn.values
        for combo in COMBOS:  # rank means: each is free on top of the recipe's own run
            names = [recipe if n == "recipe" else n for n in combo]
            if all(n in parts for n in names):
                mixed = sum(rankdata(parts[n]) for n in names)
                out.append({"scorer": f"{' + '.join(names)} (rank mean) seed {seed}",
                            "kind": "one run", **measures(mixed, sub, bootstrap),
                            "s / candidate": _seconds(recipe, mine, timing),
                            "s (its runs)": float(per.seconds.median())})
        trends = {"size": sub.params.values}
        if "synflow" in parts:
            trends["SynFlow"] = parts["synflow"]
        for trend, x in trends.items():
            out.append({"scorer": f"{recipe} shrunk to {trend} seed {seed}", "kind": "one run",
                        **measures(shrunk(per.acc.values, x, per.acc_se.values), sub,
                                   bootstrap),
                        "s / candidate": _seconds(recipe, mine, timing),
                        "s (its runs)": float(per.seconds.median())})
    return out


def rows(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
         timing: pd.DataFrame | None = None,
         baselines: pd.DataFrame | None = None, space: str = "resnet") -> list[dict[str, Any]]:
    baselines = baselines if baselines is not None else pd.DataFrame(
        columns=["arch", "seed", "latency_ms"])
    ref = reference(truth, baselines, space)
    return [*baseline_rows(ref, baselines, bootstrap),
            *recipe_rows(ref, scores, bootstrap, timing),
            *derived_rows(ref, scores, bootstrap, timing, baselines=baselines)]


def _plot_points(table: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One point per scorer: the median of its single runs on seeds disjoint from the truth's,
    with their range (the truth's own seed left out: it shares the truth's draws)."""
    conc_col = f"concordance, latency {BAND_RATIO}x"
    every = max((r["archs"] for r in table), default=0)
    points: dict[str, dict[str, Any]] = {}
    for r in (r for r in table if r["archs"] == every):  # rows on fewer archs do not compare
        name, sep, seed = str(r["scorer"]).rpartition(" seed ")
        if sep and (not seed.split()[0].isdigit() or int(seed.split()[0]) == 0):
            continue
        x = r["s / candidate"] if np.isfinite(r["s / candidate"]) else r["s (its runs)"]
        p = points.setdefault(name if sep else str(r["scorer"]),
                              {"kind": r["kind"], "x": [], "residual tau": [], conc_col: []})
        p["x"].append(max(float(x), 1e-3))
        p["residual tau"].append(float(r["residual tau"]))
        p[conc_col].append(_conc(r[conc_col]))
    return points


def _labels(ax: Any, spots: list[tuple[float, float, str]]) -> None:
    """Each point's name to its right, the names of points in one decade of cost stacked apart
    (the derived scorers all cost what `default` costs), joined to their points by a line."""
    lo, hi = min(y for _, y, _ in spots), max(y for _, y, _ in spots)
    gap = max(hi - lo, 0.1) * 0.055
    by_cost: dict[float, list[tuple[float, float, str]]] = {}
    for spot in spots:
        by_cost.setdefault(np.floor(np.log10(spot[0])), []).append(spot)  # per decade
    for group in by_cost.values():
        group.sort(key=lambda s: s[1])
        centre = float(np.mean([y for _, y, _ in group]))
        start = centre - gap * (len(group) - 1) / 2
        for i, (x, y, name) in enumerate(group):
            ax.annotate(name, (x, y), xytext=(x * 3, start + i * gap), fontsize=6, va="center",
                        arrowprops={"arrowstyle": "-", "lw": 0.3, "color": "0.6"})
    ax.set_xscale("log")
    ax.set_xlim(min(x for x, _, _ in spots) / 3, max(x for x, _, _ in spots) * 300)


def plot(table: list[dict[str, Any]], path: Path) -> None:
    """Residual tau and cost-band concordance against seconds per candidate (log scale), on the
    same-archs table: a point per scorer (median of its single runs, bar: their range), the
    goal lines, and the parameter count's concordance."""
    from matplotlib.figure import Figure

    conc_col = f"concordance, latency {BAND_RATIO}x"
    points = _plot_points(table)
    count = points.get("params", {}).get(conc_col, [np.nan])[0]
    fig = Figure(figsize=(11, 4.5))
    goals = {"residual tau": GOAL_RESIDUAL, conc_col: count + GOAL_OVER_PARAMS}
    for ax, col, label in zip(fig.subplots(1, 2), ("residual tau", conc_col),
                              ("Kendall tau of residuals after log(params)",
                               f"concordance on pairs with latency within {BAND_RATIO}x"),
                              strict=True):
        spots = []
        for name, p in points.items():
            color = {"free": "C2", "one run": "C0", "seed mean": "C1"}[p["kind"]]
            x, ys = float(np.median(p["x"])), np.array(p[col])
            y = float(np.median(ys))
            ax.errorbar(x, y, yerr=[[y - ys.min()], [ys.max() - y]], fmt="o", c=color, ms=4,
                        capsize=2, lw=0.8)
            spots.append((x, y, name))
        if spots:
            _labels(ax, spots)
        if np.isfinite(goals[col]):  # no count row (no baselines): no concordance bar
            ax.axhline(goals[col], c="C3", ls="--", lw=0.8, label="goal")
        if col == conc_col and np.isfinite(count):
            ax.axhline(count, c="C2", ls=":", lw=0.8, label="parameter count")
        ax.set_xlabel("seconds per candidate (median, 1 CPU thread)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    for kind, color in (("free baseline", "C2"), ("single runs: median, range", "C0"),
                        ("seed mean", "C1")):
        fig.axes[0].scatter([], [], c=color, label=kind)
    fig.axes[0].legend(fontsize=7, loc="lower right")
    if fig.axes[1].get_legend_handles_labels()[0]:
        fig.axes[1].legend(fontsize=7, loc="lower right")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")


def ceiling(truth_seeds: pd.DataFrame, truth: pd.DataFrame,
            inside: pd.DataFrame | None = None) -> str:
    """The truth's own noise, from the archs trained under a second seed, and the tau it caps;
    with ``inside`` (``reference``'s in-budget archs), the equal-cost measures it caps too."""
    wide = _seed_pairs(truth_seeds)
    if wide.shape[1] < 2 or len(wide) < 2:
        return ("The truth's seed noise is not measured yet: no arch has two truth seeds "
                f"({len(wide)} so far).")
    a, b = wide.iloc[:, 0].values, wide.iloc[:, 1].values
    sd = fm.seed_noise_sd(a, b)
    ref = truth[(truth.space == "resnet") & (truth.recipe == "digital")][KEY].values
    med, low = fm.tau_ceiling(ref, sd)
    return (f"Truth noise: {len(wide)} archs trained under seeds {list(wide.columns)}; median "
            f"|gap| {100 * float(np.median(np.abs(a - b))):.2f} pt, noise SD per truth value "
            f"{100 * sd:.2f} pt (SD of the gaps / sqrt 2); Kendall tau between the two seeds "
            f"{fm.tau(a, b):.2f} on these archs. A noiseless score ranked against this truth "
            f"({len(ref)} archs) would reach tau {med:.2f} (5th percentile {low:.2f}): the "
            "ceiling of every tau in the table." + _equal_cost_ceiling(inside, sd))


def _seed_pairs(truth_seeds: pd.DataFrame) -> pd.DataFrame:
    """The resnet archs trained under two truth seeds (the only space with a second seed)."""
    return fm.seed_pairs(truth_seeds, KEY, "resnet")


def _space_ceiling(held: pd.DataFrame, truth_seeds: pd.DataFrame) -> str:
    """What a noiseless score could reach on another space's truth, with the training noise
    measured on resnet's second seed (borrowed: that space has no second seed of its own)."""
    wide = _seed_pairs(truth_seeds)
    if wide.shape[1] < 2 or len(wide) < 2 or len(held) < 3:
        return ""
    sd = fm.seed_noise_sd(wide.iloc[:, 0].values, wide.iloc[:, 1].values)
    t, params = held[KEY].values, held.params.values.astype(float)
    med, low = fm.tau_ceiling(t, sd)
    res, res_low = fm.tau_ceiling(t, sd, measure=lambda x, y: fm.residual_tau(x, y, params))
    return (f"\n\nIts truth spans {100 * (t.max() - t.min()):.2f} pt (SD {100 * t.std(ddof=1):.2f}"
            f" pt over {len(t)} archs), against a training-seed noise of {100 * sd:.2f} pt per "
            "value measured on resnet (this space has no second truth seed): a noiseless score "
            f"would reach tau {med:.2f} (5th percentile {low:.2f}) and residual tau {res:.2f} "
            f"({res_low:.2f}) here, the ceiling of this table.")


def _equal_cost_ceiling(inside: pd.DataFrame | None, sd: float) -> str:
    """The same simulation for the headline measures, on the archs inside the budget: a goal
    above these is out of reach of any score on this truth."""
    if inside is None or len(inside) < 3:
        return ""
    t, params = inside[KEY].values, inside.params.values.astype(float)
    lat = inside.latency_ms.values.astype(float)
    res, res_low = fm.tau_ceiling(t, sd, measure=lambda s, y: fm.residual_tau(s, y, params))
    conc, conc_low = fm.tau_ceiling(
        t, sd, measure=lambda s, y: fm.band_concordance(s, y, lat, BAND_RATIO)[0])
    base, pairs = fm.band_concordance(np.log(params), t, lat, BAND_RATIO)
    return (f" On the {len(inside)} truth archs inside the {BUDGET_MS:g} ms budget, the same "
            f"noiseless score would reach residual tau {res:.2f} (5th percentile {res_low:.2f}) "
            f"and latency-{BAND_RATIO}x concordance {conc:.2f} (5th percentile {conc_low:.2f}, "
            f"{pairs} pairs), where the parameter count reaches {base:.2f} on the measured "
            "truth.")


NOISE = DATA / "noise.json"


def seed_pairs(mine: pd.DataFrame) -> pd.DataFrame:
    """Every (arch, seed a < seed b) pair of one recipe's scores, with both SEs and repeats."""
    cols = ["arch", "acc", "acc_se", "repeats"]
    rows = []
    for sa, sb in [(a, b) for a in sorted(set(mine.seed)) for b in sorted(set(mine.seed)) if a < b]:
        m = mine[mine.seed == sa][cols].merge(mine[mine.seed == sb][cols], on="arch")
        rows.append(m)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def _outside(p: pd.DataFrame, train_sd: float, t_quantile: bool = True) -> float:
    """Share of pairs whose gap exceeds the front's margin, 2 * sqrt(se_x^2 + se_y^2)."""
    rx, ry = (p.repeats_x.values, p.repeats_y.values) if t_quantile else (None, None)
    se_x = comparison_se(p.acc_se_x.values, rx, train_sd)
    se_y = comparison_se(p.acc_se_y.values, ry, train_sd)
    return float(np.mean(np.abs(p.acc_x - p.acc_y).values > 2 * np.sqrt(se_x**2 + se_y**2)))


def calibrate(scores: pd.DataFrame) -> list[dict[str, Any]]:
    """Per recipe: the training noise SD its seed gaps imply (mean squared gap / 2 minus the
    mean squared evaluation SE), and the share of same-arch pairs outside the front's 2-SE
    margin without and with it (``comparison_se``; about 5% when the noise model is honest).
    The SD is fitted on the same pairs it is checked on: a check of the model, not a held-out
    test. Written to noise.json for studies' ``pareto.train_noise``."""
    out, stored = [], {}
    for recipe in [r for r in RECIPES if r in set(scores.recipe)]:
        p = seed_pairs(scores[scores.recipe == recipe])
        if len(p) < 5:
            continue
        gap = (p.acc_x - p.acc_y).values
        var = float(np.mean(gap**2) / 2 - np.mean((p.acc_se_x**2 + p.acc_se_y**2) / 2))
        sd = max(var, 0.0) ** 0.5

        stored[recipe] = {RECIPE_KEY.get(recipe, KEY): round(sd, 4), "pairs": len(p)}
        out.append({"recipe": recipe, "same-arch seed pairs": len(p),
                    "median |gap| (pt)": 100 * float(np.median(np.abs(gap))),
                    "training noise SD (pt)": 100 * sd,
                    "outside: 2 SE (before)": f"{100 * _outside(p, 0.0, False):.0f}%",
                    "outside: t quantile": f"{100 * _outside(p, 0.0):.0f}%",
                    "outside: t + training noise": f"{100 * _outside(p, sd):.0f}%"})
    NOISE.write_text(json.dumps(stored, indent=1))
    return out


def write(*, bootstrap: int = 2000) -> str:
    truth = pd.read_csv(DATA / "truth.csv")
    seeds_csv = DATA / "truth_seeds.csv"
    truth_seeds = pd.read_csv(seeds_csv) if seeds_csv.is_file() else truth.assign(seed=0)
    scores = pd.read_csv(SCORES)
    timing = pd.read_csv(TIMING) if TIMING.is_file() else None
    baselines = pd.read_csv(BASE_CSV) if BASE_CSV.is_file() else None
    table = pd.DataFrame(rows(truth, scores, bootstrap, timing, baselines))
    same = same_archs(truth, scores, bootstrap, timing, baselines)
    plot(same[0] if same else table.to_dict("records"), RESULTS / "fidelity" / "yardstick_v2.png")
    text = markdown(table.to_dict("records")) + (_same_archs_text(*same) if same else "")
    inside = reference(truth, baselines) if baselines is not None else None
    noise = (ceiling(truth_seeds, truth, inside) + "\n\n" + _calibration_text(calibrate(scores))
             + _front_text())
    text += _other_spaces(truth, scores, bootstrap, timing, baselines, truth_seeds)
    text += _static_truth_text(truth, scores, bootstrap, timing, baselines)
    text += _hwa_truth_text(truth, scores, bootstrap, timing, baselines)
    (RESULTS / "fidelity.md").write_text(_page(text, truth, scores, timing, noise))
    return text


MIN_SPACE = 3  # truth archs a space needs before its table means anything
# Ranked against the HWA truth: the HWA recipes, and the digital recipe they extend beside them.
HWA_RECIPES = ("default", "default_hwa", "hwa")


def _hwa_truth_text(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
                    timing: pd.DataFrame | None, baselines: pd.DataFrame | None) -> str:
    """The resnet table again, against the HWA truth (each arch's accuracy after the truth's
    HWA fine-tuning, ``score_hwa`` units): what an HWA-trained front would be ranked by."""
    held = truth[(truth.space == "resnet") & (truth.recipe == "hwa")]
    gains = _hwa_gain_text(truth)
    if len(held) < MIN_SPACE or baselines is None:
        return (f"\n\nHWA truth: resnet archs HWA-trained and scored so far: {len(held)}; "
                f"the ranking against it appears from {MIN_SPACE}.{gains}")
    table = rows(held.assign(recipe="digital"), scores[scores.recipe.isin(HWA_RECIPES)],
                 bootstrap, timing, baselines)
    based = int(held.base_device.notna().sum()) if "base_device" in held else 0
    return (f"\n\n### Against the HWA truth\n\n{len(held)} resnet archs after the truth's HWA "
            f"fine-tuning, pcm@1d ({based} of them from a base trained again on the HWA unit's "
            "device, truth.csv's `base_device`); the free baselines, `default` and the HWA "
            "recipes:\n\n" + markdown(table) + gains)


STATIC_KEY = RECIPE_KEY["default_static"]
# Ranked against the truth's pcm_static column: the recipe that scores that model, and the
# shipped one (which scores pcm) beside it.
STATIC_RECIPES = ("default", "default_static")


def _static_truth_text(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
                       timing: pd.DataFrame | None, baselines: pd.DataFrame | None) -> str:
    """The resnet table again on the archs whose digital truth holds ``pcm_static``@1d (the
    model studies score and the energy model charges), ranked against that column: the free
    baselines beside the recipes on the same archs (the derived scorers but the shipped
    shrinkage left out)."""
    dig = truth[(truth.space == "resnet") & (truth.recipe == "digital")]
    held = dig[dig[STATIC_KEY].notna()] if STATIC_KEY in dig else dig.iloc[:0]
    if len(held) < MIN_SPACE or baselines is None:
        return ""
    table = [r for r in rows(held.assign(**{KEY: held[STATIC_KEY]}),
                             scores[scores.recipe.isin(STATIC_RECIPES)], bootstrap, timing,
                             baselines)
             if not any(t in r["scorer"] for t in ("rank mean", "TSE", "shrunk to size"))]
    n = max((r["archs"] for r in table), default=0)
    return (f"\n\n### Against the pcm_static truth\n\nThe {len(held)} resnet truth archs whose "
            f"digital truth also holds {STATIC_KEY[4:]} ({n} of them inside the budget), ranked "
            "against that column: the free baselines, `default` (which scores `pcm`) and "
            "`default_static` (the same recipe scored on `pcm_static`), and the shipped pick's "
            "shrinkage toward SynFlow:\n\n" + markdown(table))


HWA_GAIN_COLS = ("acc_pcm@1d", "acc_pcm@30d", "acc_pcm_static@1d")


def _hwa_gain_text(truth: pd.DataFrame) -> str:
    """Per HWA truth arch, what the truth's HWA fine-tuning bought against the same arch trained
    digitally (seed 0): the gain per hardware column, with the SE of the difference of two
    independent means (the programmings differ), and the digital accuracy it cost."""
    resnet = truth[(truth.space == "resnet") & (truth.seed == 0)].set_index("arch")
    hwa, dig = resnet[resnet.recipe == "hwa"], resnet[resnet.recipe == "digital"]
    archs = [a for a in hwa.index if a in dig.index]
    if not archs:
        return ""
    out = []
    for arch in archs:
        row: dict[str, Any] = {"arch": arch, "params": int(hwa.at[arch, "params"])}
        for col in (c for c in HWA_GAIN_COLS if {c, f"{c}_se"} <= set(resnet.columns)):
            gap = 100 * (hwa.at[arch, col] - dig.at[arch, col])
            se = 100 * float(np.hypot(hwa.at[arch, f"{col}_se"], dig.at[arch, f"{col}_se"]))
            name = col.removeprefix("acc_")
            row[f"{name} HWA"] = f"{100 * hwa.at[arch, col]:.2f}"
            row[f"{name} gain (pt)"] = "n/a" if np.isnan(gap) else f"{gap:+.2f} +- {se:.2f}"
        if "acc_digital" in resnet.columns:  # what the noise-trained weights give up
            lost = 100 * (hwa.at[arch, "acc_digital"] - dig.at[arch, "acc_digital"])
            row["digital gain (pt)"] = f"{lost:+.2f}"
        out.append(row)
    return ("\n\nWhat the truth's HWA fine-tuning bought, per arch, against the same arch "
            "trained digitally (seed 0; +- the SE of the difference; n/a where the digital "
            "truth predates the column):\n\n" + markdown(out))


def _other_spaces(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
                  timing: pd.DataFrame | None, baselines: pd.DataFrame | None,
                  truth_seeds: pd.DataFrame) -> str:
    """A table per truth space beyond resnet (mbconv: its latency bands), the same rows and
    measures, or a line saying how much of its truth exists."""
    out = ""
    for space in (s for s in SPACE_BUDGET_MS if s != "resnet"):
        planned = len(bands.band_archs(space))
        held = truth[(truth.space == space) & (truth.recipe == "digital")]
        if len(held) < MIN_SPACE or baselines is None:
            out += (f"\n\n{space}: {len(held)} of its {planned} banded truth archs are trained "
                    f"and scored so far; its table appears from {MIN_SPACE}.")
            continue
        table = rows(truth, scores, bootstrap, timing, baselines, space)
        out += (f"\n\n### {space}\n\n{len(held)} of its {planned} banded truth archs "
                f"(bench/data/fidelity/bands.json), every one ranked (no budget cut):\n\n"
                + markdown(table) + _goals_text(table) + _space_ceiling(held, truth_seeds))
    return out


def _page(text: str, truth: pd.DataFrame, scores: pd.DataFrame,
          timing: pd.DataFrame | None, noise: str) -> str:
    n_truth = int(((truth.space == "resnet") & (truth.recipe == "digital")).sum())
    when = (f"Seconds per candidate: `python -m bench.fidelity time` ({timing.arch.nunique()} "
            f"cheapest truth archs, every recipe in one process, seed 0, "
            f"{int(timing.threads.iloc[0])} thread), where it has the recipe; else the "
            "scoring runs' median." + _asis(timing) + "\n\n" if timing is not None else "")
    return (f"## Fidelity: ranking quality of scoring recipes at equal cost (yardstick v2)\n\n"
            f"Command: `python -m bench.fidelity report` (after `bands`, `truth`, `baselines` "
            f"and `score`), 1 CPU thread per process. Truth: {n_truth} resnet architectures "
            f"(bench/data/fidelity/truth.csv, recipe in recipe.json, latency bands in "
            f"bands.json); recipe scores: {len(scores)} candidate evaluations (scores.csv); "
            f"free baselines: baselines.csv. pcm@1d throughout.\n\n{when}{text}\n\n"
            f"{noise}\n\n![yardstick v2](fidelity/yardstick_v2.png)\n{_findings()}")


MAIN = ("default", (1, 2, 3, 4))  # the shipped recipe under the seeds disjoint from the truth's
MAIN_RECIPES = ("quickstart", "default", "default_hwa", "e2_lean", "eco")


def same_archs(truth: pd.DataFrame, scores: pd.DataFrame, bootstrap: int,
               timing: pd.DataFrame | None, baselines: pd.DataFrame | None
               ) -> tuple[list[dict[str, Any]], int, int] | None:
    """The headline comparison: every row on the same archs, those the shipped recipe scored
    under every seed disjoint from the truth's (rows over different archs do not compare), with
    how many archs that is and how many are inside the budget (None: fewer than 3)."""
    recipe, seeds = MAIN
    mine = scores[(scores.recipe == recipe) & scores.seed.isin(seeds)]
    known = set(truth[(truth.space == "resnet") & (truth.recipe == "digital")].arch)
    held = [a for a, n in mine.groupby("arch").size().items() if n == len(seeds) and a in known]
    if len(held) < 3:
        return None
    keep = scores[scores.arch.isin(held) & scores.recipe.isin(MAIN_RECIPES)]
    base = baselines[baselines.arch.isin(held)] if baselines is not None else None
    table = rows(truth[truth.arch.isin(held)], keep, bootstrap, timing, base)
    inside = len(reference(truth[truth.arch.isin(held)], base if base is not None
                           else pd.DataFrame(columns=["arch", "latency_ms"])))
    return table, len(held), inside


def _same_archs_text(table: list[dict[str, Any]], held: int, inside: int) -> str:
    recipe, seeds = MAIN
    return (f"\n\nThe same measures on the same archs: the {held} that `{recipe}` scored "
            f"under seeds {', '.join(map(str, seeds))}, {inside} of them inside the "
            f"{BUDGET_MS:g} ms budget (the comparison to read):\n\n"
            + markdown(table) + _goals_text(table))


# Issue #27's goals for a scorer at equal cost, read per single run (a study runs one seed).
GOAL_RESIDUAL, GOAL_OVER_PARAMS = 0.6, 0.10


def _conc(cell: str) -> float:
    return float(str(cell).split()[0])  # "0.76 (46 pairs)"


def goal_rows(table: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per scorer, the single runs on seeds disjoint from the truth's that meet each goal:
    residual tau >= ``GOAL_RESIDUAL``, and cost-band concordance at least ``GOAL_OVER_PARAMS``
    above the parameter count's on the same pairs."""
    conc_col = f"concordance, latency {BAND_RATIO}x"
    params = next((r for r in table if r["scorer"] == "params"), None)
    if params is None:
        return []
    bar = _conc(params[conc_col]) + GOAL_OVER_PARAMS
    runs: dict[str, list[tuple[int, bool, bool]]] = {}
    for r in (r for r in table if r["archs"] == params["archs"]):  # the count's very pairs
        name, sep, seed = str(r["scorer"]).rpartition(" seed ")
        seed = seed.split()[0] if sep else ""
        if not sep or not seed.isdigit() or int(seed) == 0:
            continue
        runs.setdefault(name, []).append((int(seed), r["residual tau"] >= GOAL_RESIDUAL,
                                          _conc(r[conc_col]) >= bar - 1e-9))
    return [{"scorer": name,
             f"residual tau >= {GOAL_RESIDUAL}": _share([s for s, a, _ in got if a], len(got)),
             f"concordance >= {bar:.2f}": _share([s for s, _, b in got if b], len(got)),
             "both": _share([s for s, a, b in got if a and b], len(got))}
            for name, got in runs.items()]


def _share(seeds: list[int], of: int) -> str:
    return f"{len(seeds)}/{of}" + (f" ({','.join(map(str, seeds))})" if seeds else "")


def _goals_text(table: list[dict[str, Any]]) -> str:
    goals = goal_rows(table)
    if not goals:
        return ""
    return ("\n\nThe goals for the shipped default, per single run on a seed disjoint from the "
            f"truth's (seeds meeting it / seeds run): residual tau >= {GOAL_RESIDUAL} and "
            f"concordance at least {GOAL_OVER_PARAMS * 100:.0f} points above the parameter "
            "count's, on the same archs as the table above:\n\n" + markdown(goals))


def _calibration_text(table: list[dict[str, Any]]) -> str:
    return ("Calibration of the front's margin (`nas.algorithms.pareto.comparison_se`), from "
            "each recipe's same-arch pairs across seeds; the training noise SD goes to "
            "bench/data/fidelity/noise.json and into a study's `pareto.train_noise`:\n\n"
            + markdown(table))


def _front_text() -> str:
    """The front-regret tables (``bench.fidelity front``), one per ``--trials`` it ran at
    (``fidelity_front_t<N>.json``; the latest ``fidelity_front.json`` when none is kept)."""
    kept = sorted(RESULTS.glob("fidelity_front_t*.json"),
                  key=lambda p: int(p.stem.removeprefix("fidelity_front_t")))
    latest = RESULTS / "fidelity_front.json"
    paths = kept or ([latest] if latest.is_file() else [])
    return "".join(_front_table(json.loads(p.read_text())) for p in paths)


def _front_table(res: dict[str, Any]) -> str:
    prior = (f" The rung-0 arms (`schedule.prior`) look at M = {res['looked_at']} random pool "
             f"archs (eta {res['eta']} x N, at most the pool), rank them by the prior (SynFlow "
             f"at the recipe seed's initialisation, or log parameter count) against latency with "
             f"the study's promotion rule and train only the N promoted; params-greedy@M is the "
             f"free front of the same M archs."
             + (" M is the whole pool here: every search seed looks at the same archs, so the "
                "rung-0 arms' spread is the recipe seed's alone." if res["looked_at"] >= res["pool"]
                else "") if "looked_at" in res else "")
    if "fronts" in res:
        f = res["fronts"]
        prior += (f" The pool's true front holds {f['truth']} archs, its params-greedy front "
                  f"{f['params']} ({f['shared']} of them on both). Latencies are baselines.csv's, "
                  f"as the yardstick's: every run has the same pool.")
    return (f"\n\nFront regret (`python -m bench.fidelity front --recipe {res['recipe']} "
            f"--recipe-seeds {','.join(res['recipe_seeds'])} --trials {res['trials']} "
            f"--seeds {res['seeds']}`): searches of N = {res['trials']} candidates over the "
            f"{res['pool']} truth archs inside the 5 ms budget, each candidate scored by the "
            f"recipe's stored score under seed {' or '.join(res['recipe_seeds'])} (search seed "
            f"k uses the k-th of them in turn), the returned front scored at the truth: "
            f"hypervolume of truth pcm@1d against latency, reference (accuracy "
            f"{res['ref'][0]:.3f}, {res['ref'][1]} ms), as a fraction of the pool's true "
            f"front; \"seeds above\" counts search seeds strictly above that free front.{prior}"
            f"\n\n" + markdown(front.rows(res)))


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
