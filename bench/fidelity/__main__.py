"""Fidelity: how well a scoring recipe ranks candidates, against a precise truth and across seeds.

    python -m bench.fidelity bands --sample 170               # latency bands of truth v2
    python -m bench.fidelity truth --workers 1 --hours 2      # grow the truth set (resumable)
    python -m bench.fidelity truth --workers 6 --device cuda  # the same on a GPU, 6 workers on it
    python -m bench.fidelity truth --device cuda --phases train --pack $OUT/truth.tar
                                       # a GPU without aihwkit trains; a CPU scores (docs/gpu.md)
    python -m bench.fidelity truth --add-also all              # pcm_static on older score units
    python -m bench.fidelity baselines --seeds 1,2             # free baselines per truth arch
    python -m bench.fidelity score --recipes all --seeds 1,2   # score the truth archs per recipe
    python -m bench.fidelity time --archs 3                    # s/candidate, every recipe, one run
    python -m bench.fidelity report                            # table + plot from the stored scores
    python -m bench.fidelity equal-cost --seeds 20             # the shipped screen at equal cost

``truth`` (bench/fidelity/truth.py) trains each truth architecture on the whole Fashion-MNIST
training split and scores it on ``pcm`` at 1 d and 30 d and on ``pcm_static`` at 1 d, with AdaBS
and 10 programmings (20 on the first set) on the whole test split; the set lives in
``bench/data/fidelity`` with its recipe. Score units from before ``pcm_static`` get its column
with ``--add-also`` where this machine holds their weights (the column is seeded on its own, so
it equals what the unit would have stored). ``score`` runs the
study evaluator (``nas.scoring.evaluate.Evaluator``) with each recipe
(bench/fidelity/recipes.py) on the
truth architectures, once per seed. ``report`` gives, per recipe: Kendall tau against the truth
(with a bootstrap interval over architectures), top-5 overlap, Kendall tau between two seeds,
and seconds per candidate, as a table and a tau-vs-cost plot.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from pathlib import Path

from bench.fidelity import truth, worker
from hwnas.common.devices import device_problem

ARCHS = truth.DATA / "archs.json"
DEFAULT_SPACES = "resnet:24,mbconv:12"
SPACES = ("resnet", "mbconv")  # the truth's spaces (truth.TAGS)
# The quickstart's 5 ms latency budget keeps resnet archs up to about this size (MACs at the
# reference 3x32x32 input): larger ones are never trained by such a study, and each costs hours
# of CPU to train for the truth.
MAX_MACS = {"resnet": 180e6, "mbconv": 60e6}


def truth_archs(spec: str) -> dict[str, list[str]]:
    """The truth architectures, chosen once and kept in archs.json (the set only grows)."""
    chosen = json.loads(ARCHS.read_text()) if ARCHS.is_file() else {}
    for item in spec.split(","):
        space, _, n = item.partition(":")
        have = chosen.get(space, [])
        if len(have) < int(n):
            fresh = truth.pick_archs(space, int(n), max_macs=MAX_MACS.get(space))
            chosen[space] = have + [a for a in fresh if a not in have][: int(n) - len(have)]
    ARCHS.parent.mkdir(parents=True, exist_ok=True)
    ARCHS.write_text(json.dumps(chosen, indent=1))
    return chosen


def _phases(text: str) -> tuple[str, ...] | None:
    if text == "all":
        return None
    names = tuple(n for n in text.split(",") if n)
    bad = [n for n in names if n not in truth.PHASES] or ([] if names else [text])
    if bad:
        raise SystemExit(f"truth --phases: unknown phase {bad[0]!r}; use a comma-separated "
                         f"subset of {','.join(truth.PHASES)} (or 'all')")
    return names


def cmd_truth(args: argparse.Namespace) -> None:
    if args.list:
        _list_ready(args)
        return
    if args.add_also:  # completes old records in this process; no unit is claimed
        import torch

        torch.set_num_threads(args.threads)
        wanted = None if args.add_also == "all" else args.add_also.split(",")
        done = truth.add_also(wanted)
        print(f"truth: the second hardware column added to {len(done)} units; "
              f"{truth.write_truth()}")
        return
    problem = device_problem(args.device, "--device")
    if problem is not None:  # no CUDA here: a clear error before any work
        raise SystemExit(f"truth: {problem}")
    phases = _phases(args.phases)
    spaces = truth_archs(args.spaces) if args.plan == "v1" else None
    seconds = None if args.hours is None else args.hours * 3600  # 0: take no unit
    # A file's mtime comes from the kernel's coarse clock, which can read a tick behind
    # time.time(): a unit finished at once would look older than the run and stay behind.
    start = time.time() - 1.0
    try:
        failed = _run_workers(args.workers, (spaces, args.threads, seconds, args.device, phases))
    finally:  # an interrupted run (Ctrl-C, a window's `timeout -s INT`) keeps what it finished
        if args.pack:  # first: on a device machine the archive is all that comes back
            packed = truth.pack(Path(args.pack), start)
            print(f"truth: packed {len(packed)} files into {args.pack}")
        print(f"truth: {truth.write_truth()}")
    if failed:  # the finished units are kept; the command still says the run went wrong
        raise SystemExit(f"truth: {failed} of {args.workers} workers failed (exit codes above)")


def _list_ready(args: argparse.Namespace) -> None:
    """What a run on ``--device`` would take now, in plan order, without claiming anything."""
    from collections import Counter

    from bench.fidelity import bands

    units = bands.plan_v2() if args.plan == "v2" else truth.plan(truth_archs(args.spaces))
    ready = [u for u in truth.with_phases(units, _phases(args.phases))
             if truth.takeable(u, args.device)]
    counts = Counter((u.space, u.phase) for u in ready)
    print(f"truth on {args.device}: {len(ready)} units ready now (of {len(units)} planned)")
    for (space, phase), n in counts.items():
        print(f"  {space} {phase}: {n}")
    for unit in ready[:10]:
        print(f"  next: {unit.stem}")


def _run_workers(n: int, work: tuple) -> int:
    """Run ``n`` truth workers (in this process when one); returns how many failed."""
    if n == 1:
        worker.run(*work)
        return 0
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=worker.run, args=work) for _ in range(n)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    return sum(p.exitcode != 0 for p in procs)


def cmd_bands(args: argparse.Namespace) -> None:
    from bench.fidelity import bands

    for space in args.spaces.split(","):
        measured = bands.measure(space, bands.candidates(space, args.sample))
        picked = bands.pick(space, measured)
        for name, archs in picked.items():
            print(f"{space} {name}: {len(archs)} archs")
        print(f"bands: {bands.write(space, picked, measured)}")


def cmd_baselines(args: argparse.Namespace) -> None:
    from bench.fidelity import baselines

    table = baselines.compute(args.space, _space_archs(args.space),
                              [int(s) for s in args.seeds.split(",")])
    print(f"baselines: {len(table)} rows in {baselines.BASELINES}")


def _banded(space: str) -> list[str]:
    from bench.fidelity import bands

    return bands.band_archs(space)


def _space_archs(space: str, spec: str = DEFAULT_SPACES) -> list[str]:
    """A space's truth archs: resnet's first set (archs.json) and its bands; mbconv's bands
    (its first set was never trained: truth v2 replaced it)."""
    first = truth_archs(spec).get(space, []) if space == "resnet" else []
    return list(dict.fromkeys(first + _banded(space)))


def cmd_front(args: argparse.Namespace) -> None:
    from bench import RESULTS
    from bench._results import markdown
    from bench.fidelity import front

    res = front.run(args.recipe, args.trials, args.seeds,
                    [int(x) for x in args.recipe_seeds.split(",")])
    (RESULTS / "fidelity_front.json").write_text(json.dumps(res))
    print(markdown(front.rows(res)))


def cmd_equal_cost(args: argparse.Namespace) -> None:
    from bench.fidelity import equal_cost

    res = equal_cost.run(args.recipe, args.seeds, [int(x) for x in args.recipe_seeds.split(",")],
                         latency_s=args.look_latency_s)
    print(equal_cost.markdown(res))


def cmd_score(args: argparse.Namespace) -> None:
    import pandas as pd

    from bench.fidelity import recipes

    names = list(recipes.RECIPES) if args.recipes == "all" else args.recipes.split(",")
    seeds = [int(s) for s in args.seeds.split(",")]
    archs = _space_archs(args.space, args.spaces)
    if args.max_latency:  # the search's pool: archs a study with that budget would train
        from bench.fidelity import bands

        lat = bands.measure(args.space, archs)
        archs = [a for a in archs if lat[a]["latency_ms"] <= args.max_latency]
    if args.with_truth:  # the ranking needs both sides: skip archs the truth does not hold yet
        path = truth.DATA / "truth.csv"
        held = set(pd.read_csv(path).arch) if path.is_file() else set()
        archs = [a for a in archs if a in held]
    if args.only:
        wanted = args.only.split(",")
        unknown = [a for a in wanted if a not in archs]
        if unknown:
            raise SystemExit(f"score --only: {unknown} are not truth archs (archs.json, "
                             "bands.json); pick from those")
        archs = [a for a in archs if a in wanted]
    recipes.score_all(archs[: args.archs], names, seeds, threads=args.threads)


def cmd_time(args: argparse.Namespace) -> None:
    from bench.fidelity import recipes

    archs = truth.by_cost("resnet", truth_archs(args.spaces).get("resnet", []))[: args.archs]
    names = ([*recipes.RECIPES, *recipes.TIMING_ONLY] if args.recipes == "all"
             else args.recipes.split(","))
    print(f"timing: {recipes.time_all(archs, names, threads=args.threads)}")


def cmd_crossdevice(args: argparse.Namespace) -> None:
    from bench.fidelity import crossdevice

    truth.use_device(args.device)
    out = crossdevice.run(args.only.split(","), threads=args.threads)
    for c in out["checks"]:
        print(f"{c['arch']}: {100 * c['acc_digital']:.2f} % on {c['device']} against "
              f"{100 * c['stored_acc_digital']:.2f} % on {c['stored_device']} "
              f"({c['gap_pt']:+.2f} pt; one seed's SD {out['seed_sd_pt']} pt)")
    print(crossdevice.OUT)


def cmd_report(args: argparse.Namespace) -> None:
    from bench.fidelity import report

    truth.write_truth()
    print(report.write(bootstrap=args.bootstrap))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.fidelity",
                                description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("truth", help="grow the truth set")
    t.add_argument("--spaces", default=DEFAULT_SPACES, help="space:count,...")
    t.add_argument("--workers", type=int, default=1)
    t.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    t.add_argument("--hours", type=float, default=None, help="stop taking units after this")
    t.add_argument("--device", default="cpu", help="cpu or cuda (recorded in each unit)")
    t.add_argument("--phases", default="all",
                   help=f"comma-separated subset of {','.join(truth.PHASES)} (default all)")
    t.add_argument("--pack", default=None,
                   help="tar archive of this run's unit records and weights (for a device call)")
    t.add_argument("--plan", choices=("v2", "v1"), default="v2",
                   help="v2: the latency bands of bands.json and the second seed; v1: --spaces")
    t.add_argument("--list", action="store_true",
                   help="print the units a run on --device would take now, and claim none")
    t.add_argument("--add-also", default=None, metavar="ARCHS",
                   help="score the second hardware column on finished score units that predate "
                        "it and whose weights are here (comma-separated archs, or 'all')")
    t.set_defaults(run=cmd_truth)
    b = sub.add_parser("bands", help="measure a sample's latency and pick truth v2's bands")
    b.add_argument("--spaces", default="resnet")
    b.add_argument("--sample", type=int, default=240, help="archs measured per space")
    b.set_defaults(run=cmd_bands)
    s = sub.add_parser("score", help="score the truth archs with each recipe")
    s.add_argument("--spaces", default=DEFAULT_SPACES)
    s.add_argument("--recipes", default="all")
    s.add_argument("--seeds", default="0,1")
    s.add_argument("--space", choices=SPACES, default="resnet", help="whose truth archs")
    s.add_argument("--archs", type=int, default=24, help="first N truth archs of the space")
    s.add_argument("--with-truth", action="store_true",
                   help="only archs truth.csv already holds")
    s.add_argument("--threads", type=int, default=1)
    s.add_argument("--max-latency", type=float, default=None,
                   help="only archs whose measured latency (bands.json setting) is below, ms")
    s.add_argument("--only", default=None,
                   help="comma-separated archs of the truth list to score (others skipped)")
    s.set_defaults(run=cmd_score)
    f = sub.add_parser("front", help="search fronts on the truth pool, scored at the truth")
    f.add_argument("--recipe", default="default")
    f.add_argument("--trials", type=int, default=10)
    f.add_argument("--seeds", type=int, default=10, help="search seeds")
    f.add_argument("--recipe-seeds", default="1,2", help="the recipe's scoring seeds used")
    f.set_defaults(run=cmd_front)
    e = sub.add_parser("equal-cost", help="the shipped screen against free fronts at equal wall "
                       "time and equal looks, costed from the stored seconds")
    e.add_argument("--recipe", default="e2_lean", help="the quickstart's training and score")
    e.add_argument("--seeds", type=int, default=20, help="search seeds")
    e.add_argument("--recipe-seeds", default="1,2", help="the recipe's scoring seeds used "
                   "(not 0: the truth's own seed)")
    e.add_argument("--look-latency-s", type=float, default=1.3,
                   help="seconds of a look's latency measurement (no stored record holds it)")
    e.set_defaults(run=cmd_equal_cost)
    z = sub.add_parser("baselines", help="params, MACs, latency, zero-cost proxies per arch")
    z.add_argument("--seeds", default="1,2", help="initialisation seeds of the proxies")
    z.add_argument("--space", choices=SPACES, default="resnet", help="whose truth archs")
    z.set_defaults(run=cmd_baselines)
    m = sub.add_parser("time", help="seconds per candidate of every recipe, in one run")
    m.add_argument("--spaces", default=DEFAULT_SPACES)
    m.add_argument("--recipes", default="all")
    m.add_argument("--archs", type=int, default=3, help="the N cheapest resnet truth archs")
    m.add_argument("--threads", type=int, default=1)
    m.set_defaults(run=cmd_time)
    x = sub.add_parser("crossdevice", help="retrain truth archs here that the other kind of "
                       "device trained, beside their records")
    x.add_argument("--only", required=True, help="comma-separated truth archs")
    x.add_argument("--device", default="cpu", help="cpu or cuda: where they are retrained")
    x.add_argument("--threads", type=int, default=1)
    x.set_defaults(run=cmd_crossdevice)
    r = sub.add_parser("report", help="table and plot from the stored scores")
    r.add_argument("--bootstrap", type=int, default=2000)
    r.set_defaults(run=cmd_report)
    return p.parse_args(argv)


if __name__ == "__main__":
    args = parse()
    args.run(args)
