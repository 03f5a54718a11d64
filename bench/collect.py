"""Rebuild BENCHMARKS.md from the result files the bench scripts write under bench/results/.

    python -m bench.collect            # write BENCHMARKS.md
    python -m bench.collect --check    # exit 1 if BENCHMARKS.md differs from what it would write

The sections, their order and the commands each must name are listed in ``bench/sections.py``;
a result file that is not listed there, or a section that does not name its commands, is an
error, so no section of BENCHMARKS.md is written by hand.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

from bench import RESULTS, ROOT
from bench.sections import SECTIONS, Section
from hwnas.common.errors import ConfigError

TARGET = ROOT / "BENCHMARKS.md"
HEADER = """# Benchmarks

Figures measured with the scripts under `bench/`; each section names its command, its device and
the machine's load while it ran. The device is a 2-vCPU virtual machine without a GPU (Intel Xeon
for the earlier sections, AMD EPYC for the fidelity, AdaBS drift and multi-node sections), except
where a section names a GPU: the fidelity truth set's largest archs and the supernets were trained
on one NVIDIA H100 (`--device cuda`).
Ratios within one run are the figures to compare across machines. This file is rebuilt from
`bench/results/*.md` by `python -m bench.collect`; plots and raw tables sit next to them.
"""


def _check_files(folder: Path, sections: tuple[Section, ...]) -> None:
    """Every result file has a section and every section its file (all problems at once)."""
    listed = {s.name for s in sections}
    found = {p.stem for p in folder.glob("*.md")}
    listed -= {s.name for s in sections if s.optional and s.name not in found}
    problems = [ConfigError.one(f"{folder}/{n}.md", "every result file must have a section",
                                n, "add a Section for it to bench/sections.py").problems[0]
                for n in sorted(found - listed)]
    problems += [ConfigError.one(f"bench/sections.py: {n}", "a section's result file must exist",
                                 f"{folder}/{n}.md", "run the section's command, or drop the "
                                 "section").problems[0] for n in sorted(listed - found)]
    if problems:
        raise ConfigError(problems)


def _reading(folder: Path, s: Section) -> str:
    """The section's reading, kept apart so that rerunning its script does not overwrite it."""
    path = folder / "readings" / f"{s.name}.md"
    if not path.is_file():
        raise ConfigError.one(f"bench/sections.py: {s.name}", "a section's reading must exist",
                              str(path), "write the reading there, or set reading=False")
    return "\n\n" + _rebased(path.read_text().strip(), path.parent)


# a markdown link or image whose target is a relative path (no scheme, anchor or root)
LINK = re.compile(r"(!?\[[^\]]*\]\()(?![a-z]+:|#|/)([^)\s]+)(\))")


def _rebased(text: str, folder: Path) -> str:
    """``text``'s relative links, written from ``folder``, made relative to the repository root,
    where BENCHMARKS.md lives (a result file's plot would otherwise be a broken image there)."""
    return LINK.sub(lambda m: m[1] + os.path.relpath(folder / m[2], ROOT) + m[3], text)


def _section(folder: Path, s: Section) -> str:
    """A result file's text, checked to name its commands, with a line saying where it lives."""
    text = _rebased((folder / f"{s.name}.md").read_text().strip(), folder)
    missing = [c for c in s.commands if c not in text]
    if missing:
        raise ConfigError.one(f"{folder}/{s.name}.md", "a section must name its commands",
                              missing, "rerun the command (its script names it) or correct "
                              "the section's commands in bench/sections.py")
    where = f"*Result file: `bench/results/{s.name}.md`"
    if s.reading:
        return (f"{text}{_reading(folder, s)}\n\n{where}, written by the commands above; the "
                f"reading under it: `bench/results/readings/{s.name}.md`.*")
    if not s.kept:
        return f"{text}\n\n{where}, written by the commands above.*"
    return f"{text}\n\n{where}, from the commands above; kept as recorded: {s.kept}.*"


def collect(folder: Path = RESULTS, sections: tuple[Section, ...] = SECTIONS) -> str:
    """BENCHMARKS.md's text: the header, then every section in ``sections``' order."""
    _check_files(folder, sections)
    present = [s for s in sections if not s.optional or (folder / f"{s.name}.md").is_file()]
    return HEADER + "\n" + "\n\n".join(_section(folder, s) for s in present) + "\n"


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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.collect", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="exit 1, writing nothing, if BENCHMARKS.md differs from the result files")
    args = p.parse_args(argv)
    try:
        text = collect()
    except ConfigError as err:
        print(f"bench.collect: error: {err}", file=sys.stderr)
        return 2
    if args.check:
        same = TARGET.is_file() and TARGET.read_text() == text
        print(f"{TARGET} {'is' if same else 'is NOT'} what bench/collect.py writes")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
