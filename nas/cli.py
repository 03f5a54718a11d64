"""The ``hwnas`` command line. Each command group lives in ``nas/commands/<group>.py`` and exposes
``add_parser(subparsers)``; its handler is stored as ``func`` in the parsed namespace.

Conventions shared by every command: ``--version``; ``-q`` (errors and results only) and ``-v``
(Optuna's info messages and full tracebacks of failed trials); bad input exits 2 with one message
naming the rule, the value and the fix; a command whose work all failed exits 1; a stop
signal (Ctrl-C, SIGTERM) prints one line and exits 130.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings

from hwnas.common.errors import HwnasError
from hwnas.common.outdir import out_of_space
from nas.commands import (
    analog,
    cost,
    data,
    finalize,
    log_level,
    search,
    spaces,
    supernet,
    train,
)

# Command groups, in the order ``--help`` lists them. Imported here, not by name at run time, so
# the import contract sees the arrows; each group defers its heavy imports to its handler.
_GROUPS = (spaces, data, train, supernet, cost, analog, search, finalize)


def _version() -> str:
    import hwnas

    return f"hwnas {hwnas.__version__}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hwnas",
        description="Hardware-aware NAS with measured latency and analog-AI accuracy models.")
    parser.add_argument("--version", action="version", version=_version())
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", dest="verbosity", action="store_const", const=-1,
                      default=0, help="print only errors and results (no progress bars)")
    loud.add_argument("-v", "--verbose", dest="verbosity", action="store_const", const=1,
                      help="print library info messages and full tracebacks of failed trials")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in _GROUPS:
        group.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=log_level(args.verbosity), format="%(levelname)s %(name)s: "
                        "%(message)s")
    try:
        with warnings.catch_warnings():
            if args.verbosity < 0:
                warnings.simplefilter("ignore")
            return int(args.func(args) or 0)
    except HwnasError as err:
        print(f"hwnas: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if not out_of_space(err):
            raise
        # a disk that filled up mid-run: stored trials stay, and rerunning continues the study
        print(f"hwnas: error: the disk is full ({err.strerror}: {err.filename or 'a write'}): "
              "free space there and run the same command again (stored results stay)",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt as stop:  # Ctrl-C or a job limit's SIGTERM: what was stored stays
        # one line: the search's stop handler put the signal and what to do next in its message
        print(f"hwnas: {stop.args[0] if stop.args else 'interrupted'}", file=sys.stderr)
        return 130


if __name__ == "__main__":
    code = main()
    if "RANK" in os.environ:  # a torchrun rank (``supernet train --nproc``): see exit_rank
        # imported here, not at the top: the CLI loads torch only for commands that use it
        from hwnas.train.ddp import exit_rank

        exit_rank(code)
    sys.exit(code)
