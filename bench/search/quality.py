"""Search quality on 15,625-cell NB201 tables: hypervolume at 100 and 300 evaluations, with noise.

Tables (``--tables``), each a different objective shape over the same cells
(``bench/search/nb201_table.py`` and ``bench/search/nb201_objectives.py``):

* ``cpu``: accuracy proxy up, measured CPU latency down;
* ``edge``: accuracy up, a roofline edge accelerator's latency down (launch-bound);
* ``params``: accuracy up, parameters down;
* ``3obj``: accuracy up, CPU latency down, analog (PCM) energy down.

Each sampler runs ``--seeds`` searches per table and noise level. With noise, every evaluation sees
the accuracy plus a Gaussian draw of std ``noise`` (a stored SE of an analog score, in accuracy
units: 0.01 = 1 pt), drawn on an arch's first evaluation; a repeated evaluation of the same arch
returns that observation again, as a study answers a repeat from its storage
(``nas.search.repeats``), so a sampler gains nothing by repeating a noise-lucky arch; the found
front is the non-dominated set of the *observed* values, and it is scored by its members' *true*
table values, so a search that keeps noise-lucky points loses volume. Hypervolume: fixed reference
(accuracy 0, each cost's worst value in the table), given as a share of the whole table's front.
Medians and 25-75 percentiles over seeds, and the wall time per search, are written to
``bench/results/nas_search_quality.md``; raw per-seed figures go to ``--raw`` (JSON), so a run can
be split over processes (``--tables``/``--noise``) and reported once (``--report``).

    python -m bench.search.quality --seeds 10 --tables cpu,edge,params --noise 0,0.01,0.03
    python -m bench.search.quality --samplers default --seeds 30 --first-seed 100 \
        --options '{"parent": "uniform", "max_mutations": 2}' --raw /tmp/tune.json   # tuning
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import optuna
from scipy.stats import mannwhitneyu

from bench import DATA, RESULTS
from bench._results import replace_section
from hwnas.common.provenance import provenance
from hwnas.resources import data_dir
from nas.algorithms.pareto import hypervolume, pareto_mask
from nas.algorithms.samplers import make_sampler
from nas.study.table import TabularEvaluator
from search_spaces import get_space

OUT = RESULTS / "nas_search_quality.md"
RAW = RESULTS / "search_quality_raw.json"
TABLES = {
    "cpu": (data_dir() / "nb201_fmnist.parquet", ["acc_digital", "latency_ms"]),
    "edge": (DATA / "nb201_objectives.parquet", ["acc_digital", "edge_latency_ms"]),
    "params": (DATA / "nb201_objectives.parquet", ["acc_digital", "params"]),
    "3obj": (DATA / "nb201_objectives.parquet", ["acc_digital", "latency_ms", "analog_energy_uj"]),
}
SAMPLERS = {2: "default,tpe_mv,tpe,nsga2", 3: "default,tpe_mv,tpe,nsga2,nsga3"}


class Table:
    """One objective table as arrays: true values by arch, directions, reference, front HV."""

    def __init__(self, name: str):
        file, self.keys = TABLES[name]
        tab = TabularEvaluator(file)
        self.values = np.array(tab.values(self.keys))
        self.index = {a: i for i, a in enumerate(tab.archs())}
        self.dirs = ["maximize"] + ["minimize"] * (len(self.keys) - 1)
        self.ref = [0.0, *self.values[:, 1:].max(axis=0).tolist()]
        self.best = hypervolume(self.values, self.dirs, self.ref)


def run_search(sampler: str, seed: int, n: int, table: Table, noise: float,
               options: dict | None = None) -> np.ndarray:
    """Row indices of the ``n`` evaluated archs and their observed values (noisy accuracy)."""
    space = get_space("nb201")
    rng = np.random.default_rng([seed, 7919])
    rows: list[int] = []
    stored: dict[int, tuple[float, ...]] = {}  # what a study's storage answers a repeat with

    def objective(trial: optuna.Trial) -> tuple[float, ...]:
        i = table.index[space.sample(trial)]
        rows.append(i)
        if i not in stored:
            obs = table.values[i].copy()
            obs[0] += noise * rng.standard_normal() if noise else 0.0
            stored[i] = tuple(obs)
        return stored[i]

    if sampler == "default":  # as a study's driver does: the front's own reference
        options = {"reference": table.ref, **(options or {})}
    study = optuna.create_study(directions=table.dirs, sampler=make_sampler(sampler, seed=seed,
                                                                          options=options))
    study.optimize(objective, n_trials=n)
    observed = np.array([t.values for t in study.trials])
    return np.array(rows), observed


def true_hv(rows: np.ndarray, observed: np.ndarray, table: Table) -> float:
    """HV share of the front picked from the observations, scored at the true values."""
    front = rows[pareto_mask(observed, table.dirs)]
    return hypervolume(table.values[front], table.dirs, table.ref) / table.best


def every_cell_hv(table: Table, noise: float, seeds: int) -> list[float]:
    """HV share of the front picked from one noisy observation of every cell, per seed: what a
    search that evaluated the whole table once would keep. Not a bound (a search that evaluates
    fewer near-front cells meets fewer noise-lucky rivals), but the scale of the noise's cost."""
    out = []
    for seed in range(seeds):
        obs = table.values.copy()
        obs[:, 0] += noise * np.random.default_rng([seed, 104729]).standard_normal(len(obs))
        out.append(hypervolume(table.values[pareto_mask(obs, table.dirs)], table.dirs, table.ref)
                   / table.best)
    return out


