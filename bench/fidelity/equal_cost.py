"""Front regret at equal cost: the shipped screen against free fronts at equal wall time and looks.

``bench.fidelity front`` compares arms at an equal number of trained candidates. This bench
costs every arm in seconds, from what the stored records measured, and asks whether the
quickstart's pipeline (``studies/quickstart.yaml``: a free SynFlow screen of ``looks`` archs, at
most ``promote_max`` members of its free front trained and scored, the front picked on the
scores shrunk toward SynFlow) returns a better front than what the same seconds buy for free.

Costs (per arch, the median over the recipe seeds of what the records hold):

- a look: the latency measurement (``LOOK_LATENCY_S``: no stored record holds its seconds, so
  the stop rule's cap is used: 0.3 s warm-up plus the quickstart's ``latency.max_seconds``
  1.0) plus the proxy's seconds in baselines.csv (``synflow_s``, ``naswot_s``; parameter count
  and MACs come with the cost measurement and add nothing);
- a training and a scoring: scores.csv's ``train_seconds`` and ``seconds - train_seconds`` of
  the recipe (``e2_lean``: the quickstart's training and scoring, one thread).

Per search seed ``k`` (its recipe seed the k-th of ``--recipe-seeds`` in turn, as in
``front``), one random order of the pool is drawn; every arm reads it from the start:

- ``shipped``: the first ``looks`` archs are looked at; rung 0's rule (``FirstRung``, read from
  the study file) promotes the free front on (SynFlow at the recipe seed's initialisation,
  latency), at most ``promote_max`` of it in promotion order; those are trained (the recipe's
  stored score) and their front is the Pareto set of the scores shrunk toward SynFlow
  (``nas.algorithms.shrink``; raw when fewer than three). Its wall time ``W`` is the seconds of
  its looks, trainings and scorings;
- ``<proxy> free front, equal time``: the Pareto set of (proxy, latency) over as many archs as
  ``W`` buys at that proxy's look cost (at most the whole pool);
- ``<proxy> free front, equal looks``: the same over the shipped arm's ``looks`` archs;
- ``random search, equal time``: archs trained and scored in that order (each also a latency
  measurement) while their seconds fit in ``W``; the Pareto set of their raw scores;
- ``<proxy> free front, whole pool``.

Each front is scored at the truth: hypervolume of truth pcm@1d against latency as a fraction of
the pool's true front (``front.true_hv``). Each comparison gives the seeds where the shipped
front is above, equal to and below the other, and a two-sided sign test over the unequal ones.

    python -m bench.fidelity equal-cost --seeds 20

Where this differs from ``hwnas run quickstart``: the screen (looks, the free front, its cap)
is read from the study file and runs through the study's own ``FirstRung`` rule, ``promote``
and ``nas.algorithms.shrink``; the rest is priced from records, not run:

- the looks are a seeded random order of the truth pool (the archs within the 5 ms budget with
  stored scores), where the study draws them from its sampler over the whole ``resnet`` space,
  so a live look may fall outside the pool or over the budget (it still counts as a look);
- a trained arch's score is its stored record of ``--recipe`` (``e2_lean``: the quickstart's
  2 epochs and lean score at one thread where the study trains with two, on ``pcm`` at 1 d),
  where the study scores ``pcm_static`` at 1 d; no recipe scores ``pcm_static`` on the whole
  pool (``default_static``: 21 archs at 2 seeds);
- fronts are judged on the truth's ``pcm`` at 1 d (``front.KEY``) and the pool's latencies;
- seconds are each arch's median over the recipe seeds, and a look's latency is its cap.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import binomtest

from bench import RESULTS
from bench.fidelity import front
from bench.fidelity.baselines import BASELINES
from bench.fidelity.recipes import SCORES
from nas.algorithms.pareto import non_dominated_sort
from nas.algorithms.promotion import promote
from nas.algorithms.shrink import signal_share

LOOK_LATENCY_S = 1.3
"""Seconds of a look's latency measurement: ``hw_cost.latency.StopRule``'s 0.3 s warm-up plus
the quickstart's ``latency.max_seconds`` (1.0), the most a look's timing takes; the stored records
do not hold it (docs/quickstart.md reads "about a second each")."""
PROXIES = ("params", "macs", "synflow", "naswot")
"""The free scores baselines.csv holds (MeCo is not among them)."""
OUT = RESULTS / "fidelity_equal_cost"
TIE = 1e-9  # HV fractions closer than this are the same front


@dataclass(frozen=True)
class Screen:
    """The shipped rung 0 as ``nas.search.schedule.FirstRung`` runs it: ``looks`` archs, then
    their free front on (prior, latency), at most ``most`` of it promoted."""

    looks: int = 20
    most: int | None = 3
    stop_share: float | None = None  # ``schedule.stop_share``: training stops below this share

    def trained(self, table: pd.DataFrame, looked: list[str], prior_col: str) -> list[str]:
        """The looked-at archs the screen trains: the rank-0 members of (prior up, latency
        down), capped at ``most`` in promotion order (``FirstRung.k``, then ``promote``)."""
        vals = table.loc[looked, [prior_col, "latency_ms"]].values
        n = int(np.sum(non_dominated_sort(vals, front.DIRS) == 0))
        k = min(n, self.most) if self.most is not None else n
        return [looked[i] for i in promote(vals, front.DIRS, k)]


def shipped_screen() -> Screen:
    """The quickstart's screen, read from ``studies/quickstart.yaml`` through the study loader
    and ``FirstRung.of``; refuses a schedule that is not a free front screen."""
    from nas.search.schedule import FirstRung
    from nas.study.files import load_study

    cfg = load_study("quickstart")
    first = FirstRung.of(cfg.schedule)
    if first is None or not first.front or first.looks is None or cfg.schedule.prior != "synflow":
        raise ValueError(f"equal-cost: the quickstart's schedule {cfg.schedule} is not a SynFlow "
                         "screen with prior_promote: front and looks; this bench prices that "
                         "pipeline only: update bench/fidelity/equal_cost.py with the study")
    return Screen(looks=first.looks, most=first.most)


def screen_arm(screen: Screen) -> str:
    """The arm name of a screen other than the shipped one."""
    stop = f", stop_share {screen.stop_share:g}" if screen.stop_share is not None else ""
    most = "its whole free front" if screen.most is None else f"at most {screen.most}"
    return f"screen of {screen.looks} looks, {most} trained{stop}, own time"


NARROW = Screen(looks=20, most=3)
"""The quickstart's screen before 2026-11-29 (20 looks, 3 of their free front trained, 3 epochs
and the default score): priced here on the shipped recipe, so only its breadth differs."""


def bought(costs: Sequence[float], wall: float) -> int:
    """How many of ``costs``, paid in order, fit in ``wall`` seconds."""
    return int(np.searchsorted(np.cumsum(costs), wall + 1e-9, side="right"))


def sign_test(a: Sequence[float], b: Sequence[float]) -> dict[str, Any]:
    """Seeds where ``a`` is above, equal to and below ``b``, and the two-sided sign test's
    p-value over the unequal seeds (1 when none are)."""
    d = np.asarray(a, float) - np.asarray(b, float)
    above, below = int((d > TIE).sum()), int((d < -TIE).sum())
    p = binomtest(above, above + below, 0.5).pvalue if above + below else 1.0
    return {"above": above, "equal": len(d) - above - below, "below": below, "p": float(p)}


def cost_table(recipe: str, seeds: list[int]) -> pd.DataFrame:
    """Per arch: the pool's columns (``front.pool_table``) plus MACs, NASWOT per recipe seed and
    the seconds of a look's proxy, a training and a scoring (medians over ``seeds``)."""
    table = front.pool_table(recipe, seeds)
    base = pd.read_csv(BASELINES)
    base = base[base.seed.isin(seeds)]
    naswot = base.pivot_table(index="arch", columns="seed", values="naswot")
    scores = pd.read_csv(SCORES)
    mine = scores[(scores.recipe == recipe) & scores.seed.isin(seeds)].assign(
        score_sec=lambda s: s.seconds - s.train_seconds - s.hwa_seconds.fillna(0.0))
    secs = pd.DataFrame({
        "macs": base.groupby("arch").macs.first(),
        "sec_synflow": base.groupby("arch").synflow_s.median(),
        "sec_naswot": base.groupby("arch").naswot_s.median(),
        "sec_train": mine.groupby("arch").train_seconds.median(),
        "sec_score": mine.groupby("arch").score_sec.median()})
    return table.join(naswot.add_prefix("naswot_s"), how="inner").join(secs, how="inner").dropna()


