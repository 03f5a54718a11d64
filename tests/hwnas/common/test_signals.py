"""``handling_signals``: the handler gets the block's signals, the previous handlers come back."""

from __future__ import annotations

import os
import signal
import threading
from types import FrameType

import pytest

from hwnas.common.signals import STOP_SIGNALS, handling_signals


class _Caught(Exception):
    pass


def _previous(signum: int, _frame: FrameType | None) -> None:  # a handler to be restored
    raise AssertionError(f"the previous handler got signal {signum}")


@pytest.fixture
def previous():  # noqa: ANN201 - a known previous handler for both signals, removed after
    before = {sig: signal.signal(sig, _previous) for sig in STOP_SIGNALS}
    yield _previous
    for sig, old in before.items():
        signal.signal(sig, old)


@pytest.mark.parametrize("sig", STOP_SIGNALS)
def test_a_signal_in_the_block_reaches_the_handler(previous, sig: signal.Signals  # noqa: ANN001
                                                   ) -> None:
    got: list[int] = []
    with handling_signals(lambda signum, _frame: got.append(signum)) as installed:
        assert installed
        os.kill(os.getpid(), sig)  # Python runs the handler before the next bytecode here
        assert got == [sig]
    assert all(signal.getsignal(s) is previous for s in STOP_SIGNALS)


def test_the_previous_handlers_come_back_when_the_block_raises(previous) -> None:  # noqa: ANN001
    def handler(signum: int, _frame: FrameType | None) -> None:
        raise _Caught(signal.Signals(signum).name)

    with pytest.raises(_Caught, match="SIGTERM"), handling_signals(handler):
        assert all(signal.getsignal(s) is handler for s in STOP_SIGNALS)
        os.kill(os.getpid(), signal.SIGTERM)
    assert all(signal.getsignal(s) is previous for s in STOP_SIGNALS)
    with pytest.raises(ValueError, match="not a signal"), handling_signals(handler):
        raise ValueError("not a signal")
    assert all(signal.getsignal(s) is previous for s in STOP_SIGNALS)


def test_only_the_given_signals_are_handled(previous) -> None:  # noqa: ANN001
    with handling_signals(lambda *_: None, signals=[signal.SIGTERM]):
        assert signal.getsignal(signal.SIGINT) is previous
        assert signal.getsignal(signal.SIGTERM) is not previous
    assert signal.getsignal(signal.SIGTERM) is previous


def test_off_the_main_thread_nothing_is_installed(previous) -> None:  # noqa: ANN001
    seen: list[object] = []

    def work() -> None:
        with handling_signals(lambda *_: None) as installed:
            seen.append(installed)
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [False, previous]
