"""The quickstart scored on ``pcm`` (idealised periphery) against ``pcm_static`` (HERMES-like).

Two runs of ``hwnas run <study>`` with the same seed: one with every analog accuracy objective
moved to ``--baseline`` (``pcm``, by ``--set objectives=...``), one as shipped (``pcm_static``).
Both draw the same first arch; later draws follow earlier results, so they can part. An arch
both runs train gets the same training (the paired table shows ``acc_digital`` of each), so its
two scores differ by the accuracy model alone. Both use one cost cache file, but its key holds
the hardware model, so each run times its own archs: on a busy host the latency budget can admit
an arch in one run and reject it in the other. The result file holds both runs' trials, fronts
and timings; the markdown is rendered from it.

``run`` starts the two runs one after the other (an idle host), timing each child process (wall
clock, CPU seconds, load average at start and end). ``compare`` reads two finished run folders
with the ``/usr/bin/time -v`` log of each (runs started by hand, e.g. side by side on a busy
host) and an optional load log (lines ``HH:MM:SS load1 load5 load15``):

    OMP_NUM_THREADS=1 python -m bench.analog.default_switch run --out-dir /tmp/default_switch
    python -m bench.analog.default_switch compare RUNS/pcm/quickstart RUNS/static/quickstart \
        --time-logs pcm.err static.err --load-log load.log
    python -m bench.analog.default_switch render   # only rewrite --md from --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench import RESULTS, command_line
from bench._results import markdown, publish
from hwnas.common.errors import ConfigError
from hwnas.common.provenance import provenance

JSON_OUT = RESULTS / "default_switch.json"
MD_OUT = RESULTS / "default_switch.md"


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, default=JSON_OUT)
    ap.add_argument("--md", type=Path, default=MD_OUT)
    sub = ap.add_subparsers(dest="mode", required=True)
    run = sub.add_parser("run", help="run both studies one after the other, then compare")
    run.add_argument("--study", default="quickstart", help="study name or YAML path")
    run.add_argument("--baseline", default="pcm", help="hardware model of the baseline run")
    run.add_argument("--out-dir", type=Path, default=Path("/tmp/default_switch"))
    run.add_argument("--cache", type=Path, default=None,
                     help="cost cache file of both runs (default: <out-dir>/costs.db)")
    cmp = sub.add_parser("compare", help="compare two finished run folders")
    cmp.add_argument("studies", nargs=2, type=Path,
                     help="runs/<study> folders: the baseline run, then the shipped one")
    cmp.add_argument("--time-logs", nargs=2, type=Path, default=None,
                     help="the /usr/bin/time -v output of each run, in the same order")
    cmp.add_argument("--load-log", type=Path, default=None,
                     help="load samples taken during the runs: HH:MM:SS load1 load5 load15")
    sub.add_parser("render", help="only rewrite --md from --json")
    return ap.parse_args(argv)


def baseline_objectives(study: str, hw: str) -> list[dict[str, Any]]:
    """The study's objectives with every analog accuracy moved to ``hw``."""
    from analog import get_hw
    from nas.study.files import load_study

    out = []
    for o in load_study(study).objectives:
        item = o.model_dump(exclude_none=True)
        if item.get("hw") and get_hw(item["hw"]).kind == "analog":
            item["hw"] = hw
        out.append(item)
    return out


def run_study(study: str, out: Path, cache: Path, sets: Sequence[str]) -> dict[str, Any]:
    """One ``hwnas run`` in a child process: its timing, load and exit status."""
    cmd = [sys.executable, "-m", "nas.cli", "run", study, "--out", str(out), "--progress",
           "lines", *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "HWNAS_CACHE": str(cache)}
    before, load0, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg(), \
        time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "run.log", "w") as log:
        rc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"command": " ".join(["hwnas", *cmd[3:]]), "rc": rc, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "load_start": [round(x, 2) for x in load0],
            "load_end": [round(x, 2) for x in os.getloadavg()]}


def _clock(moment: Any) -> str | None:
    return moment.strftime("%H:%M:%S") if moment is not None else None