def proxy_col(proxy: str, rseed: str) -> str:
    """The table's column of ``proxy`` (higher is better) for recipe seed ``rseed``."""
    return f"{proxy}_s{rseed}" if proxy in ("synflow", "naswot") else proxy


def look_seconds(table: pd.DataFrame, proxy: str, latency_s: float) -> pd.Series:
    """Each arch's look for ``proxy``: its latency measurement plus the proxy's own seconds."""
    extra = table[f"sec_{proxy}"] if f"sec_{proxy}" in table else pd.Series(0.0, table.index)
    return latency_s + extra


def screened(table: pd.DataFrame, order: list[str], col: str, screen: Screen,
             latency_s: float) -> tuple[list[str], list[str], float, list[str]]:
    """(looked, trained, wall seconds, front on the shrunk scores) of ``screen`` reading
    ``order`` from its start, the trained scores being column ``col``."""
    looked = order[:screen.looks]
    trained = screen.trained(table, looked, proxy_col("synflow", col.removeprefix("score_s")))
    trained = stopped_early(table, trained, col, screen.stop_share)
    wall = float(look_seconds(table, "synflow", latency_s)[looked].sum()
                 + (table.sec_train + table.sec_score)[trained].sum())
    picked = front._front(front.shrunk_scores(table, trained, col), trained, "shrunk")
    return looked, trained, wall, picked


