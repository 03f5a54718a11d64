"""`hwnas search`, `hwnas run`, `hwnas pareto`, `hwnas export`, `hwnas report`.

``hwnas run STUDY`` is the main job: search, then export the Pareto models, then the report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hwnas.common.errors import ConfigError
from nas.commands import log_level


def add_parser(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (("search", "run or resume a search study"),
                           ("run", "search, export the Pareto models, write the report")):
        p = sub.add_parser(name, help=helptext, description=helptext)
        _search_args(p)
        p.set_defaults(func=_search, export=name == "run", report=name == "run")
        if name == "search":
            p.add_argument("--export", action="store_true", help="export the front afterwards")
            p.add_argument("--report", action="store_true", help="write report.html afterwards")
    p = sub.add_parser("pareto", help="print a study's Pareto front and hypervolume")
    p.add_argument("study_dir", help="runs/<study>")
    p.add_argument("--robust", action="store_true",
                   help="keep only members that the stored SEs tell apart "
                        "(nas.algorithms.pareto.unresolved)")
    p.set_defaults(func=_pareto)
    p = sub.add_parser("export", help="export every Pareto model (checkpoint, card, and ONNX "
                                      "unless the study set export.onnx: false)")
    p.add_argument("study_dir", help="runs/<study>")
    p.add_argument("--top", type=int, help="at most this many models")
    onnx = p.add_mutually_exclusive_group()
    onnx.add_argument("--onnx", dest="onnx", action="store_true", default=None,
                      help="write and check ONNX even if the study set export.onnx: false")
    onnx.add_argument("--no-onnx", dest="onnx", action="store_false",
                      help="no ONNX, whatever the study set")
    p.set_defaults(func=_export)
    p = sub.add_parser("report", help="write runs/<study>/report.html with its figures")
    p.add_argument("study_dir", help="runs/<study>")
    p.set_defaults(func=_report)


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", help="a study name in studies/ (e.g. quickstart) or a YAML path")
    p.add_argument("--out", default="runs", help="folder for runs/<study> (default: runs)")
    p.add_argument("--workers", type=int, help="worker processes on this machine (optuna)")
    p.add_argument("--backend", choices=("optuna", "ray"))
    p.add_argument("--address", help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--cpus-per-trial", type=float)
    p.add_argument("--gpus-per-trial", type=float, help="fractions share a GPU, e.g. 0.25")
    p.add_argument("--max-concurrent", type=int, help="Ray trials at once")
    p.add_argument("--n-trials", type=int, help="complete trials wanted (earlier runs count)")
    p.add_argument("--timeout", type=float, help="seconds for this run")
    p.add_argument("--storage", help="RDB URL shared by workers (default sqlite in the run dir)")
    p.add_argument("--sampler", help="sampler name (default: the study's)")
    p.add_argument("--seed", type=int)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, dotted, value in YAML (repeatable), e.g. "
                        "--set train.epochs=2 --set sampler.name=random")
    p.add_argument("--check", action="store_true", help="validate and print the config only")
    # the modes of nas.search.progress, spelled here so `hwnas --help` need not import Optuna
    p.add_argument("--progress", choices=("auto", "bar", "lines", "off"), default="auto",
                   help="auto (default): a bar on a terminal, else one line per finished trial "
                        "(log files, cluster jobs, CI); -q turns it off")
    p.add_argument("--no-progress", dest="progress", action="store_const", const="off",
                   help="same as --progress off")


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``["train.epochs=2", "sampler.name=random"]`` -> dotted overrides, values read as YAML.

    A word that YAML 1.1 reads as a boolean (``off``, ``on``, ``yes``, ``no``) stays the word the
    user typed (``nas.study.yaml_values``): ``pareto.shrink=off`` is the enum value ``off``, and a
    boolean field still accepts it (pydantic reads ``off`` as False). Only ``true``/``false``
    become booleans here."""
    import yaml

    from nas.study.yaml_values import loads

    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError.one("--set", "must be KEY=VALUE with a dotted config key", item,
                                  "write e.g. --set train.epochs=2")
        try:
            value = loads(text)
        except yaml.YAMLError:
            value = text
        out[key.strip()] = value
    return out


def _overrides(args: argparse.Namespace) -> dict:
    """The flags that were given, then every ``--set`` (a config key named twice: --set wins)."""
    flags = {"workers": args.workers, "backend": args.backend, "ray.address": args.address,
             "ray.cpus_per_trial": args.cpus_per_trial, "ray.gpus_per_trial": args.gpus_per_trial,
             "ray.max_concurrent": args.max_concurrent, "n_trials": args.n_trials,
             "timeout": args.timeout, "storage": args.storage, "sampler.name": args.sampler,
             "seed": args.seed}
    return {**{k: v for k, v in flags.items() if v is not None}, **parse_sets(args.sets)}


