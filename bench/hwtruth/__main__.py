"""The hardware truth: truth archs x hardware configurations, and what it shows.

    python -m bench.hwtruth work --hours 2            # grow the truth (resumable, CPU worker)
    python -m bench.hwtruth work --device cuda        # the same on a GPU window (docs/gpu.md)
    python -m bench.hwtruth report --seeds 10 --write  # shares, heuristics, front regret

See bench/hwtruth/__init__.py for the unit of work and bench/hwtruth/report.py for the figures.
"""

from __future__ import annotations

import argparse

from bench.fidelity import truth
from bench.hwtruth import units
from bench.hwtruth.configs import ARCHS
from hwnas.common.devices import device_problem


def cmd_work(args: argparse.Namespace) -> None:
    problem = device_problem(args.device, "--device")
    if problem is not None:  # no CUDA here: a clear error before any work
        raise SystemExit(f"hwtruth: {problem}")
    truth.use_device(args.device)
    archs = tuple(args.archs.split(",")) if args.archs else ARCHS
    seconds = args.hours * 3600 if args.hours else None
    done = units.work(units.plan(archs), threads=args.threads, stop_after=seconds)
    print(f"{done} units done; {sum(u.done() for u in units.plan(ARCHS))}/"
          f"{len(units.plan(ARCHS))} in the truth")


def cmd_report(args: argparse.Namespace) -> None:
    from bench.hwtruth import report

    report.main(seeds=args.seeds, budget_archs=args.budget_archs, write=args.write)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hwtruth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("work", help="score missing units")
    w.add_argument("--hours", type=float, default=None)
    w.add_argument("--threads", type=int, default=1)
    w.add_argument("--device", default="cpu")
    w.add_argument("--archs", default="", help="comma-separated subset of the truth's archs")
    w.set_defaults(func=cmd_work)
    r = sub.add_parser("report", help="the truth's figures from the stored units")
    r.add_argument("--seeds", type=int, default=10)
    r.add_argument("--budget-archs", type=float, default=None,
                   help="each search's CPU budget, in median archs trained and scored "
                   "(default: a third of the truth's archs)")
    r.add_argument("--write", action="store_true")
    r.set_defaults(func=cmd_report)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
