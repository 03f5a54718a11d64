"""What the hardware truth shows: variance shares, the free heuristics, and front regret.

- **Shares.** A two-way decomposition (architecture + hardware + interaction) of accuracy at 30 d
  and of log energy over the complete (arch x chip) grid, beside the noise the estimates carry.
- **Free heuristics.** The joint front is accuracy at 30 d (max) against analog energy per
  inference (min) over every cell. A heuristic fixes the chip by a rule (``configs.HEURISTICS``);
  its HV fraction is that of the true front of the cells it admits, every arch seen: the most it
  can reach.
- **Front regret at equal wall time.** Searches spend one CPU budget, charged as the truth paid it
  (two budgets, fixed before any result: a third and two thirds of the truth's archs trained
  and scored at their median cost):
  a new arch costs its training (the fidelity truth's recorded seconds) and each scored chip its
  scoring seconds; scoring another chip on a trained arch costs only the scoring. The shipped
  sampler (``default``) searches arch and chip jointly, beside Optuna's TPE and NSGA-II on the
  same two parameters; random search draws (arch, chip) cells;
  each heuristic spends the budget on archs (in random order) at its chip; size-greedy trains the
  largest arch at maximum bits. Every search ends when its next evaluation does not fit in what
  is left (the time runs out during it). A search sees each cell's accuracy with noise: the
  training seed's (one draw per arch, shared by its chips) and the cell's programming SE; its
  front is the observed one, its HV that of those cells' true values.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

import numpy as np
import optuna
import pandas as pd

from bench import RESULTS
from bench.fidelity.truth import DATA as FIDELITY
from bench.hwtruth.configs import CONFIGS
from bench.hwtruth.units import DATA, REPEATS, TIME
from nas.algorithms.pareto import hypervolume, pareto_mask
from nas.algorithms.samplers import make_sampler
from search_spaces import get_space
from search_spaces.pool import PoolSpace

DIRS = ["maximize", "minimize"]
OBJ = ["acc", "analog_energy_uj"]
OUT = RESULTS / "hwtruth.md"
MAX_BITS, FIRST_LAST = CONFIGS[0].code, CONFIGS[1].code


def table() -> pd.DataFrame:
    """One row per scored cell, of the archs scored on every chip."""
    rows = [json.loads(p.read_text()) for p in sorted((DATA / "units").glob("*.json"))]
    if not rows:
        raise SystemExit("hwtruth: no units yet; run `python -m bench.hwtruth work` first")
    t = pd.DataFrame(rows)
    complete = t.groupby("arch").hardware.nunique() == len(CONFIGS)
    t = t[t.arch.isin(complete[complete].index)].copy()
    truth = pd.read_csv(FIDELITY / "truth.csv").drop_duplicates("arch").set_index("arch")
    t["params"] = t.arch.map(truth.params)
    t["train_seconds"] = t.arch.map(truth.train_seconds)
    return t.reset_index(drop=True)


def train_sd() -> float:
    """The training-seed SD of an analog accuracy: archs trained with two seeds in the fidelity
    truth, their seed spread of pcm at 30 d less the programming SE each mean carries."""
    t = pd.read_csv(FIDELITY / "truth_seeds.csv")
    t = t[(t.space == "resnet") & (t.recipe == "digital")]
    g = t.groupby("arch").agg(n=("seed", "nunique"), var=("acc_pcm@30d", "var"),
                              se2=("acc_pcm@30d_se", lambda s: float((s**2).mean())))
    g = g[g.n >= 2]
    return math.sqrt(max(float((g["var"] - g["se2"]).mean()), 0.0))


def shares(t: pd.DataFrame, col: str) -> dict[str, float]:
    """Sum-of-squares shares of ``col`` over the complete grid: arch, hardware, interaction."""
    grid = t.pivot(index="arch", columns="hardware", values=col)
    mu = grid.values.mean()
    ss = ((grid.values - mu) ** 2).sum()
    ss_a = grid.shape[1] * ((grid.mean(axis=1) - mu) ** 2).sum()
    ss_h = grid.shape[0] * ((grid.mean(axis=0) - mu) ** 2).sum()
    return {"arch": ss_a / ss, "hardware": ss_h / ss, "interaction": (ss - ss_a - ss_h) / ss,
            "total_var": ss / grid.size}


def reference(t: pd.DataFrame) -> list[float]:
    """Every cell counts: accuracy below the worst cell's, energy above the largest."""
    return [float(t.acc.min()) - 0.01, float(t.analog_energy_uj.max()) * 1.05]


