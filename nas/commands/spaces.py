"""`hwnas spaces` commands: list the search spaces, sample and inspect arch strings."""

from __future__ import annotations

import argparse
import json
import random

from hwnas.common.errors import ConfigError, Problem
from search_spaces import get_space, list_spaces
from search_spaces.stats import reference_stats, size_text


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("spaces", help="list search spaces, sample and inspect arch strings",
                       description="Search spaces: what can be built, named by one arch string.")
    cmds = p.add_subparsers(dest="spaces_command", required=True, metavar="SUBCOMMAND")

    ls = cmds.add_parser("list", help="name, size and description of every space")
    ls.add_argument("pattern", nargs="?", default="*", help="shell pattern, e.g. '*net*'")
    ls.set_defaults(func=cmd_list)

    sample = cmds.add_parser("sample", help="draw random arch strings with params and MACs",
                             description="Draw seeded random archs of SPACE and print each "
                                         "with its parameter count and MACs per image.")
    sample.add_argument("space", metavar="SPACE", help="a name from `hwnas spaces list`")
    sample.add_argument("-n", type=int, default=5, help="how many archs (default 5)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    _shape_args(sample)
    sample.set_defaults(func=cmd_sample)

    show = cmds.add_parser("show", help="a space's grammar; with ARCH its features and costs",
                           description="Print the arch-string grammar of SPACE; with ARCH, "
                                       "validate it and print its features, params and MACs.")
    show.add_argument("space", metavar="SPACE", help="a name from `hwnas spaces list`")
    show.add_argument("arch", metavar="ARCH", nargs="?", help="an arch string of SPACE")
    _shape_args(show)
    show.set_defaults(func=cmd_show)


def _shape_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-shape", default="1,28,28", metavar="C,H,W",
                   help="input shape the models are built for (default 1,28,28; H must equal W)")
    p.add_argument("--classes", type=int, default=10, help="number of classes (default 10)")
    p.add_argument("--data", metavar="NAME",
                   help="take shape and classes from a registered data set instead")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def parse_shape(text: str) -> tuple[int, int, int]:
    """'1,28,28' -> (1, 28, 28); square images only, as every space takes one img_size."""
    parts = text.replace("x", ",").split(",")
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        shape = ()
    if len(shape) != 3 or min(shape) <= 0 or shape[1] != shape[2]:
        raise ConfigError(Problem("--data-shape", "must be C,H,W with positive ints and H == W",
                                  text, "write e.g. 1,28,28 (Fashion-MNIST) or 3,32,32"))
    return shape  # type: ignore[return-value]


def resolve_shape(args: argparse.Namespace) -> tuple[tuple[int, int, int], int]:
    if args.data:
        from hwnas.train.datasets import get_dataset  # lazy: shapes need no data

        spec = get_dataset(args.data)
        return tuple(spec.shape), spec.num_classes or args.classes
    return parse_shape(args.data_shape), args.classes


def _stats(space, arch: str, shape: tuple[int, int, int], classes: int) -> dict[str, object]:
    # Built on the meta device: no memory and no compute, whatever the arch's size.
    params, macs = reference_stats(space, arch, shape, classes)
    return {"arch": arch, "params": params, "macs": macs}


def _human(n: int) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(n)


def _table(rows: list[dict[str, object]]) -> None:
    width = max(len(str(r["arch"])) for r in rows)
    print(f"{'arch':<{width}}  {'params':>8}  {'MACs':>8}")
    for r in rows:
        print(f"{r['arch']:<{width}}  {_human(r['params']):>8}  {_human(r['macs']):>8}")


def cmd_list(args: argparse.Namespace) -> int:
    names = list_spaces(args.pattern)
    width = max((len(n) for n in names), default=4)
    for name in names:
        space = get_space(name)
        size = size_text(space.size())
        print(f"{name:<{width}}  {size:>16}  {space.grammar().splitlines()[0]}")
    return 0


def cmd_sample(args: argparse.Namespace) -> int:
    if args.n < 1:
        raise ConfigError.one("-n", "must be >= 1", args.n, "ask for at least one arch")
    space = get_space(args.space)
    shape, classes = resolve_shape(args)
    rng = random.Random(args.seed)
    rows = [_stats(space, space.random_arch(rng), shape, classes) for _ in range(args.n)]
    if args.json:
        print(json.dumps({"space": args.space, "input_shape": shape, "classes": classes,
                          "seed": args.seed, "archs": rows}, indent=1))
    else:
        print(f"# {args.space}, input {'x'.join(map(str, shape))}, {classes} classes, "
              f"seed {args.seed}; MACs per image")
        _table(rows)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    space = get_space(args.space)
    if args.arch is None:
        print(space.grammar())
        return 0
    shape, classes = resolve_shape(args)
    info = _stats(space, space.validate(args.arch), shape, classes)
    info["features"] = space.features(args.arch)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    _table([info])
    print("features (reference shape 3x32x32, 10 classes):")
    for key, value in info["features"].items():
        print(f"  {key:<16} {value:g}")
    return 0