def trial_rows(study_dir: Path) -> tuple[list[dict[str, Any]], list[int], str]:
    """Every trial of a finished study (arch, state, scores, seconds), the front's trial
    numbers (resolved or not) and the accuracy key."""
    from nas.results import summary
    from nas.search.progress import seconds_split
    from nas.study import store

    cfg, study, _ = store.load_dir(study_dir)
    key = cfg.objectives_resolved()[0].key
    rows = []
    for t in study.get_trials(deepcopy=False):
        a, info = t.user_attrs, t.user_attrs.get("info") or {}
        rows.append({"trial": t.number, "state": t.state.name, "arch": a.get("arch"),
                     "trained": key in a, "feasible": a.get("feasible"),
                     "cached_cost": info.get("cached"), "acc": a.get(key),
                     "se": a.get(f"{key}_se"), "programmings": a.get(f"{key}_repeats"),
                     "images": a.get(f"{key}_images"), "acc_digital": a.get("acc_digital"),
                     "latency_ms": a.get("latency_ms"),
                     "energy_uj": a.get("analog_energy_uj"), "tile": a.get("analog_tile_size"),
                     "cost_hw": info.get("analog_cost_hw"), **seconds_split(t),
                     "start": _clock(t.datetime_start), "end": _clock(t.datetime_complete)})
    front = summary.front(cfg, study)
    resolved = front.resolved or [None] * len(front.trials)
    members = [{"trial": t.number, "resolved": r} for t, r in zip(front.trials, resolved,
                                                                   strict=True)]
    return rows, members, key


def measure(args: argparse.Namespace) -> dict[str, Any]:
    cache = args.cache or args.out_dir / "costs.db"
    objectives = baseline_objectives(args.study, args.baseline)
    arms = [(args.baseline, [f"objectives={json.dumps(objectives)}"]), ("shipped", [])]
    result: dict[str, Any] = {"command": command_line(), "provenance": provenance("cpu"),
                              "runs": {}}
    for label, sets in arms:
        out = args.out_dir / label
        timing = run_study(args.study, out, cache, sets)
        print(label, timing, flush=True)
        rows, front, key = trial_rows(out / Path(args.study).stem)
        result["runs"][label] = {**timing, "key": key, "trials": rows, "front": front}
    return result


