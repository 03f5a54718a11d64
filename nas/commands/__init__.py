"""One module per ``hwnas`` command group; each exposes ``add_parser(subparsers)``."""

from __future__ import annotations

import logging

__all__ = ["log_level"]


def log_level(verbosity: int) -> int:
    """The logging level of ``-q`` (-1), the default (0) and ``-v`` (1)."""
    return {-1: logging.ERROR, 0: logging.WARNING, 1: logging.INFO}[verbosity]
