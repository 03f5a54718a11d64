"""Supernet fidelity and cost: how well inherited weights rank architectures, and how cheaply.

For each supernet checkpoint given (a digital one and an analog-aware ``--hwa`` one), every
architecture is extracted, its BatchNorm statistics re-estimated on ``--bn-images`` training
images, and scored digitally and on ``--hw`` at ``--times`` (``--repeats`` programmings,
``--eval-limit`` validation images; AdaBS when ``analog.evaluate`` offers it). The ranking is
compared with a yardstick by Kendall tau (bootstrap 90% interval over architectures) and top-5
overlap:

* the fidelity truth set ``bench/data/fidelity/truth.csv`` (long-trained, many programmings) for
  its architectures of ``--space``, when it exists;
* otherwise each architecture trained standalone with the quickstart recipe (1 epoch on the
  study's 5,000 images) and scored the same way: a *short-trained* yardstick, labelled so.

Seconds per candidate (inherit + score) are set beside proxy training's. The hypervolume race
(a >= 1,000-candidate supernet study against a proxy-training study at equal wall time) is run
with the two study commands printed at the end.

    python -m bench.fidelity.supernet --checkpoint runs/supernet/resnet.pt \
        --hwa-checkpoint runs/supernet/resnet-hwa.pt
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from scipy.stats import kendalltau

import analog
from bench import DATA, RESULTS
from bench._results import publish
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from hwnas.train.loop import FitConfig, evaluate, fit
from search_spaces import get_space
from search_spaces.supernet.load import inherit, load_supernet

TRUTH = DATA / "fidelity" / "truth.csv"
OUT = RESULTS / "supernet.md"
QUICKSTART = FitConfig(epochs=1, batch_size=128, lr=0.1, label_smoothing=0.1, warmup_epochs=0.1)


def score(model, data, args) -> dict[str, float]:  # noqa: ANN001
    """Digital and hardware accuracy of ``model`` on the validation images."""
    x, y = data.x_val[:args.eval_limit], data.y_val[:args.eval_limit]
    out = {"acc_digital": evaluate(model, x, y, device=args.device)["acc"]}
    protocol = analog.ScoringProtocol(times=tuple(args.times), repeats=args.repeats, seed=0,
                                      adabs=args.bn_images, device=args.device)
    res = analog.evaluate(model.eval(), x, y, args.hw, protocol, calib=data.x_train[:256],
                          adabs_images=data.x_train[:args.bn_images])
    for label, point in zip(args.times, res.points, strict=True):
        out[f"acc_{args.hw}@{label}"] = float(point.acc_mean)
    return out


def quickstart_recipe(device: str, **changes: int) -> FitConfig:
    """The quickstart's ``train`` section on one thread (``steps=N``: what a supernet study with
    ``supernet.finetune_steps`` or ``schedule.resource: steps`` runs per candidate)."""
    from nas.scoring import glue
    from nas.study.files import load_study

    cfg = load_study("quickstart", {"train.threads": 1})
    return replace(glue.fit_config(cfg, **changes), device=device)


def inherited(path: str, archs: list[str], data, args,  # noqa: ANN001
              steps: int = 0) -> tuple[dict, list[float]]:
    """Scores on inherited weights (fine-tuned ``steps`` optimizer steps first, when > 0);
    seconds per candidate, and the part spent inheriting (the extraction and BN
    re-estimation, which replace proxy training)."""
    net, meta = load_supernet(path, space=args.space)
    rows, seconds, inherit_s = {}, [], []
    recipe = quickstart_recipe(args.device, steps=steps) if steps else None
    for arch in archs:
        t0 = time.perf_counter()
        model = inherit(net, arch, data.x_train[:args.bn_images]).to(args.device)
        inherit_s.append(time.perf_counter() - t0)
        if recipe:
            fit(model, data, recipe)
        rows[arch] = score(model, data, args)
        seconds.append(time.perf_counter() - t0)
    return {"rows": rows, "meta": meta, "inherit_s": float(np.median(inherit_s))}, seconds


def standalone(archs: list[str], data, args) -> tuple[dict, list[float]]:  # noqa: ANN001
    space, rows, seconds = get_space(args.space), {}, []
    for arch in archs:
        t0 = time.perf_counter()
        torch.manual_seed(0)
        model = space.build_for(arch, data)
        fit(model, data, replace(QUICKSTART, epochs=args.standalone_epochs, device=args.device))
        rows[arch] = score(model, data, args)
        seconds.append(time.perf_counter() - t0)
        print(f"  standalone {arch}: {rows[arch]} ({seconds[-1]:.0f} s)", flush=True)
    return rows, seconds


def proxy_seconds(archs: list[str], data, args) -> list[float]:  # noqa: ANN001
    """Seconds per candidate of proxy training with the quickstart's recipe (its ``train``
    section, one thread) plus the same scores: the cost the supernet replaces, in this run."""
    recipe = quickstart_recipe(args.device)
    space, seconds = get_space(args.space), []
    for arch in archs:
        t0 = time.perf_counter()
        torch.manual_seed(0)
        model = space.build_for(arch, data)
        fit(model, data, recipe)
        score(model, data, args)
        seconds.append(time.perf_counter() - t0)
        print(f"  proxy {arch}: {seconds[-1]:.0f} s", flush=True)
    return seconds


def tau_ci(a: np.ndarray, b: np.ndarray, n: int = 500) -> tuple[float, float, float]:
    """Kendall tau and its bootstrap 5-95% interval over the architectures."""
    rng = np.random.default_rng(0)
    boot = []
    for _ in range(n):
        idx = rng.integers(0, len(a), len(a))
        t = kendalltau(a[idx], b[idx]).statistic
        if np.isfinite(t):
            boot.append(t)
    return float(kendalltau(a, b).statistic), *np.percentile(boot, [5, 95])


def top5(a: np.ndarray, b: np.ndarray) -> int:
    return len(set(np.argsort(-a)[:5]) & set(np.argsort(-b)[:5]))


def yardstick(args, data) -> tuple[list[str], dict, str, list[float]]:  # noqa: ANN001
    if args.truth.exists():
        import pandas as pd

        df = pd.read_csv(args.truth)
        df = df[(df["space"] == args.space) & (df["recipe"] == "digital")]
        truth = {r["arch"]: r.to_dict() for _, r in df.iterrows()}
        return list(truth), truth, f"truth set {args.truth.name} ({len(truth)} archs)", []
    space, rng, archs = get_space(args.space), random.Random(args.seed), []
    while len(archs) < args.archs:  # small enough to proxy-train in about a minute each
        arch = space.random_arch(rng)
        if arch not in archs and space.features(arch)["macs"] <= args.max_macs:
            archs.append(arch)
    rows, seconds = standalone(archs, data, args)
    return archs, rows, (f"standalone short training (quickstart recipe, {args.standalone_epochs}"
                         " epochs), NOT the truth set"), seconds


def table(name: str, got: dict, ref: dict, archs: list[str], keys: list[str]) -> list[str]:
    lines = []
    for key in keys:
        a = np.array([got[x][key] for x in archs])
        b = np.array([ref[x][key] for x in archs])
        t, lo, hi = tau_ci(a, b)
        lines.append(f"| {name} | {key} | {t:.2f} [{lo:.2f}, {hi:.2f}] | {top5(a, b)}/5 | "
                     f"{a.mean():.3f} | {b.mean():.3f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", default=None, help="digital supernet")
    ap.add_argument("--hwa-checkpoint", default=None, help="analog-aware supernet")
    ap.add_argument("--space", default="resnet")
    ap.add_argument("--truth", type=Path, default=TRUTH)
    ap.add_argument("--archs", type=int, default=8, help="archs without a truth set")
    ap.add_argument("--max-macs", type=float, default=30e6)
    ap.add_argument("--standalone-epochs", type=float, default=1.0,
                    help="yardstick training without a truth set (quickstart: 1)")
    ap.add_argument("--hw", default="pcm")
    ap.add_argument("--times", default="1d,30d")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--eval-limit", type=int, default=1000)
    ap.add_argument("--bn-images", type=int, default=500)
    ap.add_argument("--train-limit", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--proxy", type=int, default=0,
                    help="also time proxy training (the quickstart's train section) + the same "
                    "scores on this many yardstick archs, for the per-candidate ratio")
    ap.add_argument("--device", default="cpu", help="where sub-networks are scored (and "
                    "proxy-trained); extraction and BN re-estimation stay on the CPU")
    ap.add_argument("--finetune-steps", default="0",
                    help="comma list: score each checkpoint after this many fine-tuning steps "
                    "per candidate (0 = inherited weights only)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args(argv)
    if not (args.checkpoint or args.hwa_checkpoint):  # each may run alone, e.g. one per core
        ap.error("give --checkpoint, --hwa-checkpoint or both")
    args.times = args.times.split(",")
    torch.set_num_threads(args.threads)
    data = load_data("fashion_mnist", train_limit=args.train_limit, seed=0)
    archs, ref, ref_name, proxy_s = yardstick(args, data)
    keys = ["acc_digital", *(f"acc_{args.hw}@{t}" for t in args.times)]
    lines = [f"Yardstick: {ref_name}; {len(archs)} {args.space} archs; {args.hw} at "
             f"{', '.join(args.times)}, {args.repeats} programmings, {args.eval_limit} "
             f"validation images, BN re-estimated on {args.bn_images} train images.", "",
             "| supernet | metric | Kendall tau [90% CI] | top-5 | mean inherited | mean ref |",
             "|---|---|---|---|---|---|"]
    costs = []
    runs = [(name, path, int(k)) for name, path in (("digital", args.checkpoint),
                                                    ("hwa", args.hwa_checkpoint)) if path
            for k in args.finetune_steps.split(",")]
    for name, path, steps in runs:
        label = f"{name} + {steps} fine-tuning steps" if steps else name
        got, seconds = inherited(path, archs, data, args, steps)
        lines += table(label, got["rows"], ref, archs, keys)
        m = got["meta"]
        costs.append(f"- {label}: supernet {m['step']} steps ({m['config']}), trained in "
                     f"{m['seconds']:.0f} s; {np.median(seconds):.1f} s per candidate "
                     f"(median, inherit + BN + fine-tuning + all scores), of which "
                     f"{got['inherit_s']:.2f} s inherit + BN")
    if args.proxy:
        proxy_s = proxy_seconds(archs[:args.proxy], data, args)
    if proxy_s:
        costs.append(f"- proxy training (quickstart recipe) + the same scores: "
                     f"{np.median(proxy_s):.1f} s per candidate (median of {len(proxy_s)})")
    prov = provenance(args.device)
    cmd = " ".join(sys.argv[1:] if argv is None else argv)  # run as a script: argv is None
    text = "\n".join([
        "## Supernet: ranking fidelity of inherited weights", "",
        f"`python -m bench.fidelity.supernet {cmd}`".rstrip(), "",
        *lines, "", *costs, "",
        f"Device: {prov.get('device')}; torch {torch.__version__}; {args.threads} CPU "
        "thread(s); timings are noisy on a shared host: compare ratios within this run.", "",
        "Hypervolume race (not run here): `hwnas run quickstart_supernet --set n_trials=1000` "
        "against `hwnas run quickstart --set timeout=<supernet train s + that study's s>`, "
        "then `hwnas pareto runs/<study>` on each."])
    publish(text, args.out)


if __name__ == "__main__":
    main()
