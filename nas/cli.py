"""The ``hwnas`` command line. Each command group lives in ``nas/commands/<group>.py`` and exposes
``add_parser(subparsers)``; its handler is stored as ``func`` in the parsed namespace."""

from __future__ import annotations

import argparse
import importlib
import sys

from hwnas.common.errors import HwnasError

# Command groups, in the order ``--help`` lists them.
_GROUPS = ("spaces", "data", "train", "supernet", "cost", "analog", "search", "finalize")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hwnas",
        description="Hardware-aware NAS with measured latency and analog-AI accuracy models.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in _GROUPS:
        importlib.import_module(f"nas.commands.{group}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except HwnasError as err:
        print(f"hwnas: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
