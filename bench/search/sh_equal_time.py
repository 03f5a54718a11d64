"""Successive halving vs plain search on the quickstart at equal wall time, paired by seed.

Each seed runs two arms of ``studies/quickstart.yaml`` one after the other in this process,
with one training thread and a cold cost cache per arm:

* ``plain``: the quickstart without a schedule (every candidate trained at the full budget),
  stopped by ``timeout`` (``--seconds``);
* ``sh``: the same with ``schedule: {type: sh, eta: 3, resource: epochs, min_budget: 1/3,
  max_budget: 3}`` (rungs 1/3, 1 and 3 epochs, promotions continue their rung), given the plain
  arm's measured wall time as its ``timeout``, so both arms get the same wall time;
* ``prior``: a free rung 0 below one trained rung (``schedule: {type: sh, prior: synflow,
  eta: 3, min_budget: 3, max_budget: 3}``): every candidate gets its latency measured and its
  SynFlow score at initialisation, and the best third by (SynFlow, latency) is trained at the
  full budget; again the plain arm's wall time as its ``timeout``.

Each arm's front (feasible trials at the highest rung reached) is then scored at the full
budget with the shipped recipe and the run's seed (the truth); its latency stays what the arm
measured, and the hypervolume of the truth-scored front uses one reference (accuracy 0,
latency 5 ms, the quickstart's budget). The runs go to ``--json`` after each seed and the
results table to the marked block of ``--md``:

    OMP_NUM_THREADS=1 python -m bench.search.sh_equal_time --seconds 300 --seeds 0,1,2 \\
        --out-dir /tmp/sh_equal_time
    python -m bench.search.sh_equal_time --render   # only rewrite the table from --json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import optuna
import torch
from optuna.trial import FrozenTrial, TrialState

from bench import RESULTS, command_line
from bench._results import replace_section
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance
from nas.algorithms.pareto import hypervolume, pareto_mask
from nas.scoring.evaluate import Evaluator
from nas.search import optuna_driver
from nas.search.prior_rung import is_prior
from nas.search.schedule import highest_rung
from nas.study import store
from nas.study.files import load_study

STUDY = "quickstart"
SCHEDULE = {"type": "sh", "eta": 3, "resource": "epochs", "min_budget": 1 / 3, "max_budget": 3}
TOP_RUNG = 2  # rungs 1/3, 1 and 3 epochs: rung 2 is the full budget
PRIOR = {"type": "sh", "prior": "synflow", "eta": 3, "resource": "epochs", "min_budget": 3,
         "max_budget": 3}
# arm -> (schedule, the rung whose results are full-budget ones; None: every trial's)
ARMS: dict[str, tuple[dict[str, Any], int | None]] = {
    "plain": ({"type": "none"}, None), "sh": (SCHEDULE, TOP_RUNG), "prior": (PRIOR, 1)}
ONE_THREAD = {"train.threads": 1}  # the host is shared; one thread keeps arms comparable
DIRS = ["maximize", "minimize"]  # accuracy, latency
REFERENCE = [0.0, 5.0]  # accuracy 0, the quickstart's 5 ms latency budget
BLOCK = "sh_equal_time"  # the marked block of the results file this script rewrites
JSON_OUT = RESULTS / "sh_equal_time.json"
MD_OUT = RESULTS / "sh_equal_time.md"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=240.0, help="the plain arm's timeout")
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated; one paired run each")
    ap.add_argument("--out-dir", type=Path, default=Path(tempfile.gettempdir()) / BLOCK,
                    help="scratch folder for the studies and cost caches (a rerun resumes)")
    ap.add_argument("--json", type=Path, default=JSON_OUT, help="the result file")
    ap.add_argument("--md", type=Path, default=MD_OUT, help="the results markdown")
    ap.add_argument("--arms", default="plain,sh,prior",
                    help=f"comma-separated, from {', '.join(ARMS)}; plain runs first")
    ap.add_argument("--render", action="store_true", help="only rewrite --md from --json")
    args = ap.parse_args(argv)
    args.seeds = _seeds(args.seeds)
    args.arms = [a for a in args.arms.split(",") if a]
    if "plain" not in args.arms or not set(args.arms) <= set(ARMS):
        raise ConfigError.one("--arms", f"arms come from {list(ARMS)} and include plain (its "
                              "wall time is the others' timeout)", ",".join(args.arms),
                              "pass e.g. --arms plain,prior")
    if args.seconds <= 0:
        raise ConfigError.one("--seconds", "the plain arm's timeout must be positive",
                              args.seconds, "pass e.g. --seconds 240")
    return args


def _seeds(text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        raise ConfigError.one("--seeds", "seeds must be comma-separated integers", text,
                              "pass e.g. --seeds 0,1,2") from None


def front(pool: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """The non-dominated trials of ``pool`` by (accuracy up, latency down)."""
    if not pool:
        return []
    mask = pareto_mask(np.array([t.values for t in pool]).reshape(-1, 2), DIRS)
    return [t for t, keep in zip(pool, mask, strict=True) if keep]


def truth_hv(points: Sequence[tuple[float, float]]) -> float:
    """Hypervolume of (truth accuracy, latency ms) points against ``REFERENCE``; 0 if none."""
    if not points:
        return 0.0
    return float(hypervolume(np.array(points, dtype=float).reshape(-1, 2), DIRS, REFERENCE))


def _rung(t: FrozenTrial) -> int:
    return int(t.user_attrs.get("rung", 0))  # plain search's trials carry no rung


def summarise(name: str, seed: int, done: Sequence[FrozenTrial], wall: float) -> dict[str, Any]:
    """One arm's counts and front from its COMPLETE trials (a free rung 0 is counted as
    looked at, never as trained)."""
    looked = {t.user_attrs["arch"] for t in done if is_prior(t)}
    done = [t for t in done if not is_prior(t)]
    top_rung = ARMS[name][1]
    ok = [t for t in highest_rung(done) if t.user_attrs.get("feasible")]
    top = max((_rung(t) for t in ok), default=0)
    best = front([t for t in ok if _rung(t) == top])
    by_rung: dict[int, int] = {}
    for t in done:
        if t.user_attrs.get("feasible"):
            by_rung[_rung(t)] = by_rung.get(_rung(t), 0) + 1
    feasible = [t for t in done if t.user_attrs.get("feasible")]
    return {
        "arm": name, "seed": seed, "wall_s": wall, "evaluations": len(done),
        "candidates": len({t.user_attrs["arch"] for t in done} | looked),
        "rung0_free": len(looked),
        "trained": len({t.user_attrs["arch"] for t in feasible}),
        "train_s": sum(t.user_attrs.get("train_seconds", 0.0) for t in done),
        "feasible_by_rung": by_rung, "front_rung": top,
        "front": [t.user_attrs["arch"] for t in best],
        "front_acc": [t.values[0] for t in best],
        "latency": {t.user_attrs["arch"]: t.user_attrs["latency_ms"] for t in best},
        # Plain search, and the top rung, train an arch by the shipped recipe with the run's
        # seed (the top rung's weights equal plain training's:
        # tests/nas/scoring/test_sh_continuation), so these results are the truth already and
        # need no re-training.
        "full": {t.user_attrs["arch"]: t.values[0] for t in feasible
                 if top_rung is None or _rung(t) == top_rung},
    }


def run_arm(name: str, seed: int, seconds: float, scratch: Path) -> dict[str, Any]:
    """Run (or reopen, when its folder holds a finished study) one arm and summarise it."""
    over: dict[str, Any] = {"name": f"qs_{name}_{seed}", "seed": seed, "n_trials": 100000,
                            "timeout": seconds,
                            "latency.cache": str(scratch / f"costs_{name}_{seed}.db"),
                            **ONE_THREAD}
    over["schedule"] = ARMS[name][0]  # explicit, whatever the shipped study schedules
    cfg = load_study(STUDY, over)
    study_dir = store.prepare_dir(cfg, scratch)
    if (study_dir / "trials.parquet").exists():
        study = store.load_dir(study_dir)[1]
        wall = _trials_wall(study.get_trials(deepcopy=False))
    else:
        t0 = time.perf_counter()
        study = optuna_driver.run(cfg, study_dir, workers=1, progress=False)
        wall = time.perf_counter() - t0
    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    return summarise(name, seed, done, wall)


def _trials_wall(trials: Sequence[FrozenTrial]) -> float:
    """A finished study's wall time, first start to last completion (its process is gone)."""
    ts = [t for t in trials if t.datetime_complete and t.datetime_start]
    return (max(t.datetime_complete for t in ts) - min(t.datetime_start for t in ts)
            ).total_seconds()


