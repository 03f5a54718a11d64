"""Deployed-form latency: fp32 eager vs the int8 model (torchao x86 int8 PTQ through inductor)
for one mid-size architecture per space, timed side by side.

For each space, the eager fp32 model, the compiled fp32 model (the same inductor, no
quantization) and the int8 model are timed interleaved in one run (``hw_cost.compare``), so the
three share the host's load; the ratios to eager come with their p10-p90 over the rounds. The
whole comparison is repeated ``--repeats`` times (the spread over repeats is reported).

    OMP_NUM_THREADS=1 python -m bench.hw_cost.forms --threads 1 --seconds 6 --repeats 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import traceback
from pathlib import Path

from bench import RESULTS
from bench._results import publish

CANDIDATES = {
    "mbconv": "mb:hs-s16-k3e3c16d2-k5e4c24d2se-k3e4c40d3-k5e6c64d3se-k5e6c96d2se",
    "resnet": "rn:s24-d2r2c32-d2r2c64-d2r1c96-d1r2c128",
    "vit": "vit:p4-e192-d4-h4-m4",
    "nb201": None,  # the first arch of a seeded random draw
}
FORMS = {"fp32 eager": "eager", "fp32 compile": "compile", "int8": "int8"}


def arch_of(space: str) -> str:
    import random

    from search_spaces import get_space

    return CANDIDATES.get(space) or get_space(space).random_arch(random.Random(0))


def one_space(space: str, args: argparse.Namespace) -> list[dict]:
    from hw_cost import MeasureSpec
    from hw_cost.compare import compare_latency
    from search_spaces import get_space

    arch = arch_of(space)
    model = get_space(space).build(arch, in_chans=args.shape[0], num_classes=10,
                                   img_size=args.shape[1])
    runs = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        r = compare_latency({name: model for name in FORMS}, args.shape,
                            MeasureSpec(threads=args.threads), seconds=args.seconds, forms=FORMS)
        r["wall_s"] = time.perf_counter() - start
        runs.append(r)
        print(f"{space}: " + ", ".join(f"{n} {r['models'][n]['median_ms']:.3f} ms"
                                       for n in FORMS), flush=True)
    return runs


def rows(space: str, runs: list[dict]) -> list[str]:
    out = []
    for name in FORMS:
        med = [r["models"][name]["median_ms"] for r in runs]
        cv = statistics.median(r["models"][name]["cv"] for r in runs)
        if name == "fp32 eager":
            ratio = "1"
        else:
            rs = [r["ratios"][name] for r in runs]
            ratio = (f"{statistics.median(x['ratio'] for x in rs):.2f} "
                     f"({min(x['ratio_p10'] for x in rs):.2f}-"
                     f"{max(x['ratio_p90'] for x in rs):.2f})")
        out.append(f"| {space} | {name} | {statistics.median(med):.3f} | {min(med):.3f}-"
                   f"{max(med):.3f} | {cv:.1%} | {ratio} |")
    return out


def _where(err: Exception) -> str:
    """An error as its type, message and innermost frame (an assert there has no message)."""
    frame = traceback.extract_tb(err.__traceback__)[-1]
    path = "/".join(Path(frame.filename).parts[-3:])
    return f"{type(err).__name__} {err}".strip() + f" at `{path}:{frame.lineno}` ({frame.name})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spaces", nargs="+", default=["mbconv", "resnet", "vit", "nb201"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seconds", type=float, default=6.0, help="interleaved timing per repeat")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--input-shape", default="1,28,28")
    p.add_argument("--out", default=str(RESULTS / "hw_cost_forms.md"))
    args = p.parse_args()
    args.shape = tuple(int(d) for d in args.input_shape.split(","))

    from hwnas.common.provenance import cpu_model, versions

    load = os.getloadavg()[0]
    table = ["| space | form | median ms | min-max over repeats | CV within calls |"
             " ratio to fp32 eager (p10-p90 of rounds) |", "|---|---|---|---|---|---|"]
    archs, failed = [], []
    for space in args.spaces:
        archs.append(f"- {space}: `{arch_of(space)}`")
        try:
            table += rows(space, one_space(space, args))
        except Exception as err:  # noqa: BLE001 - a form that fails is a finding; the rest go on
            failed.append(f"- {space}: {_where(err)}")
    v = versions(("torch", "torchao"))
    text = "\n".join([
        "## hw_cost: deployed-form latency, fp32 vs int8", "",
        f"Command: `OMP_NUM_THREADS={args.threads} python -m bench.hw_cost.forms --threads "
        f"{args.threads} --seconds {args.seconds:g} --repeats {args.repeats}`", "",
        f"Device: {cpu_model()}, {args.threads} thread(s), batch 1, input {args.shape}; torch "
        f"{v.get('torch')}, torchao {v.get('torchao', '?')}. Load average (1 min) "
        f"before/after: {load:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
        "(shared machine: other jobs ran; the ratios are taken side by side, interleaved).", "",
        "int8: torchao `X86InductorQuantizer` PTQ (uint8 activations, int8 per-channel "
        "weights), lowered by inductor to oneDNN int8 kernels (`hwnas cost --form int8`). "
        "fp32 compile is the same inductor without quantization, to separate the two gains.",
        "", *table, "", "Architectures:", *archs, "",
        *(["Not timed (the comparison raised before any timing):", *failed, ""] if failed else [])])
    publish(text, args.out)


if __name__ == "__main__":
    main()
