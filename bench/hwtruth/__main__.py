"""The hardware truth: truth archs x hardware configurations, and what it shows.

    python -m bench.hwtruth work --hours 2            # grow the truth (resumable, CPU worker)
    python -m bench.hwtruth work --device cuda        # the same on a GPU window (docs/gpu.md)
    python -m bench.hwtruth report --seeds 10 --write  # shares, heuristics, front regret
    python -m bench.hwtruth hwa-work --hours 2         # the HWA truth (bench/hwtruth/hwa.py)
    python -m bench.hwtruth hwa-report --write         # HWA gains, reordering, front change

See bench/hwtruth/__init__.py for the unit of work and bench/hwtruth/report.py for the figures.
"""

from __future__ import annotations

import argparse

from bench.fidelity import truth
from bench.hwtruth import units
from bench.hwtruth.configs import ARCHS
from hwnas.common.devices import device_problem


def _start(args: argparse.Namespace) -> tuple[tuple[str, ...], float | None]:
    """The archs and seconds a worker has, on a device checked before any work."""
    problem = device_problem(args.device, "--device")
    if problem is not None:  # no CUDA here: a clear error before any work
        raise SystemExit(f"hwtruth: {problem}")
    truth.use_device(args.device)
    archs = tuple(args.archs.split(",")) if args.archs else ARCHS
    return archs, (args.hours * 3600 if args.hours else None)


def cmd_work(args: argparse.Namespace) -> None:
    archs, seconds = _start(args)
    done = units.work(units.plan(archs), threads=args.threads, stop_after=seconds)
    print(f"{done} units done; {sum(u.done() for u in units.plan(ARCHS))}/"
          f"{len(units.plan(ARCHS))} in the truth")


def cmd_hwa_work(args: argparse.Namespace) -> None:
    from bench.hwtruth import hwa

    archs, seconds = _start(args)
    done = hwa.work(hwa.plan(archs), threads=args.threads, stop_after=seconds)
    print(f"{done} units done; {sum(u.done() for u in hwa.plan(ARCHS))}/"
          f"{len(hwa.plan(ARCHS))} in the HWA truth")


def cmd_hwa_report(args: argparse.Namespace) -> None:
    from bench.hwtruth import hwa_report

    hwa_report.main(write=args.write)


def cmd_report(args: argparse.Namespace) -> None:
    from bench.hwtruth import report

    report.main(seeds=args.seeds, budget_archs=args.budget_archs, write=args.write)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.hwtruth", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    for name, text, func in (("work", "score missing units", cmd_work),
                             ("hwa-work", "HWA-train and score missing HWA truth units",
                              cmd_hwa_work)):
        w = sub.add_parser(name, help=text)
        w.add_argument("--hours", type=float, default=None)
        w.add_argument("--threads", type=int, default=1)
        w.add_argument("--device", default="cpu")
        w.add_argument("--archs", default="", help="comma-separated subset of the truth's archs")
        w.set_defaults(func=func)
    hr = sub.add_parser("hwa-report", help="the HWA truth's figures from the stored units")
    hr.add_argument("--write", action="store_true")
    hr.set_defaults(func=cmd_hwa_report)
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
