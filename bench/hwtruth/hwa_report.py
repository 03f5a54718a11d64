"""What the HWA truth shows: the HWA gain per arch, whether HWA reorders the archs, and which
members of the accuracy-latency front it changes.

- **Gain.** Per arch, the mean of its HWA seeds less its digital weights' score, at 1 d and 30 d
  on ``pcm_static``. The two start from the same trained weights (paired on that training draw);
  the gain's SE counts every programming SE and the HWA seed noise: the seed variance pooled over
  the archs (the spread of an arch's two seeds less their programming variance), divided by the
  number of seeds.
- **Reordering.** Kendall tau between the archs' HWA and digital-weight scores, with a 90 %
  interval from draws of every score within its SE (the digital one with the truth's
  training-seed SD as well, ``report.train_sd``), and tau against the parameter count.
- **Front.** The front of accuracy (max) against CPU latency at batch 1 (min, the fidelity truth's
  bands measurement) with digital weights and with HWA: the archs that join or leave it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import kendalltau

from bench import RESULTS
from bench.fidelity.truth import DATA as FIDELITY
from bench.hwtruth.hwa import RECIPE, SEEDS, TIMES
from bench.hwtruth.report import train_sd
from bench.hwtruth.units import DATA
from nas.algorithms.pareto import pareto_mask

OUT = RESULTS / "hwa_truth.md"


def units() -> pd.DataFrame:
    rows = [json.loads(p.read_text()) for p in sorted((DATA / "hwa").glob("*.json"))]
    if not rows:
        raise SystemExit("hwa truth: no units yet; run `python -m bench.hwtruth hwa-work` first")
    return pd.DataFrame(rows)


def seed_var(u: pd.DataFrame, label: str) -> float:
    """The HWA seed variance at ``label``, pooled over archs with every seed: each arch's seed
    variance less the mean programming variance its scores carry."""
    h = u[u.kind == "hwa"]
    g = h.groupby("arch").agg(n=("seed", "nunique"), var=(f"acc@{label}", "var"),
                              se2=(f"acc@{label}_se", lambda s: float((s**2).mean())))
    g = g[g.n == len(SEEDS)]
    return max(float((g["var"] - g["se2"]).mean()), 0.0) if len(g) else math.nan


def table(u: pd.DataFrame) -> pd.DataFrame:
    """One row per arch with its digital unit and every HWA seed."""
    bands = json.loads((FIDELITY / "bands.json").read_text())["resnet"]["archs"]
    full = u.groupby("arch").apply(
        lambda g: (g.kind == "digital").sum() == 1 and (g.kind == "hwa").sum() == len(SEEDS),
        include_groups=False)
    rows = []
    for arch in full[full].index:
        g = u[u.arch == arch]
        dig, hwa = g[g.kind == "digital"].iloc[0], g[g.kind == "hwa"]
        row: dict[str, Any] = {"arch": arch, "params": int(bands[arch]["params"]),
                               "latency_ms": bands[arch]["latency_ms"],
                               "acc_digital": dig["weights_acc_digital"],
                               "hwa_seconds": float(hwa.hwa_seconds.mean())}
        for label in TIMES:
            row[f"dig@{label}"] = dig[f"acc@{label}"]
            row[f"dig@{label}_se"] = dig[f"acc@{label}_se"]
            row[f"hwa@{label}"] = float(hwa[f"acc@{label}"].mean())
            row[f"hwa@{label}_se2"] = float((hwa[f"acc@{label}_se"] ** 2).sum()) / len(hwa) ** 2
        rows.append(row)
    t = pd.DataFrame(rows).set_index("arch")
    for label in TIMES:
        var = seed_var(u, label)
        t[f"hwa@{label}_se"] = np.sqrt(t[f"hwa@{label}_se2"] + var / len(SEEDS))
        t[f"gain@{label}"] = t[f"hwa@{label}"] - t[f"dig@{label}"]
        t[f"gain@{label}_se"] = np.sqrt(t[f"hwa@{label}_se"] ** 2 + t[f"dig@{label}_se"] ** 2)
    return t


def tau_interval(a: np.ndarray, a_se: np.ndarray, b: np.ndarray, b_se: np.ndarray,
                 draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Kendall tau of ``a`` and ``b`` and its 5-95 % range over draws within their SEs."""
    rng = np.random.default_rng(seed)
    taus = [kendalltau(rng.normal(a, a_se), rng.normal(b, b_se)).statistic for _ in range(draws)]
    return (float(kendalltau(a, b).statistic), float(np.quantile(taus, 0.05)),
            float(np.quantile(taus, 0.95)))