def hv(t: pd.DataFrame, rows: list[int], ref: list[float]) -> float:
    return hypervolume(t.loc[rows, OBJ].values, DIRS, ref) if rows else 0.0


def heuristic_cells(t: pd.DataFrame) -> dict[str, list[int]]:
    largest = t.loc[t.params.idxmax(), "arch"]
    return {
        "max bits, all analog": list(t.index[t.hardware == MAX_BITS]),
        "max bits, first+last digital": list(t.index[t.hardware == FIRST_LAST]),
        "size-greedy arch, max bits": list(t.index[(t.hardware == MAX_BITS)
                                                   & (t.arch == largest)]),
    }


# -- searches at equal wall time ----------------------------------------------------------------
class Bill:
    """The truth's own costs: an arch's training once, each chip's scoring."""

    def __init__(self, t: pd.DataFrame, budget: float) -> None:
        self.t, self.left, self.trained = t, budget, set()
        self.score_s = float(t.score_seconds.median())

    def cost(self, arch: str) -> float:
        train = 0.0 if arch in self.trained else float(self.t.train_seconds[self.t.arch == arch]
                                                       .iloc[0])
        return train + self.score_s

    def pay(self, arch: str) -> bool:
        c = self.cost(arch)
        if c > self.left:
            return False
        self.left -= c
        self.trained.add(arch)
        return True


def observe(t: pd.DataFrame, seed: int, sd_train: float) -> pd.Series:
    """One seed's view of every cell: a training draw per arch plus the cell's programming SE."""
    rng = np.random.default_rng(seed)
    offset = {a: rng.normal(0, sd_train) for a in sorted(t.arch.unique())}
    return t.acc + t.arch.map(offset) + rng.normal(0, 1, len(t)) * t.acc_se


def observed_front(t: pd.DataFrame, seen: list[int], obs: pd.Series) -> list[int]:
    seen = list(dict.fromkeys(seen))
    pts = np.column_stack([obs[seen].values, t.loc[seen, "analog_energy_uj"].values])
    return [i for i, keep in zip(seen, pareto_mask(pts, DIRS), strict=True) if keep]


def joint_search(t: pd.DataFrame, sampler: str, seed: int, budget: float,
                 obs: pd.Series) -> list[int]:
    archs, codes = sorted(t.arch.unique()), [c.code for c in CONFIGS]
    space, bill, seen = PoolSpace(get_space("resnet"), archs), Bill(t, budget), []
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    chosen = make_sampler(sampler, seed=seed)
    if hasattr(chosen, "attach"):
        chosen.attach(space=space, reference=reference(t))
    study = optuna.create_study(directions=DIRS, sampler=chosen)
    for _ in range(200):
        trial = study.ask()
        arch, code = space.sample(trial), trial.suggest_categorical("hw.chip", codes)
        if not bill.pay(arch):
            break
        i = int(t.index[(t.arch == arch) & (t.hardware == code)][0])
        seen.append(i)
        study.tell(trial, [float(obs[i]), float(t.at[i, "analog_energy_uj"])])
    return observed_front(t, seen, obs)