def _search(args: argparse.Namespace) -> int:
    import yaml

    from nas.search.run import failure_summary, optuna_logs, run_search
    from nas.study import store
    from nas.study.files import load_study

    cfg = load_study(args.study, _overrides(args))
    if args.check:
        from nas.scoring.reach import reach_problems  # loads torch: only for --check

        print(yaml.safe_dump(cfg.dump(), sort_keys=False))
        problems = reach_problems(cfg)  # after the print: the config shows what was checked
        if problems:
            raise ConfigError(problems)
        return 0
    level = log_level(args.verbosity)
    with optuna_logs(level, tracebacks=args.verbosity > 0):
        study_dir = run_search(cfg, out_root=args.out,
                               progress=args.progress if args.verbosity >= 0 else "off")
    why = failure_summary(store.load_dir(study_dir)[1])
    if why:
        print(f"hwnas: study {cfg.name}: {why}\nstorage: {study_dir} (`hwnas search "
              f"{args.study} -v` shows each failure's traceback)", file=sys.stderr)
        return 1
    _print_front(study_dir)
    code = 0
    if args.export:
        code = _export(argparse.Namespace(study_dir=study_dir, top=None, onnx=None))
    if args.report:
        _report(argparse.Namespace(study_dir=study_dir))
    return code


def _print_front(study_dir: Path, *, robust: bool = False) -> None:
    from hwnas.common.errors import ConfigError
    from nas.results import summary
    from nas.study import store

    cfg, study, _ = store.load_dir(study_dir)
    front = summary.front(cfg, study)
    if robust and front.resolved is None:
        raise ConfigError.one(
            "pareto --robust", "needs a standard error for every noisy objective",
            f"no stored SE for {front.missing_se}", "re-run the study with this version (it "
            "stores <metric>_se with every accuracy), or drop --robust")
    members = [(t, ok) for t, ok in zip(front.trials, front.resolved or [None] * len(
        front.trials), strict=True) if ok or not robust]
    noisy = set(summary.noisy_keys(cfg))
    counts = (f"{front.n_feasible} feasible of {front.n_complete - front.n_free} trained, "
              f"{front.n_free} more looked at for free" if front.n_free else
              f"{front.n_feasible} feasible of {front.n_complete} complete")
    table = Table(title=f"{cfg.name}: {'robust ' if robust else ''}Pareto front "
                        f"({len(members)} models, {counts})")
    for col in ("trial", "arch", *front.keys, "resolved"):
        table.add_column(col, overflow="fold")
    for t, ok in members:
        cells = [_with_se(t, k, v, k in noisy) for k, v in zip(front.keys, t.values, strict=True)]
        table.add_row(str(t.number), t.user_attrs.get("arch", ""), *cells,
                      "?" if ok is None else ("yes" if ok else "~ no"))
    console = Console()
    console.print(table)
    if front.resolved is not None and not all(front.resolved):
        console.print("~ no: within 2 standard errors another trial is at least as good on every "
                      "objective; `hwnas pareto --robust` leaves these out")
    if front.picked_on is not None or front.shrink_note:  # pareto.shrink: say what picked it
        console.print(front.shrink_note or "front picked on the accuracies shrunk toward their "
                      f"trend on the rung-0 prior ({cfg.schedule.prior}; pareto.shrink: prior); "
                      "the values shown are the measured ones")
    if not front.n_feasible:
        budgets = "; ".join(f"{c.metric} in [{c.min}, {c.max}]" for c in cfg.constraints)
        console.print(f"no feasible trial yet (budgets: {budgets}); study in {study_dir}")
        return
    ref = ", ".join(f"{k}={v:.4g} ({src})" for k, v, src in zip(
        front.keys, front.reference, summary.reference_sources(cfg), strict=True))
    console.print(f"hypervolume {front.hypervolume:.6g} (reference point {ref}); "
                  f"study in {study_dir}")


def _with_se(trial, key: str, value: float, noisy: bool) -> str:  # noqa: ANN001 - FrozenTrial
    se = trial.user_attrs.get(f"{key}_se") if noisy else None
    return f"{value:.4g}" if se is None else f"{value:.4g} ± {se:.2g}"


def _pareto(args: argparse.Namespace) -> int:
    _print_front(Path(args.study_dir), robust=args.robust)
    return 0


def _export(args: argparse.Namespace) -> int:
    from nas.results.export_study import export_study

    rows = export_study(args.study_dir, top=args.top, onnx=args.onnx)
    if not rows:
        print(f"hwnas: nothing to export: {args.study_dir} has no feasible Pareto model yet "
              "(no trial completed within the budgets; see `hwnas pareto "
              f"{args.study_dir}`)", file=sys.stderr)
        return 1
    bad = [r for r in rows if r.get("onnx_ok") is False]
    print(f"exported {len(rows)} model(s) to {Path(args.study_dir) / 'pareto'}"
          + (f"; ONNX check FAILED for {len(bad)}" if bad else ""))
    return 1 if bad else 0


def _report(args: argparse.Namespace) -> int:
    from nas.results.report import write_report

    print(f"report: {write_report(args.study_dir)}")
    return 0
