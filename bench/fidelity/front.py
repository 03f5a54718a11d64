"""Front regret against the truth: does a search beat the largest model that fits the budget?

The pool is the resnet truth set inside the quickstart's 5 ms budget (latency as the
baselines recorded it, idle, at the quickstart's setting: the yardstick's pool). A search runs
the quickstart's objectives (pcm@1d accuracy up, latency down) on
the pool (``search_spaces.pool.PoolSpace``, what ``space_pool:`` gives a study) for ``--trials``
candidates, each scored by a recipe's stored score under one seed (scores.csv: exactly what the
study's evaluator returns for that (config, arch, seed)); its front is the Pareto set of those
scores. That front is then scored at the truth: its hypervolume (truth pcm@1d against latency)
as a fraction of the pool's true front. Side by side, at the same number of candidates:

- ``default`` and ``random`` (and ``tpe_mv``) searches scored by the recipe;
- ``default + size prior``: the default search whose first candidates are the free
  params-greedy front (fastest first), the rest proposed by the sampler;
- ``noise-aware front``: instead of the Pareto set of the scores, every candidate no other
  beats by more than the front's margin at no more latency (``comparison_se`` with the recipe's
  calibrated training noise, noise.json): what the scores cannot rule out, a larger set;
- ``params-greedy@N``: the Pareto set of parameter count (up) against latency (down) among ``N``
  random pool archs, no training at all;
- ``params-greedy``: the same over the whole pool (free: no training needed to rank by size);
- ``<prior> rung 0``: successive halving with a free rung 0 (``schedule.prior``): ``M = eta x N``
  random pool archs (eta 3, at most the pool) ranked by the prior (SynFlow at the recipe seed's
  initialisation, baselines.csv, or log parameter count) against latency with the study's
  promotion rule (``nas.algorithms.promotion``); only the ``N`` promoted are trained (their
  stored recipe score), and the front is the Pareto set of those scores, or their noise-aware
  front;
- ``scores shrunk to SynFlow``: the SynFlow rung-0 arm's N trained candidates, each score pulled
  toward the line of those N scores on their log SynFlow by its noise share
  (``nas.algorithms.shrink``), then their Pareto set;
- ``params-greedy@M``: the params-greedy front of the same ``M`` archs, no training: the free
  baseline at the same number of archs looked at.

    python -m bench.fidelity front --recipe default --recipe-seeds 1,2 --trials 6 --seeds 10

Each run also keeps its result as ``bench/results/fidelity_front_t<N>.json``, so runs at several
``--trials`` stand side by side in the report.

Median and spread over search seeds; the recipe seed of search seed k is the k-th of
``--recipe-seeds`` in turn (seeds disjoint from the truth's), so searches share noise draws.
"""

from __future__ import annotations

import json
import random
from typing import Any

import numpy as np
import optuna
import pandas as pd

from bench import RESULTS
from bench.fidelity.baselines import BASELINES, stored_latency
from bench.fidelity.recipes import SCORES
from bench.fidelity.truth import DATA
from nas.algorithms.pareto import comparison_se, hypervolume, pareto_mask
from nas.algorithms.promotion import promote
from nas.algorithms.samplers import make_sampler
from nas.algorithms.shrink import shrunk
from search_spaces import get_space
from search_spaces.pool import PoolSpace

NOISE = DATA / "noise.json"
BUDGET_MS = 5.0
KEY = "acc_pcm@1d"
DIRS = ["maximize", "minimize"]
SEARCHERS = ("default", "random", "tpe_mv")
PRIOR_ETA = 3
"""Rung 0 keeps 1/eta: the study default of ``schedule.eta``."""
PRIORS = ("synflow", "params")


def pool_table(recipe: str, seeds: list[int]) -> pd.DataFrame:
    """Per pool arch: truth accuracy, latency, params and the recipe's score under ``seeds``
    (archs scored under all of them)."""
    truth = pd.read_csv(DATA / "truth.csv")
    truth = truth[(truth.space == "resnet") & (truth.recipe == "digital")].set_index("arch")
    lat = stored_latency().reindex(truth.index)  # the yardstick's, not this machine's cache
    table = truth[[KEY, "params"]].assign(latency_ms=lat.values)
    scores = pd.read_csv(SCORES)
    mine = scores[(scores.recipe == recipe) & scores.seed.isin(seeds)].pivot_table(
        index="arch", columns="seed", values="acc")
    se = scores[(scores.recipe == recipe) & scores.seed.isin(seeds)].pivot_table(
        index="arch", columns="seed", values="acc_se")
    reps = scores[(scores.recipe == recipe) & scores.seed.isin(seeds)].pivot_table(
        index="arch", columns="seed", values="repeats")
    table = table.join(mine.add_prefix("score_s"), how="inner").join(
        se.add_prefix("se_s"), how="inner").join(reps.add_prefix("reps_s"), how="inner")
    base = pd.read_csv(BASELINES)  # SynFlow of the model each recipe seed builds
    synflow = base[base.seed.isin(seeds)].pivot_table(index="arch", columns="seed",
                                                      values="synflow")
    table = table.join(synflow.add_prefix("synflow_s"), how="inner")
    table["params_log"] = np.log(table.params)
    return table[table.latency_ms <= BUDGET_MS].dropna()


