"""Search quality on the 15,625-cell NB201 table: hypervolume at 100 and 300 evaluations.

Each sampler runs ``--seeds`` independent searches (accuracy proxy up, CPU latency down, table
from ``bench/nb201_table.py``); the hypervolume of the first 100 / 300 trials is computed with a
fixed reference point (accuracy 0, the table's worst latency) and also given as a share of the
whole table's front (the best any search can reach). Medians, 25-75 percentiles and the ratio of
medians to Optuna's plain TPE are printed and written to ``bench/results/nas_search_quality.md``.

    python bench/search_quality.py --seeds 7
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import optuna
from _results import publish  # bench/ is on sys.path when run as a script

from hwnas.common.provenance import provenance
from nas.pareto import hypervolume
from nas.samplers import make_sampler
from nas.tabular import TabularEvaluator
from search_spaces import get_space

TABLE = Path(__file__).resolve().parent / "data" / "nb201_fmnist.parquet"
OUT = Path(__file__).resolve().parent / "results" / "nas_search_quality.md"
DIRS = ["maximize", "minimize"]
KEYS = ["acc_digital", "latency_ms"]


def run_search(sampler: str, seed: int, n: int, table: TabularEvaluator) -> np.ndarray:
    """Objective values of ``n`` trials in order (repeats included: each costs an evaluation)."""
    space = get_space("nb201")

    def objective(trial: optuna.Trial) -> tuple[float, float]:
        row = table.lookup(space.sample(trial))
        return row[KEYS[0]], row[KEYS[1]]

    study = optuna.create_study(directions=DIRS, sampler=make_sampler(sampler, seed=seed))
    study.optimize(objective, n_trials=n)
    return np.array([t.values for t in study.trials])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samplers", default="default,tpe,nsga2,random,tpe_mv")
    ap.add_argument("--seeds", type=int, default=7)
    ap.add_argument("--budgets", default="100,300")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    budgets = [int(b) for b in args.budgets.split(",")]
    table = TabularEvaluator(TABLE)
    all_values = np.array(table.values(KEYS))
    ref = [0.0, float(all_values[:, 1].max())]
    best = hypervolume(all_values, DIRS, ref)
    results: dict[str, dict[int, list[float]]] = {}
    seconds: dict[str, float] = {}
    for name in args.samplers.split(","):
        results[name] = {b: [] for b in budgets}
        t0 = time.perf_counter()
        for seed in range(args.seeds):
            values = run_search(name, seed, max(budgets), table)
            for b in budgets:
                results[name][b].append(hypervolume(values[:b], DIRS, ref) / best)
        seconds[name] = (time.perf_counter() - t0) / args.seeds
        print(name, {b: round(float(np.median(v)), 4) for b, v in results[name].items()},
              f"{seconds[name]:.1f} s/search", flush=True)
    write(results, seconds, budgets, ref, best, args)


def write(results: dict, seconds: dict, budgets: list[int], ref: list[float], best: float,
          args: argparse.Namespace) -> None:
    prov = provenance("cpu")
    base = {b: float(np.median(results["tpe"][b])) for b in budgets} if "tpe" in results else {}
    head = "| sampler | " + " | ".join(f"HV@{b} median [p25, p75] | vs tpe @{b}"
                                        for b in budgets) + " | s/search |"
    lines = [
        "## Search quality: NB201 table (15,625 cells), accuracy proxy vs CPU latency", "",
        f"Command: `python bench/search_quality.py --seeds {args.seeds} --samplers "
        f"{args.samplers}`", "",
        f"Hypervolume as a share of the whole table's front (reference accuracy 0, latency "
        f"{ref[1]:.3f} ms; table front HV {best:.4f}); median over {args.seeds} seeds.", "",
        head, "|---|" + "---|---|" * len(budgets) + "---|"]
    for name, per in results.items():
        cells = []
        for b in budgets:
            v = np.array(per[b])
            med, lo, hi = np.median(v), np.percentile(v, 25), np.percentile(v, 75)
            ratio = f"{med / base[b]:.3f}x" if base else ""
            cells.append(f"{med:.4f} [{lo:.4f}, {hi:.4f}] | {ratio}")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {seconds[name]:.1f} |")
    lines += ["", f"Device: {prov['device']}; versions: "
              + ", ".join(f"{k} {v}" for k, v in prov["versions"].items()
                          if k in ("python", "optuna", "torch", "numpy")),
              f"git {prov['git']}, {prov['time_utc']}."]
    publish("\n".join(lines), OUT)


if __name__ == "__main__":
    main()