def random_cells(t: pd.DataFrame, seed: int, budget: float, obs: pd.Series) -> list[int]:
    rng, bill, seen = random.Random(seed), Bill(t, budget), []
    for i in rng.sample(list(t.index), len(t)):
        if not bill.pay(t.at[i, "arch"]):
            break
        seen.append(i)
    return observed_front(t, seen, obs)


def fixed_chip(t: pd.DataFrame, code: str, seed: int, budget: float,
               obs: pd.Series) -> list[int]:
    rng, bill, seen = random.Random(seed), Bill(t, budget), []
    for arch in rng.sample(sorted(t.arch.unique()), t.arch.nunique()):
        if not bill.pay(arch):
            break
        seen.append(int(t.index[(t.arch == arch) & (t.hardware == code)][0]))
    return observed_front(t, seen, obs)


def regret(t: pd.DataFrame, seeds: int, budget: float, sd_train: float) -> pd.DataFrame:
    ref = reference(t)
    full = hv(t, list(t.index[pareto_mask(t[OBJ].values, DIRS)]), ref)
    greedy = heuristic_cells(t)["size-greedy arch, max bits"]
    if not Bill(t, budget).pay(t.at[greedy[0], "arch"]):
        greedy = []  # the largest arch does not train in the budget
    rows = []
    for seed in range(seeds):
        obs = observe(t, 1000 + seed, sd_train)
        picks = {"joint search (default sampler)": joint_search(t, "default", seed, budget, obs),
                 "joint search (Optuna TPE)": joint_search(t, "tpe", seed, budget, obs),
                 "joint search (Optuna NSGA-II)": joint_search(t, "nsga2", seed, budget, obs),
                 "joint search (random)": random_cells(t, seed, budget, obs),
                 "max bits, all analog": fixed_chip(t, MAX_BITS, seed, budget, obs),
                 "max bits, first+last digital": fixed_chip(t, FIRST_LAST, seed, budget, obs),
                 "size-greedy arch, max bits": greedy}
        rows += [{"seed": seed, "searcher": k, "hv_fraction": hv(t, v, ref) / full}
                 for k, v in picks.items()]
    return pd.DataFrame(rows)


# -- the report ---------------------------------------------------------------------------------
def _fmt_shares(name: str, s: dict[str, float]) -> str:
    return (f"| {name} | {s['arch']:.2f} | {s['hardware']:.2f} | {s['interaction']:.2f} | "
            f"{math.sqrt(s['total_var']):.4g} |")


def render(t: pd.DataFrame, runs: dict[float, tuple[float, pd.DataFrame]],
           sd_train: float) -> str:
    t = t.assign(log_energy=np.log(t.analog_energy_uj))
    noise = float(np.sqrt((t.acc_se**2).mean() + sd_train**2))
    ref = reference(t)
    front = list(t.index[pareto_mask(t[OBJ].values, DIRS)])
    full = hv(t, front, ref)
    lines = [
        "# Hardware truth: where the chip decides",
        "",
        f"{t.arch.nunique()} resnet truth archs x {len(CONFIGS)} chips = {len(t)} cells. Each "
        f"cell: accuracy at {TIME} on the whole Fashion-MNIST test split (10,000 images), "
        f"{REPEATS} programmings, AdaBS on 512 training images; analog energy of one inference "
        "from the same hardware description (read mode named per chip). Weights: the fidelity "
        "truth's recipe and seed (5 epochs, seed 0), retrained here from their records; a "
        "retraining is not bit-identical to the recorded run (bench/hwtruth/__init__.py).",
        "",
        "## Variance shares over the complete grid",
        "",
        "| quantity | arch | hardware | interaction | SD over cells |",
        "|---|---|---|---|---|",
        _fmt_shares(f"accuracy @ {TIME}", shares(t, "acc")),
        _fmt_shares("log analog energy", shares(t, "log_energy")),
        "",
        f"Noise on one cell's accuracy: {noise:.4f} (programming SE, mean "
        f"{t.acc_se.mean():.4f}, and training-seed SD {sd_train:.4f}, measured on the fidelity "
        "truth's second seeds at pcm 30 d: it is assumed to carry over to every chip).",
        "",
        "## Free heuristics on the truth (HV fraction of the true joint front)",
        "",
        "Joint front: accuracy at 30 d (max) vs analog energy per inference (min), reference "
        f"({ref[0]:.3f}, {ref[1]:.2f} uJ). A heuristic's fraction is the best it can reach: "
        "every arch at its chip, true values.",
        "",
        "| heuristic | cells | HV fraction |",
        "|---|---|---|",
    ]
    for name, cells in heuristic_cells(t).items():
        lines.append(f"| {name} | {len(cells)} | {hv(t, cells, ref) / full:.3f} |")
    lines += ["", "True joint front:", "", "| arch | chip | acc | SE | energy uJ |",
              "|---|---|---|---|---|"]
    for i in sorted(front, key=lambda i: t.at[i, "analog_energy_uj"]):
        lines.append(f"| `{t.at[i, 'arch']}` | `{t.at[i, 'hardware']}` | {t.at[i, 'acc']:.4f} |"
                     f" {t.at[i, 'acc_se']:.4f} | {t.at[i, 'analog_energy_uj']:.3f} |")
    for archs, (budget, res) in runs.items():
        lines += _regret_lines(res, budget, archs)
    return "\n".join(lines) + "\n"


