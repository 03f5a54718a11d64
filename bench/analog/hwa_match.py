"""The HWA gain under the scored model, with and without matching the study's options.

A small ``resnet``-space model is trained digitally on scikit-learn's digits, then scored on
``pcm_static`` with study-like options (a 6-bit ADC, output noise 0.1, 64x64 tiles) and the
first layer kept digital, after three treatments:

* ``none``: the digital model as trained;
* ``preset``: HWA on the preset's defaults with every layer analog (what HWA trained before
  ``analog.hwa.hwa_target`` took the study's options and mapping);
* ``matched``: HWA on exactly what is scored (``hwa_target(hw, options=, digital=)``).

Each arm is scored with the same ``repeats`` programmings per drift time (mean +- SE over
programmings) and AdaBS as studies score it; the gains are against ``none``, their SE from the
two arms' SEs (independent programmings).

    OMP_NUM_THREADS=1 .venv/bin/python -m bench.analog.hwa_match --hwa-epochs 3 --repeats 10 \
        --times 1s,1d --seeds 0,1 --out bench/results/analog_hwa_match.json
    .venv/bin/python -m bench.analog.hwa_match --render bench/results/analog_hwa_match.json

``--render`` writes the BENCHMARKS.md section (``bench/results/analog_hwa_match.md``) from a
stored result file without rerunning.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

import analog
from analog import defaults
from analog.adabs import training_images
from analog.hwa import HwaOptions, hwa_target
from bench import command_line
from hwnas.common.provenance import provenance
from hwnas.train.data import load_data
from hwnas.train.loop import FitConfig, evaluate, fit
from search_spaces import get_space

OPTIONS = {"adc_bits": 6, "out_noise": 0.1, "tile_size": 64}
DIGITAL = ("stem.0",)


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--arch", default="rn:s16-d1r1c16-d1r2c32")
    p.add_argument("--data", default="digits")
    p.add_argument("--hw", default="pcm_static")
    p.add_argument("--epochs", type=float, default=15.0)
    p.add_argument("--hwa-epochs", type=float, default=5.0)
    p.add_argument("--hwa-lr", type=float, default=0.01)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--times", default="1s,1d,30d")
    p.add_argument("--seeds", default="0", help="HWA training seeds, comma-separated")
    p.add_argument("--out", default=None)
    p.add_argument("--render", default=None, metavar="JSON",
                   help="only write the markdown section of a stored result file")
    return p.parse_args()


def _pm(v: dict[str, Any]) -> str:
    return f"{100 * v['mean']:.2f} ± {100 * v['se']:.2f}"


def render(out: dict[str, Any]) -> str:
    """The BENCHMARKS.md section: one row per seed and arm, accuracies and gains in % (± SE)."""
    times = list(out["runs"][0]["arms"]["none"])
    head = ["HWA", "seed", *times, *(f"gain at {t}" for t in times)]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for run in out["runs"]:
        for arm, v in run["arms"].items():
            gain = run["gain"].get(arm)
            rows.append("| " + " | ".join([arm, str(run["seed"]), *(_pm(v[t]) for t in times),
                                           *((_pm(gain[t]) if gain else "") for t in times)])
                        + " |")
    prov = out.get("provenance", {})
    return "\n".join([
        "## HWA trained on what is scored (analog_hwa_match)", "",
        f"`{out['command']}` ({out['seconds']:.0f} s; {prov.get('cpu', prov.get('device', ''))}). "
        f"`{out['arch']}` on {out['data']} ({100 * out['digital_acc']:.1f}% digital), scored on "
        f"`{out['hw']}` with options {out['options']}, layers kept digital {out['digital']}, "
        f"AdaBS {out['adabs_images']} images, {out['repeats']} programmings per time (mean ± SE "
        f"over programmings, %). HWA: {out['hwa_epochs']} epochs at lr {out['hwa_lr']}; `preset` "
        "trains on the preset's defaults with every layer analog, `matched` on exactly the scored "
        "options and mapping (`analog.hwa.hwa_target`). Gains are against `none`.", "",
        *rows, ""])


def _score(model, data, args, seed: int) -> dict[str, Any]:  # noqa: ANN001
    protocol = analog.ScoringProtocol(times=args.times.split(","), repeats=args.repeats,
                                      seed=seed, options=OPTIONS, digital=DIGITAL,
                                      adabs=defaults.ADABS_IMAGES)
    res = analog.evaluate(model, data.x_test, data.y_test, args.hw, protocol,
                          calib=data.x_train[:256],
                          adabs_images=training_images(data.x_train, defaults.ADABS_IMAGES, seed))
    return {p.label: {"mean": float(p.acc_mean), "se": float(p.acc_se),
                      "repeats": int(p.repeats)} for p in res.points}


def _gain(arm: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    return {t: {"mean": arm[t]["mean"] - base[t]["mean"],
                "se": math.hypot(arm[t]["se"], base[t]["se"])} for t in arm}


def main() -> None:
    args = parse()
    if args.render:
        src = Path(args.render)
        src.with_suffix(".md").write_text(render(json.loads(src.read_text())))
        return
    torch.manual_seed(0)
    data = load_data(args.data, seed=0)
    model = get_space("resnet").build(args.arch, in_chans=data.in_chans,
                                      num_classes=data.num_classes, img_size=data.img_size)
    t0 = time.perf_counter()
    fit(model, data, FitConfig(epochs=args.epochs, lr=0.1, seed=0))
    digital_acc = evaluate(model, data.x_test, data.y_test)["acc"]
    hwa_cfg = FitConfig(epochs=args.hwa_epochs, lr=args.hwa_lr, seed=0)
    targets = {"preset": hwa_target(args.hw, hwa=HwaOptions()),
               "matched": hwa_target(args.hw, options=OPTIONS, digital=DIGITAL)}
    runs = []
    for seed in (int(s) for s in args.seeds.split(",")):
        arms = {"none": _score(model, data, args, seed)}
        for name, target in targets.items():
            tuned = copy.deepcopy(model)
            hwa_fit = analog.hwa_fit(tuned, data, target, replace(hwa_cfg, seed=seed))
            arms[name] = {**_score(tuned, data, args, seed), "engine": target.engine,
                          "hwa_val_acc": hwa_fit.val_acc, "hwa_seconds": hwa_fit.seconds}
        times = args.times.split(",")
        gains = {name: _gain({t: arms[name][t] for t in times}, arms["none"])
                 for name in targets}
        runs.append({"seed": seed, "arms": arms, "gain": gains})
        print(json.dumps(runs[-1], indent=1))
    out = {"bench": "analog_hwa_match", "command": command_line(), "arch": args.arch,
           "data": args.data, "hw": args.hw, "options": OPTIONS, "digital": list(DIGITAL),
           "digital_acc": digital_acc, "hwa_epochs": args.hwa_epochs, "hwa_lr": args.hwa_lr,
           "repeats": args.repeats, "adabs_images": defaults.ADABS_IMAGES, "runs": runs,
           "seconds": time.perf_counter() - t0, "provenance": provenance()}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
