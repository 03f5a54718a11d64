"""`hwnas data` commands."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("data", help="(not yet available)")
    p.set_defaults(func=lambda args: print("hwnas data: not yet available") or 1)