def _regret_lines(res: pd.DataFrame, budget: float, archs: float) -> list[str]:
    piv = res.pivot(index="seed", columns="searcher", values="hv_fraction")
    ship = piv["joint search (default sampler)"]
    others = [c for c in piv.columns if c != ship.name]
    lines = ["", f"## Front regret at equal wall time: {archs:g} archs' cost, "
             f"{budget / 3600:.2f} CPU-hours ({len(piv)} seeds)", "",
             "| searcher | median HV fraction | IQR | shipped above it |", "|---|---|---|---|"]
    for name in piv.columns:
        q = piv[name].quantile([0.25, 0.5, 0.75])
        above = "" if name == ship.name else f"{int((ship > piv[name]).sum())}/{len(piv)}"
        lines.append(f"| {name} | {q[0.5]:.3f} | {q[0.25]:.3f}-{q[0.75]:.3f} | {above} |")
    every = int((ship.values[:, None] > piv[others].values).all(axis=1).sum())
    free = [c for c in others if not c.startswith("joint search")]
    beats_free = int((ship.values[:, None] > piv[free].values).all(axis=1).sum())
    lines += ["", f"The shipped joint search is above every free heuristic in {beats_free}/"
              f"{len(piv)} seeds, and above every other searcher (samplers included) in "
              f"{every}/{len(piv)}."]
    return lines


def main(*, seeds: int, budget_archs: float | None, write: bool) -> dict[str, Any]:
    t = table()
    sd = train_sd()
    n = t.arch.nunique()  # the budgets, set before any result was seen: 1/3 and 2/3 of the archs
    fractions = [budget_archs] if budget_archs else [round(n / 3, 2), round(2 * n / 3, 2)]
    per_arch = float(t.drop_duplicates("arch").train_seconds.median() + t.score_seconds.median())
    runs = {f: (f * per_arch, regret(t, seeds, f * per_arch, sd)) for f in fractions}
    text = render(t, runs, sd)
    flag = f" --budget-archs {budget_archs:g}" if budget_archs else ""
    text += (f"\nCommand: `python -m bench.hwtruth report --seeds {seeds}{flag} --write` "
             f"(a budget of k archs: the seconds of training and scoring k median archs, "
             f"{per_arch:.0f} s each).\n")
    print(text)
    if write:
        OUT.write_text(text)
        rows = pd.concat([r.assign(budget_archs=f) for f, (_, r) in runs.items()])
        (RESULTS / "hwtruth.json").write_text(rows.to_json(orient="records", indent=1))
    return {"table": t, "regret": runs}
