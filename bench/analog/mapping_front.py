"""Layer-wise mapping against all-analog: the fronts of two finished studies, side by side.

Both studies must share their objectives (e.g. ``studies/quickstart_mapping.yaml`` and the same
file with ``--set hw_eval.mapping={}``). Each front's hypervolume is taken against one common
reference point (the worse of the two studies' own points per objective), so the two figures
compare; every front member is listed with its mapping and its accuracy's standard error.

    hwnas run quickstart_mapping
    hwnas run quickstart_mapping --set name=quickstart_allanalog --set 'hw_eval.mapping={}'
    python -m bench.analog.mapping_front runs/quickstart_mapping runs/quickstart_allanalog
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from bench import RESULTS
from bench._results import markdown, publish
from hwnas.common.provenance import provenance
from nas.algorithms.pareto import hypervolume
from nas.results import summary
from nas.study import store

OUT = RESULTS / "mapping_front.md"


def _members(name: str, front: summary.Front) -> list[dict[str, object]]:
    rows = []
    for t, ok in zip(front.trials, front.resolved or [None] * len(front.trials), strict=True):
        info = t.user_attrs.get("info") or {}
        row: dict[str, object] = {"study": name, "trial": t.number, "arch": t.user_attrs["arch"],
                                  "mapping": info.get("mapping", "all analog")}
        for key, value in zip(front.keys, t.values, strict=True):
            se = t.user_attrs.get(f"{key}_se")
            row[key] = f"{value:.4g}" + (f" +- {se:.3f}" if se is not None else "")
        row["resolved"] = ok
        rows.append(row)
    return rows


def controlled(study_dir: str, archs: list[str]) -> list[dict[str, object]]:
    """Each arch scored under every mapping the study searched (same seed: same training), so
    the rows differ only by which layers are analog."""
    from itertools import product

    from nas.scoring.evaluate import Evaluator

    cfg = store.load_dir(study_dir)[0]
    mcfg = cfg.hw_eval.mapping_cfg
    key = cfg.objectives_resolved()[0].key
    rows = []
    for arch in archs:
        for ks in product(range(mcfg.max_k + 1), repeat=len(mcfg.search)):
            fixed = {**cfg.hw_eval.mapping, **dict(zip(mcfg.search, ks, strict=True)),
                     "search": []}
            he = cfg.hw_eval.model_copy(update={"mapping": fixed})
            out = Evaluator(cfg.model_copy(update={"hw_eval": he})).evaluate(arch)
            m = out.metrics
            rows.append({"arch": arch, "mapping": out.info.get("mapping"),
                         key: f"{m[key]:.4f} +- {m[key + '_se']:.4f}",
                         "analog_energy_uj": m["analog_energy_uj"],
                         "analog_mac_fraction": m["analog_mac_fraction"]})
            print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("studies", nargs=2, help="runs/<study> folders: mapped, then all-analog")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--controlled", type=int, default=0,
                    help="also score the mapped study's first N front archs under every mapping")
    args = ap.parse_args(argv)
    loaded = [(Path(d).name, *store.load_dir(d)[:2]) for d in args.studies]
    fronts = [(name, cfg, summary.front(cfg, study)) for name, cfg, study in loaded]
    keys = [f.keys for _, _, f in fronts]
    if keys[0] != keys[1]:
        raise SystemExit(f"the studies' objectives differ: {keys[0]} vs {keys[1]}; compare "
                         "studies with the same objectives")
    dirs = fronts[0][2].directions
    refs = np.array([f.reference for _, _, f in fronts])
    ref = [r.min() if d == "maximize" else r.max() for r, d in zip(refs.T, dirs, strict=True)]
    lines, rows = ["| study | complete | feasible | front | hypervolume (common ref) |",
                   "|---|---|---|---|---|"], []
    for name, _, f in fronts:
        values = np.array([t.values for t in f.trials]).reshape(len(f.trials), len(dirs))
        hv = hypervolume(values, dirs, ref) if len(values) else 0.0
        lines.append(f"| {name} | {f.n_complete} | {f.n_feasible} | {len(f.trials)} | {hv:.4g} |")
        rows += _members(name, f)
    extra = []
    if args.controlled:
        archs = [t.user_attrs["arch"] for t in fronts[0][2].trials[:args.controlled]]
        extra = ["Controlled: the same archs (same seed, same training) under every mapping:",
                 "", markdown(controlled(args.studies[0], archs)), ""]
    prov = provenance("cpu")
    argv_text = " ".join(sys.argv[1:] if argv is None else argv)
    publish("\n".join([
        "## Layer-wise mapping: searched against all-analog", "",
        f"`python -m bench.analog.mapping_front {argv_text}`", "",
        f"Objectives {', '.join(f'{k} ({d})' for k, d in zip(keys[0], dirs, strict=True))}; "
        f"common reference point {[round(float(r), 4) for r in ref]}.", "",
        *lines, "", markdown(rows), "", *extra,
        f"Device: {prov.get('device')}. `resolved`: the member's lead over its neighbours "
        "exceeds the standard errors (nas.algorithms.pareto.unresolved)."]), args.out)


if __name__ == "__main__":
    main()