def stopped_early(table: pd.DataFrame, trained: list[str], col: str,
                  threshold: float | None) -> list[str]:
    """The first of ``trained`` (in promotion order) that ``schedule.stop_share`` lets train:
    from the third on, training stops once the trained scores' signal share beyond SynFlow
    (``nas.algorithms.shrink.signal_share``) is below ``threshold``."""
    if threshold is None:
        return trained
    seed = col.removeprefix("score_s")
    for n in range(3, len(trained)):
        sub = table.loc[trained[:n]]
        share = signal_share(sub[col].values, sub[f"synflow_s{seed}"].values,
                             sub[f"se_s{seed}"].values)
        if share is not None and share < threshold:
            return trained[:n]
    return trained


def one_seed(table: pd.DataFrame, k: int, col: str, screen: Screen, latency_s: float,
             hv: Any, also: Sequence[Screen] = ()) -> dict[str, Any]:
    """Every arm of search seed ``k`` (recipe score column ``col``): HV fractions (``hv`` of
    a list of archs), the shipped arm's wall time and what that wall time buys; ``also``:
    other screens on the same order and recipe, each at its own wall time."""
    rseed = col.removeprefix("score_s")
    order = random.Random(k).sample(list(table.index), len(table))
    looked, trained, wall, picked = screened(table, order, col, screen, latency_s)
    out: dict[str, Any] = {"seed": k, "recipe_seed": int(rseed), "wall_s": wall,
                           "looks": len(looked), "looked": looked, "trained": trained,
                           "bought": {}, "whole_pool_up_to_s": {}, "hv": {}, "also": {}}
    out["hv"]["shipped"] = hv(picked)
    out["hv"]["shipped, raw scores"] = hv(front._front(table, trained, col))
    for other in also:
        o_looked, o_trained, o_wall, o_picked = screened(table, order, col, other, latency_s)
        name = screen_arm(other)
        out["hv"][name] = hv(o_picked)
        out["also"][name] = {"looks": len(o_looked), "trained": len(o_trained), "wall_s": o_wall}
    for proxy in PROXIES:
        _free_arms(table, order, out, proxy, screen, latency_s, hv)
    n = bought((latency_s + table.sec_train + table.sec_score)[order].values, wall)
    out["random_trained"] = n
    out["hv"]["random search, equal time"] = hv(front._front(table, order[:n], col))
    return out