def time_log(path: Path) -> dict[str, Any]:
    """Wall, CPU seconds and exit status from a ``/usr/bin/time -v`` log."""
    fields = dict(line.strip().split(": ", 1) for line in path.read_text().splitlines()
                  if ": " in line and line.startswith("\t"))
    clock = [float(x) for x in fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"].split(":")]
    wall = sum(v * 60 ** i for i, v in enumerate(reversed(clock)))
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    command = fields["Command being timed"].strip('"')
    if " -m nas.cli " in command:  # the console script's module, spelled as typed
        command = "hwnas " + command.split(" -m nas.cli ", 1)[1]
    return {"wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "rc": int(fields["Exit status"]),
            "command": command}


def load_during(path: Path, trials: list[dict[str, Any]]) -> dict[str, Any]:
    """1-minute load samples between the run's first trial start and last trial end (UTC)."""
    start = min(r["start"] for r in trials if r["start"])
    end = max(r["end"] for r in trials if r["end"])
    samples = [float(line.split()[1]) for line in path.read_text().splitlines()
               if len(line.split()) == 4 and start <= line.split()[0] <= end]
    if not samples:
        return {}
    return {"load_start": [samples[0]], "load_end": [samples[-1]],
            "load_median": sorted(samples)[len(samples) // 2], "load_max": max(samples),
            "load_samples": len(samples)}


def compare(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"command": command_line(), "provenance": provenance("cpu"),
                              "runs": {}}
    logs = args.time_logs or [None, None]
    for i, (folder, log) in enumerate(zip(args.studies, logs, strict=True)):
        rows, front, key = trial_rows(folder)
        key = f"{key} ({i + 1})" if key in result["runs"] else key
        run = {"key": key, "trials": rows, "front": front, "folder": str(folder)}
        if log is not None:
            run.update(time_log(log))
        if args.load_log is not None:
            run.update(load_during(args.load_log, rows))
        result["runs"][key] = run
    return result


def _seconds(rows: list[dict[str, Any]], part: str) -> float:
    return sum(r.get(part, 0.0) for r in rows)


def _load(run: dict[str, Any]) -> str:
    if "load_start" not in run:
        return ""
    text = f"{run['load_start'][0]} / {run['load_end'][0]}"
    if "load_median" in run:
        text += f" (median {run['load_median']}, max {run['load_max']})"
    return text


def _run_row(label: str, run: dict[str, Any]) -> dict[str, object]:
    rows = run["trials"]
    trained = [r for r in rows if r["trained"]]
    return {"run": label, "wall": f"{run['wall_s'] / 60:.1f} min" if "wall_s" in run else "",
            "CPU s": f"{run['cpu_s']:.0f}" if "cpu_s" in run else "",
            "load 1-min start / end": _load(run),
            "trials complete": sum(r["state"] == "COMPLETE" for r in rows),
            "trained and scored": len(trained),
            "cost cached": sum(bool(r["cached_cost"]) for r in rows),
            "s cost / train / score (sums)": " / ".join(f"{_seconds(rows, p):.0f}"
                                                        for p in ("cost", "train", "score")),
            "s score per trained trial": " ".join(f"{r.get('score', 0):.0f}" for r in trained),
            "front": len(run["front"])}


def _pct(acc: float | None, se: float | None) -> str:
    """A percentage, with its SE unless ``se`` is 0."""
    if acc is None:
        return ""
    return f"{100 * acc:.1f}" + (f" ± {100 * (se or 0):.1f}" if se != 0 else "")


def _count(*values: float | None) -> str:
    return " / ".join("" if v is None else f"{v:.0f}" for v in values)


def _front_rows(label: str, run: dict[str, Any]) -> list[dict[str, object]]:
    by_trial = {r["trial"]: r for r in run["trials"]}
    out = []
    for m in run["front"]:
        r = by_trial[m["trial"]]
        out.append({"run": label, "trial": r["trial"], "arch": r["arch"],
                    "accuracy %": _pct(r["acc"], r["se"]),
                    "programmings / images": _count(r["programmings"], r["images"]),
                    "digital %": _pct(r["acc_digital"], 0),
                    "latency ms": r["latency_ms"], "energy uJ (tile)":
                    f"{r['energy_uj']:.3g} ({r['tile']:.0f})" if r["energy_uj"] else "",
                    "resolved": m["resolved"]})
    return out


def paired(base: dict[str, Any], new: dict[str, Any]) -> list[dict[str, object]]:
    """Archs both runs trained: the same training (digital accuracy), two accuracy models."""
    first = {r["arch"]: r for r in base["trials"] if r["trained"]}
    rows = []
    for r in new["trials"]:
        b = first.get(r["arch"])
        if not r["trained"] or b is None:
            continue
        diff, se = r["acc"] - b["acc"], ((r["se"] or 0) ** 2 + (b["se"] or 0) ** 2) ** 0.5
        rows.append({"arch": r["arch"], "digital % (base / new)":
                     f"{_pct(b['acc_digital'], 0)} / {_pct(r['acc_digital'], 0)}",
                     f"{base['key']} %": _pct(b["acc"], b["se"]),
                     f"{new['key']} %": _pct(r["acc"], r["se"]),
                     "new - base (pt)": f"{100 * diff:+.1f} ± {100 * se:.1f}",
                     "latency ms": r["latency_ms"]})
    return rows


def render(result: dict[str, Any]) -> str:
    runs = result["runs"]
    (bl, base), (nl, new) = list(runs.items())
    fronts = [{r["arch"] for r in run["trials"] if r["trial"] in {m["trial"] for m in
                                                                    run["front"]}}
              for run in (base, new)]
    prov = result["provenance"]
    pairs = paired(base, new)
    return "\n".join([
        "## Scored hardware model of the quickstart: pcm against pcm_static", "",
        f"`{result['command']}`", "",
        *[f"- {label}: `{run['command']}` (exit {run['rc']})" for label, run in runs.items()
          if "command" in run], "",
        markdown([_run_row(label, run) for label, run in runs.items()]), "",
        "Fronts (accuracy mean ± SE over programmings; `resolved`: no other trial is within the "
        "noise at least as good):", "",
        markdown(_front_rows(bl, base) + _front_rows(nl, new)), "",
        f"On both fronts: {sorted(fronts[0] & fronts[1]) or 'none'}; only {bl}: "
        f"{sorted(fronts[0] - fronts[1]) or 'none'}; only {nl}: "
        f"{sorted(fronts[1] - fronts[0]) or 'none'}.", "",
        "Archs both runs trained (same seed: the same training, digital accuracy shows it):", "",
        markdown(pairs) if pairs else "none", "",
        f"Device: {prov.get('device')}; git {prov.get('git')}; versions "
        f"{', '.join(f'{k} {v}' for k, v in prov.get('versions', {}).items())}."])


def main(argv: Sequence[str] | None = None) -> None:
    args = parse(argv)
    if args.mode == "render":
        if not args.json.is_file():
            raise ConfigError.one("render", "the result file --json must exist",
                                  str(args.json), "run `run` or `compare` first")
        result = json.loads(args.json.read_text())
    else:
        result = measure(args) if args.mode == "run" else compare(args)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    publish(render(result), args.md)


if __name__ == "__main__":
    main()
