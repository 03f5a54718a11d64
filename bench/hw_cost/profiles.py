"""Per-candidate profiles: where one mid-size candidate per space spends its time (CPU).

Runs what ``hwnas cost SPACE ARCH --profile`` runs (``hw_cost.profile_model``) on the eager
fp32 model and on the int8 model, and writes the top operators by self time with their share.

    OMP_NUM_THREADS=1 python -m bench.hw_cost.profiles --threads 1 --top 5
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from bench import RESULTS
from bench._results import publish
from bench.hw_cost.forms import arch_of


def section(space: str, form: str, args: argparse.Namespace, tmp: Path) -> list[str]:
    from hw_cost.profile import profile_model
    from search_spaces import get_space

    arch = arch_of(space)
    model = get_space(space).build(arch, in_chans=args.shape[0], num_classes=10,
                                   img_size=args.shape[1])
    r = profile_model(model, args.shape, trace=tmp / f"{space}_{form}.json", form=form,
                      threads=args.threads, calls=args.calls, top=args.top)
    lines = [f"### {space}, {form}: {r['total_self_ms']:.3f} ms self time per forward", "",
             "| operator | calls per forward | self ms per forward | share |", "|---|---|---|---|"]
    lines += [f"| `{row['operator']}` | {row['calls']:g} | {row['self_ms']:.4f} | "
              f"{row['share']:.1%} |" for row in r["operators"]]
    return [*lines, ""]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spaces", nargs="+", default=["mbconv", "resnet", "vit"])
    p.add_argument("--forms", nargs="+", default=["eager", "int8"])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--top", type=int, default=5)
    p.add_argument("--input-shape", default="1,28,28")
    p.add_argument("--out", default=str(RESULTS / "hw_cost_profile.md"))
    args = p.parse_args()
    args.shape = tuple(int(d) for d in args.input_shape.split(","))

    from hwnas.common.provenance import cpu_model, versions

    load = os.getloadavg()[0]
    body = []
    with tempfile.TemporaryDirectory() as tmp:
        for space in args.spaces:
            for form in args.forms:
                body += section(space, form, args, Path(tmp))
    text = "\n".join([
        "## hw_cost: per-candidate profiles (torch.profiler)", "",
        f"Command: `OMP_NUM_THREADS={args.threads} python -m bench.hw_cost.profiles --threads "
        f"{args.threads} --top {args.top}` (each section is what `hwnas cost SPACE ARCH "
        "--profile [--form int8]` prints; the Chrome trace is written next to it)", "",
        f"Device: {cpu_model()}, {args.threads} thread(s), batch 1, input {args.shape}, "
        f"{args.calls} forwards; torch {versions(('torch',))['torch']}. Load average (1 min) "
        f"before/after: {load:.2f} / {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores "
        "(shared machine: times are inflated by other jobs; shares are steadier).", "",
        *body])
    publish(text, args.out)


if __name__ == "__main__":
    main()