def true_hv(table: pd.DataFrame, members: list[str], ref: list[float]) -> float:
    pts = table.loc[members, [KEY, "latency_ms"]].values
    return hypervolume(pts, DIRS, ref)


def search(table: pd.DataFrame, sampler: str, seed: int, trials: int,
           score_col: str, prior: bool = False, train_sd: float | None = None) -> list[str]:
    """The front (by the recipe's scores) of a ``trials``-candidate search over the pool;
    ``prior``: the free params-greedy front is enqueued first (fastest first), the sampler
    proposes the rest."""
    space = PoolSpace(get_space("resnet"), list(table.index))
    seen: list[str] = []

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        arch = space.sample(trial)
        seen.append(arch)
        return float(table.at[arch, score_col]), float(table.at[arch, "latency_ms"])

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    chosen = make_sampler(sampler, seed=seed)
    if hasattr(chosen, "attach"):  # as the study driver does: plans and mutations from the
        # space, parents weighed against the quickstart's reference (accuracy 0, the budget)
        chosen.attach(space=space, reference=[0.0, BUDGET_MS])
    study = optuna.create_study(directions=DIRS, sampler=chosen)
    if prior:
        free = params_greedy(table, list(table.index))
        for arch in sorted(free, key=lambda a: table.at[a, "latency_ms"])[:trials]:
            study.enqueue_trial(space.decode(arch))
    study.optimize(objective, n_trials=trials)
    if train_sd is not None:
        return noise_front(table, list(dict.fromkeys(seen)), score_col, train_sd)
    return _front(table, list(dict.fromkeys(seen)), score_col)


def noise_front(table: pd.DataFrame, archs: list[str], col: str, train_sd: float) -> list[str]:
    """Every arch no other arch beats by more than the front's margin at no more latency: what
    the scores cannot rule out (``comparison_se``: t quantile of the programmings, plus the
    recipe's calibrated training noise)."""
    seed = col.removeprefix("score_s")
    sub = table.loc[archs]
    se = comparison_se(sub[f"se_s{seed}"].values, sub[f"reps_s{seed}"].values, train_sd)
    acc, lat = sub[col].values, sub.latency_ms.values
    keep = []
    for i, arch in enumerate(archs):
        beaten = (lat <= lat[i]) & (acc - acc[i] > 2 * np.sqrt(se**2 + se[i] ** 2))
        if not beaten.any():
            keep.append(arch)
    return keep


def _front(table: pd.DataFrame, archs: list[str], col: str) -> list[str]:
    vals = table.loc[archs, [col, "latency_ms"]].values
    return [a for a, keep in zip(archs, pareto_mask(vals, DIRS), strict=True) if keep]


def params_greedy(table: pd.DataFrame, archs: list[str]) -> list[str]:
    return _front(table, archs, "params")


def looked_at(table: pd.DataFrame, seed: int, trials: int) -> list[str]:
    """The ``M = PRIOR_ETA x trials`` pool archs (at most the pool) rung 0 of search ``seed``
    scores for free."""
    return random.Random(seed).sample(list(table.index), min(PRIOR_ETA * trials, len(table)))


def prior_search(table: pd.DataFrame, archs: list[str], prior_col: str, trials: int,
                 score_col: str, train_sd: float | None = None) -> list[str]:
    """The front of a search whose rung 0 ranks ``archs`` by ``prior_col`` (higher better)
    against latency (lower better) and promotes the best ``trials`` by the study's rule; only
    those are trained (their recipe score under ``score_col``)."""
    chosen = promoted(table, archs, prior_col, trials)
    if train_sd is not None:
        return noise_front(table, chosen, score_col, train_sd)
    return _front(table, chosen, score_col)


def promoted(table: pd.DataFrame, archs: list[str], prior_col: str, n: int) -> list[str]:
    """The ``n`` of ``archs`` rung 0 promotes: non-dominated rank on (prior up, latency down),
    then crowding, then order (``nas.algorithms.promotion``, as a study's rung 0)."""
    vals = table.loc[archs, [prior_col, "latency_ms"]].values
    return [archs[i] for i in promote(vals, DIRS, n)]


def _prior_arms(table: pd.DataFrame, seed: int, trials: int, col: str, sd: float,
                truth_hv: Any) -> dict[str, float]:
    """HV fractions of the rung-0 arms and params-greedy@M for search ``seed``."""
    archs = looked_at(table, seed, trials)
    out = {"params-greedy@M": truth_hv(params_greedy(table, archs))}
    for prior in PRIORS:
        prior_col = ("synflow_s" + col.removeprefix("score_s") if prior == "synflow"
                     else "params_log")
        for suffix, noise in (("", None), (", noise-aware front", sd)):
            found = prior_search(table, archs, prior_col, trials, col, train_sd=noise)
            out[f"{prior} rung 0 @M -> N{suffix}"] = truth_hv(found)
    chosen = promoted(table, archs, "synflow_s" + col.removeprefix("score_s"), trials)
    out[SHRUNK_ARM] = truth_hv(_front(shrunk_scores(table, chosen, col), chosen, "shrunk"))
    return out


