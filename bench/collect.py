"""Rebuild BENCHMARKS.md from the sections the bench scripts write under bench/results/.

    python bench/collect.py
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent
ORDER = ("search_spaces", "train_loop", "fmnist_train", "hw_cost", "hw_cost_latency",
         "hw_cost_predictor", "hw_cost_roofline", "analog", "nas", "nas_search_quality",
         "nas_ray_overhead", "finalize")
HEADER = """# Benchmarks

Figures measured with the scripts under `bench/`; each section names its command, its device and
the machine's load while it ran. The device is a 2-vCPU virtual machine without a GPU (Intel Xeon
for the earlier sections, AMD EPYC for the fidelity, AdaBS drift and multi-node sections), except
where a section names a GPU: the fidelity truth set's largest archs and the supernets were trained
on one NVIDIA H100 (`--device cuda`).
Ratios within one run are the figures to compare across machines. This file is rebuilt from
`bench/results/*.md` by `python bench/collect.py`; plots and raw tables sit next to them.
"""


def collect() -> str:
    names = [*ORDER, *sorted(p.stem for p in (ROOT / "results").glob("*.md")
                             if p.stem not in ORDER)]
    parts = [(ROOT / "results" / f"{n}.md").read_text().strip() for n in names]
    return HEADER + "\n" + "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    out = ROOT.parent / "BENCHMARKS.md"
    out.write_text(collect())
    print(f"wrote {out}")
