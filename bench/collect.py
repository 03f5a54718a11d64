"""Rebuild BENCHMARKS.md from the sections the bench scripts write under bench/results/.

    python -m bench.collect
"""

from __future__ import annotations

import json
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
`bench/results/*.md` by `python -m bench.collect`; plots and raw tables sit next to them.
"""


def collect() -> str:
    names = [*ORDER, *sorted(p.stem for p in (ROOT / "results").glob("*.md")
                             if p.stem not in ORDER)]
    parts = [(ROOT / "results" / f"{n}.md").read_text().strip() for n in names]
    return HEADER + "\n" + "\n\n".join(parts) + "\n"


def _cell(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _rows_table(rows: list[dict]) -> list[str]:
    """A list of flat records as a markdown table (scalar columns only)."""
    cols = [k for k, v in rows[0].items() if isinstance(v, str | int | float | bool | None)]
    return [f"| {' | '.join(cols)} |", f"|{'---|' * len(cols)}",
            *(f"| {' | '.join(_cell(r.get(c)) for c in cols)} |" for r in rows)]


GPU_PARTS = ("latency", "predictors", "roofline", "analog", "hwa", "fit", "ddp", "study",
             "supernet")  # bench/gpu/campaign.py's order


def _flat(value: object, key: str, depth: int = 3) -> list[str]:
    """Scalars of nested dicts as ``- a.b.c: v`` lines (lists of records become tables)."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return ["", f"{key}:", "", *_rows_table(value), ""]
    if isinstance(value, dict) and depth > 0:
        return [line for k, v in value.items() for line in _flat(v, f"{key}.{k}", depth - 1)]
    return [] if isinstance(value, dict | list) else [f"- {key}: {_cell(value)}"]


def gpu_section(folder: str | Path) -> str:
    """The GPU campaign's section of BENCHMARKS.md from its results folder (one JSON per part,
    ``bench/gpu/campaign.py``): device, versions, commands, precision, goals, figures."""
    records = sorted((json.loads(p.read_text()) for p in Path(folder).glob("*.json")),
                     key=lambda r: (GPU_PARTS + (r["part"],)).index(r["part"]))
    if not records:
        return "## GPU campaign\n\nNo results yet: run `python -m bench.gpu.campaign --all`.\n"
    facts, vers = records[0]["facts"], records[0]["versions"]
    out = ["## GPU campaign", "",
           f"Device: {facts.get('device')} (driver {facts.get('driver', '-')}, clocks MHz "
           f"{facts.get('clocks_mhz', '-')}); torch {vers.get('torch')}, CUDA "
           f"{facts.get('cuda', '-')}, aihwkit {vers.get('aihwkit')}; git {records[0]['git']}"
           f"{'; SMOKE settings (dry run, not figures)' if records[0]['smoke'] else ''}.", "",
           "| part | goal | value | goal is | met | seconds |", "|---|---|---|---|---|---|"]
    for r in records:
        goals = r["goals"] or [{"name": r["error"] or "-", "value": None, "op": "", "limit": "",
                                "met": None}]
        out += [f"| {r['part']} | {g['name']} | {_cell(g['value'])} | {g['op']} {g['limit']} | "
                f"{g['met']} | {r['seconds']} |" for g in goals]
    for r in records:
        out += ["", f"### {r['part']}", "", f"`{r['command']}`", "",
                f"Precision: {r['precision']}" + (f"; error: {r['error']}" if r["error"] else "")]
        out += ["", *(line for k, v in r["results"].items() for line in _flat(v, k))]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    out = ROOT.parent / "BENCHMARKS.md"
    out.write_text(collect())
    print(f"wrote {out}")