def rescore(archs: Sequence[str], seed: int, cache: dict[tuple[str, int], float],
            scratch: Path) -> None:
    """Fill ``cache`` with each arch's accuracy at the full budget, training only the missing."""
    missing = [a for a in archs if (a, seed) not in cache]
    if not missing:
        return
    cfg = load_study(STUDY, {"seed": seed, **ONE_THREAD,
                             "latency.cache": str(scratch / "costs_rescore.db")})
    metric = cfg.objectives_resolved()[0].key  # the study's accuracy objective
    ev = Evaluator(cfg)
    ev.prepare()
    for a in missing:
        cache[(a, seed)] = ev.evaluate(a).metrics[metric]


def paired_run(seed: int, seconds: float, scratch: Path, cache: dict[tuple[str, int], float],
               names: Sequence[str] = tuple(ARMS)) -> list[dict[str, Any]]:
    """The arms under one seed (plain first: its wall time is the others' timeout), their
    fronts truth-scored."""
    plain = run_arm("plain", seed, seconds, scratch)
    arms = [plain, *(run_arm(n, seed, plain["wall_s"], scratch) for n in names if n != "plain")]
    t0 = time.perf_counter()
    for arm in arms:
        cache.update({(a, seed): v for a, v in arm["full"].items()})
    rescore(sorted({a for arm in arms for a in arm["front"]}), seed, cache, scratch)
    for arm in arms:
        arm["truth_acc"] = [cache[(a, seed)] for a in arm["front"]]
        arm["hv_truth"] = truth_hv([(cache[(a, seed)], arm["latency"][a]) for a in arm["front"]])
        arm["rescore_s"] = time.perf_counter() - t0
        arm["load"] = list(os.getloadavg())  # the host is shared: say how loaded it was
    return arms


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Every paired run, saved to ``args.json`` after each seed (a stopped run keeps its seeds)."""
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"command": command_line(), "seconds": args.seconds,
                              "schedule": SCHEDULE, "prior_schedule": PRIOR,
                              "reference": REFERENCE, "runs": []}
    cache: dict[tuple[str, int], float] = {}
    for seed in args.seeds:
        result["runs"] += paired_run(seed, args.seconds, args.out_dir, cache, args.arms)
        result["provenance"] = provenance("cpu")
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1) + "\n")
        print(json.dumps(result["runs"][-len(args.arms):]), flush=True)
    return result


HEAD = ["run (seed)", "arm", "wall s", "evaluations", "candidates (free rung 0)",
        "trained candidates",
        "feasible evaluations by rung", "training s", "front (rung)", "front acc as searched",
        "front acc, truth", "HV of truth-scored front"]


def _accs(values: Sequence[float]) -> str:
    return ", ".join(f"{v:.3f}" for v in values)


def _row(arm: dict[str, Any]) -> list[str]:
    by_rung = {int(k): v for k, v in arm["feasible_by_rung"].items()}  # JSON keys are strings
    if arm["arm"] == "plain":
        rungs, where = f"{sum(by_rung.values())} (full budget)", "(full budget)"
    elif arm["arm"] == "prior":
        rungs, where = f"{sum(by_rung.values())} (full budget)", "(full budget)"
    else:
        rungs = ", ".join(f"rung {r}: {n}" for r, n in sorted(by_rung.items()))
        where = f"(rung {arm['front_rung']})"
    archs = ", ".join(f"`{a}`" for a in arm["front"])
    free = f" ({arm['rung0_free']})" if arm.get("rung0_free") else ""
    return [str(arm["seed"]), arm["arm"], f"{arm['wall_s']:.0f}", str(arm["evaluations"]),
            f"{arm['candidates']}{free}", str(arm["trained"]), rungs, f"{arm['train_s']:.0f}",
            f"{archs} {where}", _accs(arm["front_acc"]), _accs(arm["truth_acc"]),
            f"{arm['hv_truth']:.3f}"]


def _pairs(runs: Sequence[dict[str, Any]],
           other: str = "sh") -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_seed: dict[int, dict[str, dict[str, Any]]] = {}
    for arm in runs:
        by_seed.setdefault(arm["seed"], {})[arm["arm"]] = arm
    return [(arms["plain"], arms[other]) for arms in by_seed.values()
            if "plain" in arms and other in arms]


NAMES = {"sh": "successive halving", "prior": "the free SynFlow rung 0"}


def _comparison(plain: dict[str, Any], arm: dict[str, Any]) -> str:
    ratio = f"{arm['trained'] / plain['trained']:.1f}x" if plain["trained"] else "no plain"
    looked = (f" (after looking at {arm['candidates']} for free)"
              if arm.get("rung0_free") else "")
    return (f"Run {plain['seed']}: {NAMES[arm['arm']]} trained {arm['trained']} candidates"
            f"{looked} against {plain['trained']} ({ratio}) and its truth-scored front has HV "
            f"{arm['hv_truth']:.3f} against {plain['hv_truth']:.3f}.")


def _rungs_reached(pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> str:
    top = max((sh["front_rung"] for _, sh in pairs), default=0)
    text = (f"In {len(pairs)} paired run(s), the highest rung any successive-halving arm "
            f"reached was {top} (the top rung is {TOP_RUNG})")
    if top < TOP_RUNG:
        return text + (": the short, loaded runs never trained a candidate to the full budget "
                       "through the rungs, so each of its fronts holds the highest rung reached "
                       "and is truth-scored by re-training those members.")
    return text + "."


def render(result: dict[str, Any]) -> str:
    """The results block: one table row per arm, a line per paired run, the rungs reached."""
    rows = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    rows += ["| " + " | ".join(_row(arm)) + " |" for arm in result["runs"]]
    pairs = _pairs(result["runs"])
    lines = [*rows, "", *(_comparison(p, a) for other in NAMES
                          for p, a in _pairs(result["runs"], other)),
             "", _rungs_reached(pairs), ""]
    if result.get("note"):
        lines.append(f"Source: `{result['command']}`; {result['note']}.")
    else:
        prov = result.get("provenance", {})
        lines.append(f"Command: `{result['command']}` on {prov.get('device', 'unknown device')}, "
                     f"git {prov.get('git', 'unknown')}, {prov.get('time_utc', '')}.")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.render:
        if not args.json.exists():
            raise ConfigError.one("--render", "the result file --json must exist",
                                  str(args.json), "run the measurement first or pass "
                                  "--json PATH")
        result = json.loads(args.json.read_text())
    else:
        result = measure(args)
    replace_section(args.md, BLOCK, render(result))
    print(f"wrote the {BLOCK} block of {args.md}")


if __name__ == "__main__":
    main()
