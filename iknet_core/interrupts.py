"""Stop signals taken as Ctrl-C by the command-line tools, with the shell's exit status."""

from __future__ import annotations

import functools
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

Main = Callable[[Sequence[str] | None], int]


@contextmanager
def signals_as_interrupt(
    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[list[int]]:
    """Within it, each of signals raises KeyboardInterrupt in the main thread, as Ctrl-C does
    (SIGTERM: kill, a job scheduler's stop, launch's shutdown). Yields the signals received,
    SIGINT first (Ctrl-C where Python raised it itself): exit with 128 + the last. The handlers
    before come back after. A signal the process was started ignoring (a script's background
    job's SIGINT) stays ignored."""
    received: list[int] = [signal.SIGINT]

    def interrupt(number: int, frame: object) -> None:
        received.append(number)
        raise KeyboardInterrupt

    with _handled(signals, interrupt):
        yield received


@contextmanager
def signals_held(
    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[None]:
    """Within it, each of signals only waits; as it ends, those that came are raised again, to
    the handlers from before: for a write that must be whole (a training snapshot). Handlers,
    not a signal mask: a mask holds a signal back from the main thread only, and Python runs
    its handlers there whichever thread the signal reached. Main thread only."""
    came: list[int] = []
    try:
        with _handled(signals, lambda number, frame: came.append(number)):
            yield
    finally:
        for number in came:
            signal.raise_signal(number)


@contextmanager
def _handled(signals: Sequence[signal.Signals], handler: Callable) -> Iterator[None]:
    """Within it, handler handles each of signals but one the process was started ignoring (a
    script's background job's SIGINT: it stays ignored); the handlers before come back after."""
    previous = {
        number: signal.signal(number, handler)
        for number in signals
        if signal.getsignal(number) is not signal.SIG_IGN
    }
    try:
        yield
    finally:
        for number, handler_before in previous.items():
            signal.signal(number, handler_before)


def exits_on_interrupt(prog: str, left: str = 'nothing was written') -> Callable[[Main], Main]:
    """A tool's main that Ctrl-C or SIGTERM ends with one line, '{prog}: interrupted; {left}',
    and the shell's status (128 + the signal), not a traceback. left: what the work leaves (a
    benchmark writes its report at the end)."""

    def decorate(main: Main) -> Main:
        @functools.wraps(main)
        def interruptible(argv: Sequence[str] | None = None) -> int:
            with signals_as_interrupt([signal.SIGTERM]) as stopped_by:  # SIGINT: Python's own
                try:
                    return main(argv)
                except KeyboardInterrupt:
                    print(f'{prog}: interrupted; {left}', file=sys.stderr)
                    return 128 + stopped_by[-1]

        return interruptible

    return decorate
