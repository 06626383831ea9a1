"""Requests that move the arm served one at a time, in the order the executor took them."""

from __future__ import annotations

from collections import deque

from rclpy.task import Future


class Turns:
    """Requests served one at a time in the order they were taken, on the executor thread
    (rclpy has no asyncio lock): `async with turns:`. A callback group would start a request's
    coroutine only when the one before had ended: what came before a stop could not be told
    from what came after it."""

    def __init__(self) -> None:
        self._busy = False
        self._waiting: deque[Future] = deque()

    def ahead(self) -> int:
        """How many requests a request asked now would wait for."""
        return int(self._busy) + len(self._waiting)

    async def __aenter__(self) -> None:
        if self._busy:
            turn = Future()
            self._waiting.append(turn)
            await turn  # handed on by the one before: still busy
        self._busy = True

    async def __aexit__(self, *exception: object) -> None:
        if self._waiting:
            self._waiting.popleft().set_result(None)
        else:
            self._busy = False