def _free_arms(table: pd.DataFrame, order: list[str], out: dict[str, Any], proxy: str,
               screen: Screen, latency_s: float, hv: Any) -> None:
    """``proxy``'s free fronts for the seed ``out`` holds (its order of the pool, looks and
    wall time), added to ``out``: at equal time (whole, and cut to the screen's cap), at equal
    looks and over the whole pool; and the look cost up to which the wall time buys the pool."""
    pcol = proxy_col(proxy, str(out["recipe_seed"]))
    looked, wall = out["looked"], out["wall_s"]
    n = bought(look_seconds(table, proxy, latency_s)[order].values, wall)
    out["bought"][proxy] = n
    out["hv"][f"{proxy} free front, equal time"] = hv(front._front(table, order[:n], pcol))
    out["hv"][f"{proxy} free front, equal time, at most {screen.most}"] = hv(
        screen.trained(table, order[:n], pcol))  # as many members as the shipped returns
    out["hv"][f"{proxy} free front, equal looks"] = hv(front._front(table, looked, pcol))
    out["hv"][f"{proxy} free front, whole pool"] = hv(
        front._front(table, list(table.index), pcol))
    # pool x L + the proxy's seconds <= looks x L + the rest of the wall time: the largest L
    rest = wall - latency_s * len(looked) - look_seconds(table, proxy, 0.0).sum()
    out["whole_pool_up_to_s"][proxy] = float(rest / max(len(table) - len(looked), 1))


def evaluate(table: pd.DataFrame, seeds: int, screen: Screen,
             latency_s: float = LOOK_LATENCY_S,
             also: Sequence[Screen] = ()) -> list[dict[str, Any]]:
    """``one_seed`` for search seeds ``0..seeds-1`` on ``table``, HV as fractions of the pool's
    true front."""
    cols = [c for c in table.columns if c.startswith("score_s")]
    ref = [float(table[front.KEY].min()), front.BUDGET_MS]
    best = front.true_hv(table, front._front(table, list(table.index), front.KEY), ref)

    def hv(members: list[str]) -> float:
        return front.true_hv(table, members, ref) / best if members else 0.0

    return [one_seed(table, k, cols[k % len(cols)], screen, latency_s, hv, also)
            for k in range(seeds)]


def variants(screen: Screen) -> tuple[Screen, ...]:
    """The screens priced beside ``screen``: the narrow one it replaced, and ``screen`` with no
    cap on the front it trains, alone and stopped by ``schedule.stop_share`` at 0.25 and 0.5
    (both reported: neither is chosen on this truth)."""
    whole = Screen(looks=screen.looks, most=None)
    return (NARROW, whole, *(Screen(screen.looks, None, share) for share in STOP_SHARES))


STOP_SHARES = (0.25, 0.5)


def run(recipe: str, seeds: int, recipe_seeds: list[int], screen: Screen | None = None,
        latency_s: float = LOOK_LATENCY_S, also: Sequence[Screen] | None = None
        ) -> dict[str, Any]:
    screen = screen or shipped_screen()
    also = variants(screen) if also is None else also
    table = cost_table(recipe, recipe_seeds)
    per_seed = evaluate(table, seeds, screen, latency_s, also)
    res = {"recipe": recipe, "pool": len(table), "seeds": seeds, "recipe_seeds": recipe_seeds,
           "screen": {"looks": screen.looks, "promote_max": screen.most},
           "look_latency_s": latency_s,
           "median_s": {"look (latency + SynFlow)": float(np.median(
               look_seconds(table, "synflow", latency_s))),
               "look (latency + NASWOT)": float(np.median(look_seconds(table, "naswot",
                                                                       latency_s))),
               "training": float(table.sec_train.median()),
               "scoring": float(table.sec_score.median())},
           "per_seed": per_seed}
    OUT.with_suffix(".json").write_text(json.dumps(res, indent=1))
    OUT.with_suffix(".md").write_text(markdown(res))
    return res


