"""Signal handlers installed for a block of work and restored after it (``handling_signals``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Any

Handler = Callable[[int, FrameType | None], Any]
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What a job limit or a user sends to end a run: a cluster's SIGTERM, a terminal's Ctrl-C."""


def on_main_thread() -> bool:
    """Whether this thread may install signal handlers (Python lets only the main thread)."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def handling_signals(handler: Handler, signals: Sequence[signal.Signals] = STOP_SIGNALS
                     ) -> Iterator[bool]:
    """Run the block with ``handler`` for ``signals``; the previous handlers come back after it,
    also when it raises. Yields whether the handler was installed: off the main thread nothing
    is (Python refuses), and the block runs under the handlers it already had."""
    if not on_main_thread():
        yield False
        return
    before = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield True
    finally:
        for sig, old in before.items():
            # None: a handler installed outside Python, which Python cannot reinstall
            signal.signal(sig, signal.SIG_DFL if old is None else old)
