"""Stop signals taken as Ctrl-C by the command-line tools, with the shell's exit status."""

from __future__ import annotations

import signal
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


@contextmanager
def signals_as_interrupt(
    signals: Sequence[signal.Signals] = (signal.SIGINT, signal.SIGTERM),
) -> Iterator[list[int]]:
    """Within it, each of signals raises KeyboardInterrupt in the main thread, as Ctrl-C does
    (SIGTERM: kill, a job scheduler's stop, launch's shutdown). Yields the signals received,
    SIGINT first (Ctrl-C where Python raised it itself): exit with 128 + the last. The handlers
    before come back after."""
    received: list[int] = [signal.SIGINT]

    def interrupt(number: int, frame: object) -> None:
        received.append(number)
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, interrupt) for number in signals}
    try:
        yield received
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