def measure(table_name: str, noise: float, samplers: list[str], seeds: int,
            budgets: list[int], *, first_seed: int = 0, options: dict | None = None) -> dict:
    table = Table(table_name)
    out = {}
    for name in samplers:
        hv = {b: [] for b in budgets}
        secs, reached = [], []
        for seed in range(first_seed, first_seed + seeds):
            t0 = time.perf_counter()
            rows, observed = run_search(name, seed, max(budgets), table, noise, options)
            secs.append(time.perf_counter() - t0)
            for b in budgets:
                hv[b].append(true_hv(rows[:b], observed[:b], table))
            # the same archs picked at their true values: what the search reached, so the gap
            # to the HV above is what noise cost at the final pick alone
            reached.append(true_hv(rows, table.values[rows], table))
        out[name] = {"hv": {str(b): v for b, v in hv.items()}, "seconds": secs,
                     "reached": reached}
        print(table_name, noise, name, {b: round(float(np.median(v)), 4) for b, v in hv.items()},
              f"{np.median(secs):.1f} s/search", flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", default="cpu,edge,params,3obj")
    ap.add_argument("--noise", default="0,0.01,0.03", help="accuracy noise std (0.01 = 1 pt)")
    ap.add_argument("--samplers", default=None, help="default: per objective count")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--budgets", default="100,300")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="tune on other seeds (e.g. 100) than the reported 0..seeds-1")
    ap.add_argument("--options", type=json.loads, default=None,
                    help='sampler options as JSON, e.g. \'{"parent": "uniform"}\' (with --raw '
                         "pointing at a scratch file)")
    ap.add_argument("--raw", type=Path, nargs="+", default=[RAW],
                    help="raw JSON: written to the first; the report merges all")
    ap.add_argument("--report", action="store_true", help="only write the report from --raw")
    args = ap.parse_args(argv)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    budgets = [int(b) for b in args.budgets.split(",")]
    if not args.report:
        for noise in [float(x) for x in args.noise.split(",")]:
            for name in args.tables.split(","):
                samplers = (args.samplers or SAMPLERS[len(TABLES[name][1])]).split(",")
                res = measure(name, noise, samplers, args.seeds, budgets,
                              first_seed=args.first_seed, options=args.options)
                every = every_cell_hv(Table(name), noise, args.seeds) if noise else None
                _merge(args.raw[0], f"{name}|{noise:g}", res, every)
    raw: dict = {}
    for path in args.raw:
        for key, entry in (json.loads(path.read_text()) if path.exists() else {}).items():
            raw.setdefault(key, {"samplers": {}})["samplers"].update(entry["samplers"])
            if entry.get("every_cell"):
                raw[key]["every_cell"] = entry["every_cell"]
    tuning = args.first_seed or args.options or args.raw[0] != RAW
    write(dict(sorted(raw.items(), key=_order)), budgets, publish=not tuning)


def _order(item: tuple[str, dict]) -> tuple[int, float]:
    table, noise = item[0].split("|")
    return list(TABLES).index(table), float(noise)


def _merge(path: Path, key: str, res: dict, every: list[float] | None) -> None:
    """Add one condition's samplers to the raw file (other samplers and conditions kept)."""
    raw = json.loads(path.read_text()) if path.exists() else {}
    entry = raw.setdefault(key, {"samplers": {}})
    entry.pop("seeds", None)  # seeds are counted per sampler (cheap samplers run more)
    entry["samplers"].update(res)
    if every:
        entry["every_cell"] = every
    path.write_text(json.dumps(raw, indent=1))


def _cell(v: list[float]) -> str:
    return f"{np.median(v):.4f} [{np.percentile(v, 25):.4f}, {np.percentile(v, 75):.4f}]"


GOALS = {100: 0.97, 300: 0.995}


def _p_value(a: list[float], b: list[float]) -> float:
    """Two-sided Mann-Whitney U: whether two samplers' HVs over seeds differ at all."""
    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def _default_cell(hv: list[float], rivals: list[list[float]], goal: float) -> str:
    med = float(np.median(hv))
    ok = med >= goal and all(med > float(np.median(o)) for o in rivals)
    return _cell(hv) + (" ✔" if ok else " ✘")


def _rows(table: str, noise: str, res: dict, budgets: list[int], tally: dict) -> list[str]:
    lines = []
    for name, r in sorted(res.items(), key=lambda kv: kv[0] != "default"):
        cells, ps = [], []
        for b in budgets:
            hv = r["hv"][str(b)]
            if name == "default":
                rivals = [o["hv"][str(b)] for n, o in res.items() if n != name]
                cells.append(_default_cell(hv, rivals, GOALS.get(b, 0.0)))
                continue
            cells.append(_cell(hv))
            if "default" in res:
                mine = res["default"]["hv"][str(b)]
                p = _p_value(mine, hv)
                ps.append(f"{p:.3f}")
                side = "ahead" if np.median(mine) > np.median(hv) else "behind"
                tally["clean" if float(noise) == 0 else "noisy"][
                    side if p < 0.05 else "unresolved"] += 1
        reached = f"{np.median(r['reached']):.4f}" if r.get("reached") else ""
        lines.append(f"| {table} | {noise} | {name} | {len(r['hv'][str(budgets[0])])} | "
                     + " | ".join(cells) + f" | {reached} | {' / '.join(ps) or '-'} | "
                     f"{np.median(r['seconds']):.1f} |")
    return lines


def write(raw: dict, budgets: list[int], *, publish: bool = True) -> None:
    """The report table; ``publish`` puts it in BENCHMARKS' section (tuning runs only print)."""
    prov = provenance("cpu")
    at = " / ".join(f"@{b}" for b in budgets)
    lines = [
        "## Search quality: NB201 tables (15,625 cells), clean and noisy accuracy", "",
        "Commands: `python -m bench.search.quality --seeds 10` (every sampler; tables cpu, edge, "
        "params, 3obj; noise 0, 0.01, 0.03; the noisy tables rerun with "
        "`--noise 0.01,0.03` once repeats were answered from storage), then "
        "`python -m bench.search.quality --samplers default --seeds 30` (the default is "
        "cheap enough for 30 seeds)", "",
        "Hypervolume of the front picked from the observed values, scored at the true table "
        "values, as a share of the table's front (reference: accuracy 0, each cost's worst "
        "table value). Noise: Gaussian std on accuracy, drawn at an arch's first "
        "evaluation and returned again when it repeats, as a study's storage does "
        "(0.01 = 1 pt, the SE a "
        "precision-targeted analog score stores; 0.03 = 3 pt, a few-programming score). "
        "Median [p25, p75] over seeds; s/search is the median wall time of one "
        f"{max(budgets)}-evaluation search. Goal for `default`: HV >= 0.97 @100 and >= 0.995 "
        "@300, and above every other sampler (✔ met, ✘ not). p vs default: two-sided "
        f"Mann-Whitney U of that sampler's HVs against the default's ({at}); below 0.05 the "
        "seeds resolve the difference. Reached: the median HV when the same "
        f"{max(budgets)} archs are picked at their true values (what the search found; the gap "
        f"to HV@{max(budgets)} is what noise cost at the final pick), recorded from this "
        "version on.", "",
        "| table | noise | sampler | seeds | " + " | ".join(f"HV@{b}" for b in budgets)
        + " | reached | p vs default | s/search |",
        "|---|---|---|---|" + "---|" * len(budgets) + "---|---|---|"]
    tally = {k: {"ahead": 0, "behind": 0, "unresolved": 0} for k in ("clean", "noisy")}
    for key, entry in raw.items():
        table, noise = key.split("|")
        lines += _rows(table, noise, entry["samplers"], budgets, tally)
        if entry.get("every_cell"):
            lines.append(f"| {table} | {noise} | every cell once (reference) | "
                         f"{len(entry['every_cell'])} | "
                         + " | ".join(_cell(entry["every_cell"]) for _ in budgets) + " | | | |")
    lines += ["", "Default against each other sampler, per table and budget (p < 0.05 ahead / "
              "p < 0.05 behind / not resolved): " + "; ".join(
                  f"{k} {t['ahead']} / {t['behind']} / {t['unresolved']}"
                  for k, t in tally.items()) + ".",
              f"Device: {prov['device']} shared with other jobs (wall times are indicative); "
              "versions: " + ", ".join(f"{k} {v}" for k, v in prov["versions"].items()
                                       if k in ("python", "optuna", "torch", "numpy")),
              f"git {prov['git']}, {prov['time_utc']}."]
    text = "\n".join(lines)
    print(text)
    if publish:
        replace_section(OUT, "search_quality", text)  # the live SH comparison has its own section


if __name__ == "__main__":
    main()
