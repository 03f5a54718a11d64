"""`hwnas analog report`: any model (timm, torchvision, a factory, an hwnas arch or checkpoint)
with local weights to coverage, drift with confidence bands on several devices, per-layer
sensitivity, recommended digital layers, energy/chip fit and a verdict (HTML + JSON + PNGs)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from hwnas.common.errors import ConfigError, Problem
from nas.commands.data import add_data_args, data_kwargs


def add_report(group_sub: argparse._SubParsersAction) -> None:
    p = group_sub.add_parser(
        "report", help="analog report of any model: coverage, drift, sensitivity, energy",
        description="Analog report of one model with local weights (nothing downloads). "
                    "Fast by default (few images and programmings; every number carries its SE)."
                    " Raise --images/--repeats for figures.")
    p.add_argument("--model", default=None, help="timm:<name>, torchvision:<name>, "
                   "<space>:<arch> or <module>:<function> (not needed for an hwnas checkpoint)")
    p.add_argument("--weights", required=True, metavar="FILE",
                   help="local state_dict or checkpoint (.pt/.pth/.safetensors; timm or "
                        "torchvision key names), or an hwnas model.pt")
    p.add_argument("--data", default="fashion_mnist", help="data set (see `hwnas data list`)")
    p.add_argument("--hw", default=None, help="comma-separated analog hardware models, compared "
                   "on the same programming seeds (default: analog.defaults.HW)")
    p.add_argument("--times", default="1s,1h,1d,30d,1y", help="drift times, comma-separated")
    p.add_argument("--repeats", type=int, default=3, help="programmings per device and time")
    p.add_argument("--images", type=int, default=500, help="test images per pass")
    p.add_argument("--adabs", type=int, default=None, metavar="N",
                   help="AdaBS training images (default analog.defaults.ADABS_IMAGES; "
                        "curves are drawn with and without)")
    p.add_argument("--budget", type=float, default=1.0, help="accuracy loss allowed (points)")
    p.add_argument("--sensitivity-time", default="1d")
    p.add_argument("--sensitivity-images", type=int, default=300)
    p.add_argument("--sensitivity-repeats", type=int, default=2)
    p.add_argument("--sensitivity-top", type=int, default=8,
                   help="layers whose gain when kept digital is measured: those with the "
                   "largest loss when only they are analog (0: every layer)")
    p.add_argument("--no-sensitivity", action="store_true",
                   help="skip per-layer sensitivity (2 evaluations per layer) and the "
                        "recommendation")
    p.add_argument("--wpo", action="store_true",
                   help="also draw each device programmed with the conductance table aihwkit's "
                        "weight-programming optimiser finds for this model (+wpo curves, paired)")
    p.add_argument("--wpo-iterations", type=int, default=20, metavar="N",
                   help="the optimiser's generations (aihwkit's default 200 takes hours)")
    p.add_argument("--wpo-popsize", type=int, default=10, metavar="N",
                   help="the optimiser's population per dimension (aihwkit's default 100)")
    p.add_argument("--export", action="store_true",
                   help="also write programmed/drifted conductances (npz + JSON manifest)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    add_data_args(p)
    p.set_defaults(func=cmd_report)


def _config(args: argparse.Namespace):  # noqa: ANN202
    from analog import defaults, get_hw
    from analog.report_run import ReportConfig
    from analog.wpo import WpoSettings

    hws = tuple(h.strip() for h in (args.hw or defaults.HW).split(",") if h.strip())
    problems: list[Problem] = []
    for hw in hws:
        try:
            if get_hw(hw).kind != "analog":
                problems.append(Problem("--hw", "must list analog hardware models", hw,
                                        "see `hwnas analog list` (kind analog)"))
        except ConfigError as err:
            problems += err.problems
    if args.sensitivity_top < 0:
        problems.append(Problem("--sensitivity-top", "must be >= 0 (0: every layer)",
                                args.sensitivity_top, "pass e.g. 8"))
    for name in ("repeats", "images", "sensitivity_images", "sensitivity_repeats",
                 "wpo_iterations", "wpo_popsize"):
        if getattr(args, name) < 1:
            problems.append(Problem(f"--{name.replace('_', '-')}", "must be >= 1",
                                    getattr(args, name), "pass e.g. 2"))
    if not Path(args.weights).is_file():
        problems.append(Problem("--weights", "must be an existing local file (nothing downloads)",
                                args.weights, "pass the .pt/.pth/.safetensors file your "
                                "training wrote (a state_dict, a checkpoint or an hwnas model.pt)"))
    if problems:
        raise ConfigError(problems)
    return ReportConfig(
        hw=hws, times=tuple(t.strip() for t in args.times.split(",")), repeats=args.repeats,
        images=args.images, seed=args.seed,
        adabs=defaults.ADABS_IMAGES if args.adabs is None else args.adabs,
        sensitivity_time=args.sensitivity_time, sensitivity_images=args.sensitivity_images,
        sensitivity_repeats=args.sensitivity_repeats, sensitivity=not args.no_sensitivity,
        sensitivity_top=args.sensitivity_top or None,
        budget=args.budget, device=args.device,
        wpo=WpoSettings(popsize=args.wpo_popsize, maxiter=args.wpo_iterations, seed=args.seed)
        if args.wpo else None)


def load_model(args: argparse.Namespace, data) -> tuple[Any, dict[str, Any]]:  # noqa: ANN001
    """(digital model with its weights, description) from --model/--weights."""
    from analog.model_source import build_model, is_hwnas_checkpoint, load_weights

    if is_hwnas_checkpoint(args.weights):
        from search_spaces.checkpoint import load_checkpoint

        model, meta = load_checkpoint(args.weights)
        return model, {"model": f"{meta['space']}:{meta['arch']}", "weights": args.weights}
    if not args.model:
        raise ConfigError.one("--model", "is required unless --weights is an hwnas checkpoint",
                              None, "add e.g. --model timm:resnet18")
    model = build_model(args.model, in_chans=data.in_chans, num_classes=data.num_classes,
                        img_size=data.img_size)
    return load_weights(model, args.weights), {"model": args.model, "weights": args.weights}


def _energy(model, data, digital: list[str], hw: str) -> dict[str, Any]:  # noqa: ANN001
    from hw_cost.analog_cost import analog_cost

    shape = (data.in_chans, data.img_size, data.img_size)
    out = {"all mappable layers analog": analog_cost(model, shape, hw=hw)}
    if digital:
        out["recommended digital layers kept digital"] = analog_cost(model, shape, hw=hw,
                                                                     digital=digital)
    return out


def cmd_report(args: argparse.Namespace) -> int:
    import torch

    from analog.report_coverage import coverage_table
    from analog.report_html import verdict, write_report
    from analog.report_run import run_report
    from hwnas.common.provenance import provenance
    from hwnas.train.data import load_data

    start = time.perf_counter()
    cfg = _config(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_data(args.data, seed=args.seed, **data_kwargs(args))
    model, info = load_model(args, data)
    result = run_report(model, data, cfg)
    rep = result.as_dict()
    digital = result.recommendation.digital if result.recommendation else []
    rep["coverage"] = coverage_table(model, data.x_test[:1], digital)
    rep["energy"] = _energy(model, data, digital, cfg.hw[0])
    if args.export:
        from analog.report_export import export_conductances

        for hw in cfg.hw:
            export_conductances(model, hw, list(cfg.times), args.out, seed=cfg.seed,
                                calib=data.x_train[:cfg.calib_size])
        rep["export"] = [f"conductances_{hw}.npz" for hw in cfg.hw]
    rep["model"] = info
    rep["seconds"]["total"] = time.perf_counter() - start
    rep["provenance"] = provenance(args.device, seeds={"seed": args.seed},
                                   command="hwnas analog report")
    title = (f"{info['model']} on {data.name} ({min(cfg.images, len(data.y_test))} of "
             f"{len(data.y_test)} test images scored), "
             f"{torch.get_num_threads()} threads, {args.device}")
    paths = write_report(rep, args.out, title=title)
    print(f"verdict: {verdict(rep)}")
    for path in paths.values():
        print(f"wrote {path}")
    print(f"{rep['seconds']['total']:.0f} s")
    return 0
