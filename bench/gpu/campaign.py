"""Every GPU figure in one command, in parts of at most 9 minutes (one 10-minute device call).

    python -m bench.gpu.campaign --part latency [--part roofline ...]   # on the GPU machine
    python -m bench.gpu.campaign --all
    python -m bench.gpu.campaign --device cpu --smoke --all --out /tmp/gpu-dry-run
    python -m bench.gpu.campaign --collect [--out bench/results/gpu]    # -> bench/results/gpu.md

Parts (``bench/gpu``): latency, predictors, roofline, analog, hwa, fit, ddp, study, supernet.
Each writes ``<out>/<part>.json`` (device, GPU clocks and driver, versions, command, precision,
figures, goals). ``--device cuda`` on a machine without CUDA is a clear error before any work.
``--smoke`` runs every part on tiny settings (the CPU timer for CUDA events, gloo for NCCL): the
dry run CI keeps from rotting. docs/gpu.md says what travels to the device machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from bench import RESULTS
from hwnas.common.devices import require_device
from hwnas.common.errors import HwnasError

ORDER = ("latency", "predictors", "roofline", "analog", "hwa", "fit", "ddp", "study",
         "supernet")
OUT = RESULTS / "gpu"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--part", action="append", choices=ORDER, help="a part (repeatable)")
    which.add_argument("--all", action="store_true", help="every part in turn")
    which.add_argument("--collect", action="store_true",
                       help="write bench/results/gpu.md from the results folder")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (the dry run)")
    p.add_argument("--smoke", action="store_true", help="tiny settings: seconds per part")
    p.add_argument("--out", type=Path, default=OUT, help=f"results folder (default {OUT})")
    p.add_argument("--budget", type=float, default=540.0, help="seconds per part (default 540)")
    p.add_argument("--data-root", default=None,
                   help="folder holding Fashion-MNIST's *-ubyte.gz where it is not installed")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def run_parts(args: argparse.Namespace) -> int:
    """Run the asked parts; a part that fails is recorded with its error and the rest go on."""
    from bench.gpu import analog_hw, latency, training  # noqa: F401  (register the parts)
    from bench.gpu.context import PARTS, Context, write_record

    failed = 0
    for name in ORDER if args.all else args.part:
        ctx = Context(device=args.device, smoke=args.smoke, out=args.out, seed=args.seed,
                      budget_s=args.budget, data_root=args.data_root)
        t0 = time.perf_counter()
        try:
            report, error = PARTS.get(name)(ctx), None
        except Exception as err:  # noqa: BLE001 - recorded in the part's file, the rest go on
            report, error = None, f"{type(err).__name__}: {err}"
        record = write_record(ctx, name, report, time.perf_counter() - t0, error)
        failed += error is not None
        met = [g["met"] for g in record["goals"]]
        print(f"{name}: {record['seconds']:.1f} s, goals met {sum(m is True for m in met)}/"
              f"{len(met)}{', ERROR ' + error if error else ''}", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.collect:
        from bench.collect import gpu_section

        target = OUT.parent / "gpu.md"
        target.write_text(gpu_section(args.out))
        print(f"wrote {target}")
        return 0
    try:
        require_device(args.device, "--device")  # before any import of the parts' heavy work
    except HwnasError as err:
        print(f"bench.gpu.campaign: error: {err}", file=sys.stderr)
        return 2
    return run_parts(args)


if __name__ == "__main__":
    sys.exit(main())