SHRUNK_ARM = "synflow rung 0 @M -> N, scores shrunk to SynFlow"


def shrunk_scores(table: pd.DataFrame, archs: list[str], col: str) -> pd.DataFrame:
    """``archs``' rows with column ``shrunk``: each trained score pulled toward the trend of the
    trained candidates' scores on their log SynFlow, by its noise share (``shrunk``; fewer
    than three stand as they are): what a study can compute from its own trained candidates."""
    seed = col.removeprefix("score_s")
    sub = table.loc[archs].copy()
    return sub.assign(shrunk=shrunk(sub[col].values, sub[f"synflow_s{seed}"].values,
                                    sub[f"se_s{seed}"].values))


def run(recipe: str, trials: int, seeds: int, recipe_seeds: list[int]) -> dict[str, Any]:
    table = pool_table(recipe, recipe_seeds)
    cols = [c for c in table.columns if c.startswith("score_s")]
    ref = [float(table[KEY].min()), BUDGET_MS]
    truth_front = _front(table, list(table.index), KEY)
    best = true_hv(table, truth_front, ref)
    size_front = params_greedy(table, list(table.index))
    sd = json.loads(NOISE.read_text()).get(recipe, {}).get(KEY, 0.0) if NOISE.is_file() else 0.0
    arms = (*SEARCHERS, "default + size prior", "default, noise-aware front",
            "default + size prior, noise-aware front", "params-greedy@N")
    arms += (*(f"{p} rung 0 @M -> N{s}" for p in PRIORS for s in ("", ", noise-aware front")),
             SHRUNK_ARM, "params-greedy@M")
    out: dict[str, list[float]] = {s: [] for s in arms}
    for k in range(seeds):
        col = cols[k % len(cols)]
        for name in SEARCHERS:
            out[name].append(true_hv(table, search(table, name, k, trials, col), ref) / best)
        for name, prior, noise in (("default + size prior", True, None),
                                   ("default, noise-aware front", False, sd),
                                   ("default + size prior, noise-aware front", True, sd)):
            found = search(table, "default", k, trials, col, prior=prior, train_sd=noise)
            out[name].append(true_hv(table, found, ref) / best)
        drawn = random.Random(k).sample(list(table.index), min(trials, len(table)))
        out["params-greedy@N"].append(true_hv(table, params_greedy(table, drawn), ref) / best)
        prior = _prior_arms(table, k, trials, col, sd,
                            lambda found: true_hv(table, found, ref) / best)
        for name, hv in prior.items():
            out[name].append(hv)
    whole = true_hv(table, size_front, ref) / best
    res = {"recipe": recipe, "pool": len(table), "trials": trials, "seeds": seeds,
           "train_noise_sd": sd, "eta": PRIOR_ETA,
           "looked_at": min(PRIOR_ETA * trials, len(table)),
           "fronts": {"truth": len(truth_front), "params": len(size_front),
                      "shared": len(set(truth_front) & set(size_front))},
           "recipe_seeds": [c.removeprefix("score_s") for c in cols], "ref": ref,
           "hv": out, "params_greedy_pool": whole}
    (RESULTS / f"fidelity_front_t{trials}.json").write_text(json.dumps(res))
    return res


def rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per arm: median, IQR and min of its HV fraction over search seeds, and the seeds
    where it is strictly above each free front (params-greedy@N, @M on the same M archs, and
    of the whole pool)."""
    free = {"@N": np.array(res["hv"]["params-greedy@N"])}
    if "params-greedy@M" in res["hv"]:  # results written before the rung-0 arms have none
        free["@M"] = np.array(res["hv"]["params-greedy@M"])
    out = []
    for name, hv in res["hv"].items():
        hv = np.array(hv)
        q1, med, q3 = np.percentile(hv, [25, 50, 75])
        row = {"front from": name, "median HV fraction": round(float(med), 3),
               "IQR": f"[{q1:.3f}, {q3:.3f}]", "min": round(float(hv.min()), 3)}
        for at, greedy in free.items():
            if name != f"params-greedy{at}":
                row[f"seeds above params-greedy{at}"] = f"{int((hv > greedy).sum())}/{len(hv)}"
        row["seeds above params-greedy (pool)"] = (
            f"{int((hv > res['params_greedy_pool']).sum())}/{len(hv)}")
        out.append(row)
    out.append({"front from": "params-greedy (whole pool, free)",
                "median HV fraction": round(res["params_greedy_pool"], 3)})
    return out