def arm_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per arm: median, IQR and min of its HV fraction over search seeds, and the archs
    it looked at and trained (medians)."""
    per = res["per_seed"]
    out = []
    for arm in per[0]["hv"]:
        hv = np.array([s["hv"][arm] for s in per])
        q1, med, q3 = np.percentile(hv, [25, 50, 75])
        looked, trained = _counts(res, arm)
        out.append({"front from": arm, "archs looked at": looked, "archs trained": trained,
                    "median HV fraction": round(float(med), 3), "IQR": f"[{q1:.3f}, {q3:.3f}]",
                    "min": round(float(hv.min()), 3)})
    return out


def _counts(res: dict[str, Any], arm: str) -> tuple[str, str]:
    """Median archs looked at and trained by ``arm`` over the seeds (as text)."""
    per, pool = res["per_seed"], res["pool"]

    def med(xs: list[float]) -> str:
        return f"{float(np.median(xs)):g}"

    if arm.startswith("shipped"):
        return med([s["looks"] for s in per]), med([len(s["trained"]) for s in per])
    if arm.startswith("random"):
        n = med([s["random_trained"] for s in per])
        return n, n
    if arm in per[0]["also"]:
        return med([s["also"][arm]["looks"] for s in per]), med(
            [s["also"][arm]["trained"] for s in per])
    proxy, _, at = arm.partition(" free front, ")
    if at.startswith("equal time"):
        return med([s["bought"][proxy] for s in per]), "0"
    return (med([s["looks"] for s in per]) if at == "equal looks" else str(pool)), "0"


def comparison_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """The shipped arm against every other arm: seeds above / equal / below, sign test p."""
    per = res["per_seed"]
    mine = [s["hv"]["shipped"] for s in per]
    out = []
    for arm in per[0]["hv"]:
        if arm == "shipped":
            continue
        t = sign_test(mine, [s["hv"][arm] for s in per])
        out.append({"shipped against": arm, "above": t["above"], "equal": t["equal"],
                    "below": t["below"], "sign test p (two-sided)": f"{t['p']:.2g}"})
    return out


def _costs_text(res: dict[str, Any]) -> str:
    """The paragraph that states every cost, its source, and what the shipped wall time buys."""
    per, med, pool = res["per_seed"], res["median_s"], res["pool"]
    walls = np.array([s["wall_s"] for s in per])
    look = {"synflow": med["look (latency + SynFlow)"], "naswot": med["look (latency + NASWOT)"]}
    bought_med = {p: f"{float(np.median([s['bought'][p] for s in per])):g}" for p in PROXIES}
    whole = sum(all(s["bought"][p] == pool for p in PROXIES) for s in per)
    up_to = min(min(s["whole_pool_up_to_s"].values()) for s in per)
    beyond = {p: math.floor(float(np.median(walls)) / c) for p, c in look.items()}
    return (
        f"Costs, per arch the median over the recipe seeds: a look {look['synflow']:.2f} s with "
        f"SynFlow, {look['naswot']:.2f} s with NASWOT (pool medians; the latency measurement at "
        f"{res['look_latency_s']} s, the timing stop rule's 0.3 s warm-up plus the quickstart's "
        "`latency.max_seconds` 1.0, since no stored record holds its seconds; the proxy's own "
        f"seconds from baselines.csv), a training {med['training']:.0f} s and a scoring "
        f"{med['scoring']:.0f} s (pool medians of scores.csv's `train_seconds` and `seconds - "
        "train_seconds`: 1 thread, AMD EPYC 2-vCPU VM, loaded). The shipped arm's wall time: "
        f"median {np.median(walls):.0f} s (range {walls.min():.0f}-{walls.max():.0f}); at a "
        f"look's cost it buys the whole pool for every free score in {whole} of {len(per)} "
        f"seeds (median looks bought: params {bought_med['params']}, SynFlow "
        f"{bought_med['synflow']}, NASWOT {bought_med['naswot']}), and would in every seed at "
        f"any latency-measurement cost up to {up_to:.1f} s per look; in a space larger than "
        f"the pool, about {beyond['synflow']} SynFlow or {beyond['naswot']} NASWOT looks. "
        f"{_also_text(per)}"
        f"\"at most {res['screen']['promote_max']}\": the free front of the same archs cut to as "
        "many members as the shipped arm can return, in the screen's own promotion order. HV: "
        "truth pcm@1d against latency as a fraction of the pool's true front.")


def _also_text(per: list[dict[str, Any]]) -> str:
    """The other screens' wall times (each at its own, on the shipped recipe), as a sentence."""
    parts = [f"{arm}: median {np.median([s['also'][arm]['wall_s'] for s in per]):.0f} s"
             for arm in per[0].get("also", {})]
    return ("Other screens, each at its own wall time on the same recipe and order: "
            + "; ".join(parts) + ". ") if parts else ""