def front(t: pd.DataFrame, col: str) -> set[str]:
    values = t[[col, "latency_ms"]].to_numpy()
    return set(t.index[pareto_mask(values, ["maximize", "minimize"])])


def render(t: pd.DataFrame, u: pd.DataFrame, sd_train: float) -> str:
    lines = ["# The HWA truth: archs HWA-trained for pcm_static", "",
             f"{len(t)} resnet truth archs (of {u.arch.nunique()} begun), each scored on "
             f"`pcm_static` as shipped at 1 d and 30 d on all 10,000 test images (5 "
             "programmings, AdaBS on 512 training images) with its truth weights (`digital`) "
             f"and after HWA fine-tuning for `pcm_static` with {len(SEEDS)} seeds "
             f"(`analog.hwa_fit`, the study default engine and options; {RECIPE}). Accuracy "
             "± SE; the HWA SE counts the pooled fine-tuning seed noise.", "",
             "| arch | params | latency ms | digital acc | digital weights 1 d | HWA 1 d "
             "| gain 1 d | digital weights 30 d | HWA 30 d | gain 30 d | HWA s |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for arch, r in t.sort_values("latency_ms").iterrows():
        cells = [f"{r[f'{k}@{label}']:.4f} ± {r[f'{k}@{label}_se']:.4f}"
                 for label in TIMES for k in ("dig", "hwa", "gain")]
        lines.append(f"| {arch} | {int(r.params)} | {r.latency_ms:.2f} | {r.acc_digital:.4f} | "
                     + " | ".join(cells) + f" | {r.hwa_seconds:.0f} |")
    lines += [""]
    for label in TIMES:
        sd_seed = math.sqrt(seed_var(u, label))
        gains = t[f"gain@{label}"]
        sig = int(((gains - 2 * t[f"gain@{label}_se"]) > 0).sum())
        dig_se = np.sqrt(t[f"dig@{label}_se"] ** 2 + sd_train**2)
        if len(t) >= 3:
            tau = tau_interval(t[f"hwa@{label}"].to_numpy(), t[f"hwa@{label}_se"].to_numpy(),
                               t[f"dig@{label}"].to_numpy(), dig_se.to_numpy())
            ranks = (f"Kendall tau, HWA vs digital-weight scores: {tau[0]:.2f} (90 % of draws "
                     f"within the SEs and the training-seed SD {sd_train:.4f}: {tau[1]:.2f} to "
                     f"{tau[2]:.2f}); HWA scores vs log(params): "
                     f"{kendalltau(t[f'hwa@{label}'], np.log(t.params)).statistic:.2f}.")
        else:
            ranks = "Kendall tau: not computed below 3 archs."
        dig_front, hwa_front = front(t, f"dig@{label}"), front(t, f"hwa@{label}")
        within = " (the seeds differ by less than their programming noise)" if sd_seed == 0 else ""
        joined = sorted(hwa_front - dig_front) or "none"
        left = sorted(dig_front - hwa_front) or "none"
        lines += [
            f"**At {label}:** gain median {gains.median():+.4f} (range {gains.min():+.4f} to "
            f"{gains.max():+.4f}); above 2 SE in {sig} of {len(t)} archs. HWA seed SD "
            f"{sd_seed:.4f}{within}. {ranks} Accuracy-latency front, digital weights: "
            f"{sorted(dig_front)}; with HWA: {sorted(hwa_front)}; joined {joined}, left {left}.",
            ""]
    return "\n".join(lines)


def main(*, write: bool) -> dict[str, Any]:
    u = units()
    t = table(u)
    if t.empty:
        raise SystemExit("hwa truth: no arch has its digital unit and every HWA seed yet")
    text = render(t, u, train_sd()) + "\nCommand: `python -m bench.hwtruth hwa-report --write`.\n"
    print(text)
    if write:
        OUT.write_text(text)
    return {"table": t}
