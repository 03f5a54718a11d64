"""Per-trial overhead of the Ray Tune driver against the Optuna driver, in the same run.

Both drivers run the ``nb201_table`` study (a table look-up per trial, so the evaluation costs
nothing and the wall time per trial *is* the driver's overhead), one trial at a time
(``ray.max_concurrent=1``), into a fresh folder and storage each repeat. Ray's start-up
(``ray.init`` of a local instance) is timed separately and subtracted. Results go to
``bench/results/nas_ray_overhead.md``.

    python -m bench.ray.overhead --trials 20 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from bench import RESULTS
from bench._results import publish
from hwnas.common.provenance import provenance
from nas.search.run import run_search
from nas.study.files import load_study

OUT = RESULTS / "nas_ray_overhead.md"


def _time_run(backend: str, trials: int) -> float:
    cfg = load_study("nb201_table", {"n_trials": trials, "backend": backend,
                                     "ray.max_concurrent": 1})
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        run_search(cfg, out_root=tmp, progress=False)
        return time.perf_counter() - t0


def _ray_startup() -> float:
    import ray

    t0 = time.perf_counter()
    ray.init(include_dashboard=False, log_to_driver=False)
    ray.shutdown()
    return time.perf_counter() - t0


def _stats(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    per_trial: dict[str, list[float]] = {"optuna": [], "ray": []}
    startup: list[float] = []
    for _ in range(args.repeats):  # interleaved, so both see the same machine load
        per_trial["optuna"].append(_time_run("optuna", args.trials) / args.trials)
        startup.append(_ray_startup())
        per_trial["ray"].append((_time_run("ray", args.trials) - startup[-1]) / args.trials)
        print({k: round(v[-1], 3) for k, v in per_trial.items()}, f"ray start {startup[-1]:.1f} s",
              flush=True)
    ratio = statistics.median(per_trial["ray"]) / statistics.median(per_trial["optuna"])
    prov = provenance("cpu")
    lines = [
        "## Driver overhead per trial: Ray Tune vs Optuna (nb201_table, table look-ups)", "",
        f"Command: `python -m bench.ray.overhead --trials {args.trials} --repeats "
        f"{args.repeats}`", "",
        "| driver | seconds per trial, median [min, max] |", "|---|---|",
        f"| optuna (SQLite, 1 process) | {_stats(per_trial['optuna'])} |",
        f"| ray (local, 1 trial at a time, start-up excluded) | {_stats(per_trial['ray'])} |",
        f"| ray start-up (`ray.init` + shutdown) | {_stats(startup)} s once per command |", "",
        f"Ray / Optuna per-trial overhead: {ratio:.1f}x. Device: {prov['device']}; ray "
        f"{prov['versions'].get('ray')}, optuna {prov['versions'].get('optuna')}; "
        f"git {prov['git']}, {prov['time_utc']}."]
    publish("\n".join(lines), OUT)


if __name__ == "__main__":
    main()