def markdown(res: dict[str, Any]) -> str:
    from bench._results import markdown as table

    seeds = ",".join(str(s) for s in res["recipe_seeds"])
    return "\n".join([
        "## Front regret at equal cost: the shipped screen against free fronts",
        "",
        f"Command: `python -m bench.fidelity equal-cost --seeds {res['seeds']} --recipe "
        f"{res['recipe']} --recipe-seeds {seeds}` (bench/fidelity/equal_cost.py), from stored "
        "results only (bench/data/fidelity: truth.csv, scores.csv, baselines.csv; no training).",
        "",
        f"Pool: the {res['pool']} resnet truth archs inside the quickstart's 5 ms budget that "
        f"`{res['recipe']}` scored under seeds {seeds} (as `python -m bench.fidelity front`). "
        f"Shipped: the quickstart's screen ({res['screen']['looks']} looks, its free "
        f"(SynFlow, latency) front capped at {res['screen']['promote_max']} in promotion order, "
        "`FirstRung` read from studies/quickstart.yaml) trained and scored by the recipe's "
        "stored score, front picked on the scores shrunk to SynFlow. Search seed k uses recipe "
        f"seed number k mod {len(res['recipe_seeds'])} of that list (from 0) and one random "
        "order of the pool that every arm reads from its start.",
        "",
        _costs_text(res),
        "",
        table(arm_rows(res)),
        "",
        "The shipped arm against each other arm, per search seed (HV fractions within 1e-9 "
        "count as equal; sign test: scipy.stats.binomtest over the unequal seeds):",
        "",
        table(comparison_rows(res)),
        "",
        "Where the bench differs from `hwnas run quickstart`: the looks are drawn uniformly "
        "from the in-budget pool (the `default` sampler proposes from the whole space, and a "
        "look over the budget costs a look and is never trained); latency is baselines.csv's, "
        "never remeasured; the trained score is the recipe's stored `pcm` at 1 d (`e2_lean`: the "
        "quickstart's 2 epochs and lean score, 1 training thread) where the quickstart "
        "scores `pcm_static` with 2 threads; seconds are the records' medians, not one run's. "
        "The rule that picks what is trained is the study's own (`FirstRung.k`'s cap on the "
        "free front, then `nas.algorithms.promotion.promote`), and the front's shrinkage is "
        "`nas.algorithms.shrink` as `pareto: {shrink: prior}` applies it. The arm "
        "`synflow rung 0 @M -> N, scores shrunk to SynFlow` of `python -m bench.fidelity "
        "front` is not this pipeline: it looks at 3N archs and trains the N best by promotion "
        "order, past the free front when that is smaller.",
    ]) + "\n"
