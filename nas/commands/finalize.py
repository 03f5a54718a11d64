"""`hwnas finalize` commands."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("finalize", help="(not yet available)")
    p.set_defaults(func=lambda args: print("hwnas finalize: not yet available") or 1)
