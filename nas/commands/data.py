"""`hwnas data list` and `hwnas data info NAME`: the registered data sets and what they hold."""

from __future__ import annotations

import argparse
import json

from hwnas.common.errors import ConfigError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="list data sets, show their shapes and splits",
                       description="Data sets registered in hwnas.train.datasets.")
    cmds = p.add_subparsers(dest="data_command", required=True, metavar="SUBCOMMAND")
    ls = cmds.add_parser("list", help="registered data sets (name, shape, classes, source)")
    ls.add_argument("pattern", nargs="?", default="*", help="shell-style filter, e.g. '*mnist*'")
    ls.set_defaults(func=cmd_list)
    info = cmds.add_parser("info", help="shape, classes, split sizes, mean/std, path of one set")
    info.add_argument("name", help="data set name (see `hwnas data list`)")
    add_data_args(info)
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(func=cmd_info)


def add_data_args(p: argparse.ArgumentParser) -> None:
    """Options that choose what ``load_data`` loads; shared with ``hwnas train``."""
    p.add_argument("--data-root", default=None, metavar="DIR",
                   help="directory holding the data set's files (default: its standard place)")
    p.add_argument("--val-fraction", type=float, default=0.1,
                   help="share of the train split held out for validation (default 0.1)")
    p.add_argument("--train-limit", type=int, default=None, metavar="N",
                   help="use a seeded random subset of N train images (before the val split)")
    p.add_argument("--test-limit", type=int, default=None, metavar="N",
                   help="use the first N test images")
    p.add_argument("--data-option", action="append", default=[], metavar="KEY=VALUE",
                   help="reader option, e.g. img_size=64 (imagefolder), n_train=20000 (synthetic)")


def data_kwargs(args: argparse.Namespace) -> dict[str, object]:
    """``load_data`` keyword arguments from the options of ``add_data_args``."""
    kwargs: dict[str, object] = {"root": args.data_root, "val_fraction": args.val_fraction,
                                 "train_limit": args.train_limit, "test_limit": args.test_limit}
    for item in args.data_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError.one("--data-option", "must be KEY=VALUE", item,
                                  "write e.g. --data-option img_size=64")
        kwargs[key] = _literal(value)
    return kwargs


def _literal(value: str) -> object:
    """``"64"`` -> 64, ``"0.5"`` -> 0.5, anything else stays a string."""
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def cmd_list(args: argparse.Namespace) -> int:
    from hwnas.train.datasets import get_dataset, list_datasets

    print(f"{'name':<14} {'shape':<11} {'classes':<8} {'flip':<6} description")
    for name in list_datasets(args.pattern):
        spec = get_dataset(name)
        shape = "x".join(map(str, spec.shape))
        classes = spec.num_classes if spec.num_classes is not None else "folders"
        print(f"{name:<14} {shape:<11} {classes!s:<8} {spec.flip!s:<6} {spec.description}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from hwnas.train.data import dataset_info

    info = dataset_info(args.name, **data_kwargs(args))
    if args.json:
        print(json.dumps(info, indent=1, default=str))
        return 0
    for key, value in info.items():
        if key == "classes":
            value = ", ".join(value)
        print(f"{key:<12} {value}")
    return 0
