"""`hwnas cost`: what a candidate costs on this machine, the cost cache, roofline, predictors.

    hwnas cost SPACE ARCH [--device cpu|cuda] [--batch 1] [--dtype fp32] [--data NAME |
                          --input-shape 1,28,28] [--threads 1] [--no-cache] [--json]
                          [--form eager|compile|int8|fp16|bf16] [--profile [TRACE.json]]
    hwnas cost cache {stats,export PATH}   (export: PATH, and the analog estimates in
                                            PATH with .estimates before its suffix)
    hwnas cost roofline [--device cpu] [--dtype fp32] [--remeasure]
    hwnas cost build-lut SPACE [--device cpu] [-n 20]
    hwnas cost eval-predictor SPACE [--measure N] [--holdout 0.5] [--regressor ridge]

``hwnas cost SPACE ARCH`` has a positional form next to sub-commands, which argparse's
sub-parsers cannot express, so the group takes the rest of the command line and parses it here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hwnas.common.errors import ConfigError

_SUBCOMMANDS = ("cache", "roofline", "build-lut", "eval-predictor")


def add_parser(sub: argparse._SubParsersAction) -> None:
    # prefix_chars="\0": no option is parsed at this level, every word goes to ``rest``.
    p = sub.add_parser("cost", help="measured latency, FLOPs, memory, roofline, analog estimate; "
                       "cost cache and latency predictors", add_help=False, prefix_chars="\0")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    rest = list(args.rest)
    parser = _sub_parser() if rest and rest[0] in _SUBCOMMANDS else _measure_parser()
    ns = parser.parse_args(rest)
    return int(ns.handler(ns) or 0)


def _target_args(p: argparse.ArgumentParser, *, shape: bool = True) -> None:
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default cpu)")
    p.add_argument("--dtype", default="fp32", help="fp32, fp16 or bf16 (default fp32)")
    # Default 1, as in a study's latency config, so this command reads what a search cached.
    # More threads than idle cores is ruinous: on 2 shared cores, 2 threads measured a 3.5 ms
    # model at 200-700 ms (workers wait at every barrier for a descheduled peer).
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads while timing (default 1, as a study measures; raise it "
                        "only on cores nothing else uses)")
    p.add_argument("--clock", default="wall",
                   help="wall (default) or thread: CPU time of the timing thread (CPU, "
                        "--threads 1), robust to other processes on the machine")
    p.add_argument("--cache", default=None, metavar="PATH",
                   help="cost cache file (default $HWNAS_CACHE or ~/.cache/hwnas/costs.db)")
    if shape:
        p.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
        p.add_argument("--input-shape", default="1,28,28", metavar="C,H,W",
                       help="input shape without the batch dimension (default 1,28,28)")
        p.add_argument("--num-classes", type=int, default=10, help="classes (default 10)")
        p.add_argument("--data", metavar="NAME",
                       help="take input shape and classes from a registered data set")
        p.add_argument("--max-seconds", type=float, default=10.0,
                       help="cap on timing one model (default 10)")
        p.add_argument("--min-seconds", type=float, default=0.0,
                       help="time at least this long (default 0); on a shared VM 10 s averages "
                            "the host's speed drift (see BENCHMARKS.md)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")


def _measure_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hwnas cost", description="Measure one candidate: latency (median, p10/p90, CV), "
        "params, MACs/FLOPs, memory, roofline placement and the analog tile estimate. "
        f"Other commands: hwnas cost {{{','.join(_SUBCOMMANDS)}}} -h")
    p.add_argument("space", metavar="SPACE", help="a name from `hwnas spaces list`")
    p.add_argument("arch", metavar="ARCH", help="an arch string of SPACE")
    _target_args(p)
    p.add_argument("--no-cache", action="store_true", help="measure without reading or writing")
    p.add_argument("--refresh", action="store_true", help="re-measure and overwrite the cache")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format")
    p.add_argument("--compile", action="store_true", help="time torch.compile'd model")
    p.add_argument("--form", default="eager",
                   help="deployed form timed: eager (default), compile, int8 (torchao x86 int8 "
                        "through inductor, CPU), fp16 or bf16 (GPU, or a CPU with native "
                        "half arithmetic)")
    p.add_argument("--profile", nargs="?", const="profile.json", default=None, metavar="TRACE",
                   help="profile instead of measuring: write a torch.profiler Chrome trace "
                        "(default profile.json) and print the top operators by self time")
    p.add_argument("--top", type=int, default=15, help="operators listed with --profile (15)")
    p.add_argument("--hw", default=None, metavar="NAME",
                   help="analog hardware model the analog estimate describes (its tile size, "
                        "ADC bits and read mode; `hwnas analog list`)")
    p.add_argument("--tile-size", type=int, default=None,
                   help="analog crossbar rows = cols (default: --hw's, else 512)")
    p.set_defaults(handler=cmd_measure)
    return p


def _sub_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="hwnas cost")
    cmds = p.add_subparsers(dest="cost_command", required=True, metavar="SUBCOMMAND")
    cache = cmds.add_parser("cache", help="the cost cache: stats or export")
    cache.add_argument("action", choices=("stats", "export"))
    cache.add_argument("path", nargs="?", help="export file (.csv or .parquet); the analog "
                       "estimates go beside it, named with .estimates before the suffix")
    cache.add_argument("--cache", default=None, metavar="PATH", help="cost cache file")
    cache.set_defaults(handler=cmd_cache)
    roof = cmds.add_parser("roofline", help="measure (once) and show the device ceilings")
    _target_args(roof, shape=False)
    roof.add_argument("--remeasure", action="store_true", help="measure again, replace cache")
    roof.set_defaults(handler=cmd_roofline)
    lut = cmds.add_parser("build-lut", help="time every block of N random archs, calibrate")
    lut.add_argument("space", metavar="SPACE")
    _target_args(lut)
    lut.add_argument("-n", type=int, default=20, help="random archs to decompose and measure")
    lut.add_argument("--seed", type=int, default=0)
    lut.set_defaults(handler=cmd_build_lut)
    ev = cmds.add_parser("eval-predictor", help="score LUT and regressor on held-out archs")
    ev.add_argument("space", metavar="SPACE")
    _target_args(ev)
    ev.add_argument("--measure", type=int, default=0, help="first measure N new random archs")
    ev.add_argument("--holdout", type=float, default=0.5, help="held-out share (default 0.5)")
    ev.add_argument("--regressor", default="ridge",
                    help="regressor family: ridge (default) or gbr")
    ev.add_argument("--target", default="median",
                    help="statistic to predict: median (default) or p10 (less load-sensitive)")
    ev.add_argument("--seed", type=int, default=0)
    ev.set_defaults(handler=cmd_eval)
    return p


def _shape(ns: argparse.Namespace) -> tuple[tuple[int, ...], int]:
    from hw_cost.options import parse_shape

    if ns.data:
        from hwnas.train.datasets import get_dataset

        spec = get_dataset(ns.data)
        return tuple(spec.shape), spec.num_classes or ns.num_classes
    return parse_shape(ns.input_shape), ns.num_classes


def _cache(ns: argparse.Namespace):
    from hw_cost.cache import CostCache

    return None if getattr(ns, "no_cache", False) else CostCache(ns.cache)


def _print(obj: dict, as_json: bool, indent: str = "") -> None:
    if as_json:
        print(json.dumps(obj, indent=1, default=str))
        return
    for key, value in obj.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print(value, False, indent + "  ")
        else:
            print(f"{indent}{key:24s} {_fmt(value)}")


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _group(r: dict) -> dict:
    """The cost dict grouped for reading: latency, static, roofline, analog, device."""
    from hw_cost.api import ROOF_KEYS

    lat = {k: r[k] for k in r if k.startswith("latency_")}
    static = {k: r[k] for k in ("params", "macs", "flops", "model_bytes",
                                "peak_activation_bytes", "peak_activation_method", "leaf_calls")
              if k in r}
    roof = {k: r.get(k) for k in ROOF_KEYS}
    analog = {k: v for k, v in r["analog"].items() if k != "figures"}
    setup = {k: r[k] for k in ("space", "arch", "device", "form", "batch_size", "dtype",
                               "threads", "clock", "input_shape", "fingerprint_hash", "cached")
             if k in r}
    return {"setup": setup, "latency": lat, "static": static, "roofline": roof,
            "analog (estimate)": analog}


def cmd_measure(ns: argparse.Namespace) -> int:
    from hw_cost.api import cost_of
    from hw_cost.spec import ChipSpec, MeasureSpec

    if ns.profile is not None:
        return cmd_profile(ns)
    shape, classes = _shape(ns)
    spec = MeasureSpec(device=ns.device, batch_size=ns.batch, dtype=ns.dtype,
                       channels_last=ns.channels_last, compile=ns.compile, threads=ns.threads,
                       max_seconds=ns.max_seconds, min_seconds=ns.min_seconds, clock=ns.clock,
                       form=ns.form)
    r = cost_of(ns.space, ns.arch, input_shape=shape, num_classes=classes, spec=spec,
                chip=ChipSpec(hw=ns.hw, tile_size=ns.tile_size), cache=_cache(ns) or False,
                refresh=ns.refresh)
    _print(r if ns.json else _group(r), ns.json)
    return 0


def cmd_profile(ns: argparse.Namespace) -> int:
    from hw_cost.options import validate
    from hw_cost.profile import profile_model
    from search_spaces import get_space

    shape, classes = _shape(ns)
    # Every option is checked before the model is built: a GPU asked on a machine without one
    # is one clear error, not a trace of the wrong device.
    validate(device=ns.device, batch_size=ns.batch, dtype=ns.dtype, input_shape=shape,
             threads=ns.threads, form=ns.form)
    sp = get_space(ns.space)
    sp.validate(ns.arch)
    model = sp.build(ns.arch, in_chans=shape[0], num_classes=classes, img_size=shape[1])
    r = profile_model(model, shape, trace=ns.profile, device=ns.device, batch_size=ns.batch,
                      dtype=ns.dtype, form=ns.form, channels_last=ns.channels_last,
                      threads=ns.threads, top=ns.top)
    if ns.json:
        _print(r, True)
        return 0
    print(f"{ns.space} {ns.arch}: {r['form']} on {r['device']}, {r['dtype']}, batch {ns.batch}, "
          f"{r['threads']} thread(s); {r['calls']} forwards profiled, "
          f"{r['total_self_ms']:.3f} ms self time per forward")
    print(f"trace: {r['trace']}\n")
    print(f"{'operator':48s} {'calls/fwd':>9s} {'self ms/fwd':>11s} {'share':>7s}")
    for row in r["operators"]:
        print(f"{row['operator'][:48]:48s} {row['calls']:9.1f} {row['self_ms']:11.4f} "
              f"{row['share']:7.1%}")
    return 0


def cmd_cache(ns: argparse.Namespace) -> int:
    cache = _cache(ns)
    if ns.action == "stats":
        _print(cache.stats(), False)
        return 0
    if not ns.path:
        raise ConfigError.one("cache export", "needs a target file", None,
                              "run: hwnas cost cache export costs.parquet")
    from hw_cost.estimate_cache import export_estimates

    # timings and analog estimates are keyed apart (one timing serves every hardware model),
    # so they go to two tables: PATH, and PATH's name with .estimates before the suffix
    target = Path(ns.path)
    beside = target.with_name(f"{target.stem}.estimates{target.suffix}")
    print(f"exported {cache.export(target)} rows to {target} and "
          f"{export_estimates(cache, beside)} analog estimates to {beside}")
    return 0


def cmd_roofline(ns: argparse.Namespace) -> int:
    from hw_cost.roofline import get_ceilings

    c = get_ceilings(device=ns.device, dtype=ns.dtype, threads=ns.threads, cache=_cache(ns),
                     remeasure=ns.remeasure, clock=ns.clock)
    _print({"peak_gflops": c.peak_flops / 1e9, "peak_gbytes_per_s": c.peak_bytes_per_s / 1e9,
            **{f"{level}_gbytes_per_s": bw / 1e9 for level, bw in c.cache_bytes_per_s.items()},
            "cache_bytes": c.cache_bytes, "ridge_flop_per_byte": c.ridge, "matmul_n": c.matmul_n,
            "copy_bytes": c.copy_bytes,
            "dtype": c.dtype, "clock": c.clock, "fingerprint": c.fingerprint}, ns.json)
    return 0


def _setting(ns: argparse.Namespace):
    from hw_cost.options import validate
    from hw_cost.predictors import Setting

    shape, classes = _shape(ns)
    validate(device=ns.device, batch_size=ns.batch, dtype=ns.dtype, input_shape=shape,
             threads=ns.threads, clock=ns.clock)
    return Setting(ns.space, shape, classes, ns.device, ns.batch, ns.dtype, ns.threads,
                   max_seconds=ns.max_seconds, min_seconds=ns.min_seconds, clock=ns.clock)


def cmd_build_lut(ns: argparse.Namespace) -> int:
    from hw_cost.predictors import build_lut

    if ns.n < 2:
        raise ConfigError.one("-n", "the calibration needs at least 2 archs", ns.n,
                              "pass e.g. -n 20")
    _print(build_lut(_setting(ns), _cache(ns), n=ns.n, seed=ns.seed), ns.json)
    return 0


def cmd_eval(ns: argparse.Namespace) -> int:
    from hw_cost.predictors import evaluate

    if not 0.0 < ns.holdout < 1.0:
        raise ConfigError.one("--holdout", "must lie in (0, 1)", ns.holdout, "pass e.g. 0.5")
    _print(evaluate(_setting(ns), _cache(ns), measure=ns.measure, holdout=ns.holdout,
                    regressor=ns.regressor, seed=ns.seed, target=ns.target), ns.json)
    return 0
