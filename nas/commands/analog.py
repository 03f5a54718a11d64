"""`hwnas analog-eval`: the standard drift experiment; `hwnas analog list`: hardware models."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from hwnas.common.errors import ConfigError, Problem
from hwnas.common.outdir import fallback_dir, writable_dir
from nas.commands.analog_report import add_report
from nas.commands.data import add_data_args, data_kwargs


def add_parser(sub: argparse._SubParsersAction) -> None:
    group = sub.add_parser("analog", help="hardware accuracy models (list, report)")
    group_sub = group.add_subparsers(dest="analog_command", required=True, metavar="SUBCOMMAND")
    lst = group_sub.add_parser("list", help="list hardware models")
    lst.add_argument("pattern", nargs="?", default="*", help="shell pattern, e.g. 'pcm*'")
    lst.set_defaults(func=cmd_list)
    add_report(group_sub)
    _add_eval(sub)


def _add_eval(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "analog-eval", help="accuracy vs. drift time on analog hardware (CSV, PNG, JSON)",
        description="Evaluate one model under an analog hardware model at several drift times "
                    "(mean +- std over repeats), optionally after HWA fine-tuning, next to "
                    "digital/fq8/int8 references. A space+arch is trained digitally first.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--checkpoint", metavar="PATH", help="hwnas checkpoint (model.pt)")
    src.add_argument("--space", help="search space of --arch (see `hwnas spaces list`)")
    p.add_argument("--arch", help="architecture string (with --space)")
    p.add_argument("--data", default="fashion_mnist", help="data set (see `hwnas data list`)")
    p.add_argument("--hw", default=None,
                   help="analog hardware model (see `hwnas analog list`; default: the one the "
                        "shipped studies score, analog.defaults.HW = pcm_static)")
    p.add_argument("--times", default="1s,1h,1d,30d,1y",
                   help="drift times, comma-separated (0, 1s, 1h, 1d, 30d, 1y, ...)")
    p.add_argument("--repeats", type=int, default=None,
                   help="programming repeats per time (default: analog.defaults.REPEATS, 10)")
    p.add_argument("--epochs", type=float, default=3.0,
                   help="digital training epochs (with --space/--arch)")
    p.add_argument("--lr", type=float, default=None, help="digital peak learning rate")
    p.add_argument("--hwa-epochs", type=float, default=0.0,
                   help="HWA fine-tuning epochs of a copy (0: none)")
    p.add_argument("--hwa-lr", type=float, default=None,
                   help="HWA fine-tuning peak learning rate (default: lr / 10)")
    p.add_argument("--hwa-noise", type=float, default=0.05,
                   help="HWA weight-noise std relative to each channel's max |w|")
    p.add_argument("--hwa-recipe", default="plain",
                   help="HWA recipe: plain, or rasch2023 (noise ramp, distillation from the "
                        "noise-free model, 3x the epochs)")
    p.add_argument("--hwa-engine", default="auto",
                   help="HWA engine: auto, torch, aihwkit (C++ tiles) or lightning")
    p.add_argument("--adabs", type=int, default=None, metavar="N",
                   help="AdaBS: re-estimate batch norms through the analog model on N training "
                        "images after programming and each drift (0: off; default: the "
                        "studies' count, analog.defaults.ADABS_IMAGES = 256)")
    p.add_argument("--compare-adabs", action="store_true",
                   help="also draw each curve without AdaBS")
    p.add_argument("--no-compensation", action="store_true", help="drift compensation off")
    p.add_argument("--compare-compensation", action="store_true",
                   help="also draw every curve with the other compensation setting")
    p.add_argument("--references", default="digital,fq8,int8",
                   help="deterministic hardware models drawn as lines ('' for none)")
    p.add_argument("--digital-layers", default="", metavar="PATTERNS",
                   help="comma-separated shell patterns of layers kept digital on the analog "
                        "hardware, e.g. 'stem.*,head.fc' (layer-wise mapping)")
    p.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                   help="fix a hardware-model parameter, e.g. --set adc_bits=8 (repeatable; "
                        "parameters as for --sweep)")
    p.add_argument("--sweep", action="append", default=[], metavar="PARAM=V1,V2,...",
                   help="sweep one parameter (others fixed), e.g. --sweep adc_bits=6,7,8,9; "
                        "repeatable; writes analog_sweep.csv/png. Parameters: dac_bits, "
                        "adc_bits, out_noise, out_bound, tile_size, g_max, prog_noise_scale, "
                        "read_noise_scale, drift_scale, compensation")
    p.add_argument("--aihwkit-tiles", action="store_true",
                   help="evaluate with aihwkit's tiles instead of the validated fast emulation")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default runs/analog/<arch>-<hw>)")
    add_data_args(p)
    p.set_defaults(func=cmd_eval)


def cmd_list(args: argparse.Namespace) -> int:
    from analog import get_hw, list_hw

    for name in list_hw(args.pattern):
        hw = get_hw(name)
        print(f"{name:<20} {hw.kind:<8} {hw.description}")
        for caveat in getattr(hw, "caveats", None) or ():
            print(f"{'':<29} caveat: {caveat}")
    print("also: fqN / wXaY for any N, X, Y in 2..16 (N-bit fake-quant)")
    return 0


def _split(text: str) -> tuple[str, ...]:
    return tuple(r.strip() for r in text.split(",") if r.strip())


def _fixed_options(specs: list[str]) -> dict[str, Any]:
    from analog.sweep import parse_sweeps

    bad = [s for s in specs if "," in s.partition("=")[2]]
    if bad:
        raise ConfigError.one("--set", "takes one value per parameter", bad,
                              "use --sweep for several values")
    return {k: v[0] for k, v in parse_sweeps(specs, "--set").items()}


def _experiment_config(args: argparse.Namespace):  # noqa: ANN202
    from analog import defaults
    from analog.experiment import ExperimentConfig
    from analog.hwa import HwaOptions
    from analog.sweep import parse_sweeps

    refs = _split(args.references)
    # unset: the defaults studies score with (the parser leaves them None so that
    # building it does not import torch)
    repeats = defaults.REPEATS if args.repeats is None else args.repeats
    adabs = defaults.ADABS_IMAGES if args.adabs is None else args.adabs
    return ExperimentConfig(
        hw=_hw(args),
        times=tuple(t.strip() for t in args.times.split(",")),
        repeats=repeats, seed=args.seed, compensation=not args.no_compensation,
        compare_compensation=args.compare_compensation, hwa_epochs=args.hwa_epochs,
        adabs=adabs, compare_adabs=args.compare_adabs,
        hwa_lr=args.hwa_lr,
        hwa_options=HwaOptions(weight_noise=args.hwa_noise, recipe=args.hwa_recipe,
                               engine=args.hwa_engine),
        references=refs, fast=not args.aihwkit_tiles, device=args.device,
        digital=_split(args.digital_layers), options=_fixed_options(args.set),
        sweeps=parse_sweeps(args.sweep))


def _resolve(args: argparse.Namespace):  # noqa: ANN202
    """Check every argument before any work, reporting all problems at once."""
    from hwnas.train.datasets import get_dataset
    from hwnas.train.loop import FitConfig

    problems: list[Problem] = []
    cfg = fit_cfg = None
    if args.space and not args.arch:
        problems.append(Problem("--arch", "is required with --space", None,
                                "add --arch <architecture string>"))
    if args.arch and not args.space:
        problems.append(Problem("--arch", "needs --space", args.arch, "add --space <space>"))
    if args.checkpoint and not Path(args.checkpoint).is_file():
        problems.append(Problem("--checkpoint", "must be an existing file", args.checkpoint,
                                "point it at a model.pt written by hwnas"))
    if args.threads is not None and args.threads < 1:
        problems.append(Problem("--threads", "must be >= 1", args.threads, "pass e.g. 1 or 2"))
    steps = [lambda: get_dataset(args.data), lambda: _experiment_config(args),
             lambda: FitConfig(epochs=args.epochs, lr=args.lr, seed=args.seed,
                               device=args.device)]
    if args.space and args.arch:
        steps.append(lambda: _space(args.space).decode(args.arch))
    results = []
    for step in steps:
        try:
            results.append(step())
        except ConfigError as err:
            problems.extend(err.problems)
            results.append(None)
    if problems:
        raise ConfigError(problems)
    cfg, fit_cfg = results[1], results[2]
    return cfg, fit_cfg


def _space(name: str):  # noqa: ANN202
    from search_spaces import get_space

    return get_space(name)


def load_checkpoint_model(path: str | Path):  # noqa: ANN201
    """(model, meta) from any ``hwnas-checkpoint/1`` file (exported, pruned or finalized),
    read with ``weights_only=True`` and rebuilt through its search space."""
    from search_spaces.checkpoint import load_checkpoint

    return load_checkpoint(path)


def _check_shapes(meta: dict[str, Any], data) -> None:  # noqa: ANN001
    want = meta["data"]
    got = {"in_chans": data.in_chans, "num_classes": data.num_classes, "img_size": data.img_size}
    bad = {k: (want[k], v) for k, v in got.items() if want.get(k) != v}
    if bad:
        raise ConfigError.one("--data", f"must match the checkpoint's input/classes {bad}",
                              data.name, f"use --data {want.get('name', '?')}")


def _model(args: argparse.Namespace, data, fit_cfg):  # noqa: ANN001, ANN202
    import torch

    from hwnas.train.loop import evaluate, fit

    if args.checkpoint:
        model, meta = load_checkpoint_model(args.checkpoint)
        _check_shapes(meta, data)
        _check_digital(args, model)
        return model, {"checkpoint": str(args.checkpoint), "space": meta["space"],
                       "arch": meta["arch"]}
    torch.manual_seed(args.seed)
    model = _space(args.space).build_for(args.arch, data)
    _check_digital(args, model)  # before training: a typo must not cost a training run
    result = fit(model, data, fit_cfg)
    test = evaluate(model, data.x_test, data.y_test, device=fit_cfg.device)
    print(f"digital training: {fit_cfg.epochs:g} epochs, test acc {100 * test['acc']:.2f}, "
          f"{result.seconds:.1f} s")
    return model, {"space": args.space, "arch": args.arch, "epochs": fit_cfg.epochs,
                   "lr": fit_cfg.lr, "digital_test_acc": test["acc"]}


def _check_digital(args: argparse.Namespace, model) -> None:  # noqa: ANN001
    from analog.coverage import digital_layers

    if args.digital_layers:
        digital_layers(model, _split(args.digital_layers))


def _out_dir(args: argparse.Namespace, model_info: dict[str, Any]) -> Path:
    if args.out:
        return Path(args.out)
    arch = re.sub(r"[^A-Za-z0-9._-]+", "_", str(model_info.get("arch", "model")))
    return Path("runs") / "analog" / f"{arch}-{_hw(args)}"


def _hw(args: argparse.Namespace) -> str:
    """The hardware model asked for, else the one the shipped studies score."""
    from analog import defaults

    return defaults.HW if args.hw is None else args.hw


def _scoring(result) -> str:  # noqa: ANN001
    """How the main curve was scored (AdaBS, programmings, path, compensation, images)."""
    from analog import defaults

    return defaults.scoring_label(result.curves[0].result) if result.curves else "no curves"


def _write(result, out: Path, **kw: Any) -> dict[str, Path]:  # noqa: ANN001 - AnalogResult
    """``write_all`` into ``out``; a folder that refuses the files (disk full, permissions gone
    during the run) gets them in a fresh temporary folder instead, named on stderr."""
    from analog.report import write_all

    try:
        return write_all(result, out, **kw)
    except OSError as err:
        safe = fallback_dir("analog-eval")
        print(f"hwnas: could not write to {out} ({err.strerror or err}); the results are "
              f"saved in {safe} instead", file=sys.stderr)
        return write_all(result, safe, **kw)


def cmd_eval(args: argparse.Namespace) -> int:
    import torch

    from analog.experiment import run_experiment
    from hwnas.common.provenance import provenance
    from hwnas.train.data import load_data

    cfg, fit_cfg = _resolve(args)
    if args.out:  # refused before the training and scoring, not after
        writable_dir(args.out)
    if args.threads:
        torch.set_num_threads(args.threads)
    data = load_data(args.data, seed=args.seed, **data_kwargs(args))
    model, model_info = _model(args, data, fit_cfg)
    result = run_experiment(model, data, cfg, fit_cfg=fit_cfg)
    title = f"{model_info.get('arch')} | {cfg.hw} | {len(data.y_test)} {data.name} test images " \
            f"| {torch.get_num_threads()} threads, {args.device}"
    title += f"\nscored with {_scoring(result)}"
    if cfg.digital:
        title += f"\ndigital layers: {', '.join(cfg.digital)}"
    meta = {"model": model_info, "data": {"name": data.name, **data.sizes()},
            "provenance": provenance(args.device, seeds={"seed": args.seed},
                                     command="hwnas analog-eval")}
    print(f"scored with {_scoring(result)}")
    paths = _write(result, _out_dir(args, model_info), title=title, meta=meta)
    for path in paths.values():
        print(f"wrote {path}")
    return 0
