"""Long solver work (a path: seconds for thousands of waypoints and many starts) on a thread of
its own, awaited from a service coroutine: the node's one executor thread stays free meanwhile
for a `~/stop`, joint states and a legacy path's goals falling due.

The result is handed back on the executor thread (a guard condition's callback sets the future
the coroutine awaits), as a service client's response is: a task resumes the same way on Humble
and later. One worker thread, so work is computed one piece after another; a daemon thread of
its own rather than concurrent.futures', whose threads are joined at exit: a stopped server
would wait out a long path's solve first."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

T = TypeVar('T')


class SolverWorker:
    def __init__(self, node: Node) -> None:
        self._work: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._finished: list[tuple[Future, Any, BaseException | None]] = []
        self._closed = False
        self._wake = node.create_guard_condition(
            self._hand_back, callback_group=MutuallyExclusiveCallbackGroup()
        )
        threading.Thread(target=self._serve, name='iknet-solver', daemon=True).start()

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """function(*args) computed on the worker thread; its exception raised here."""
        awaited = Future()
        self._work.put((awaited, function, args))
        return await awaited

    def close(self) -> None:
        """Before the node is destroyed: no result is handed back any more (the work in
        progress runs on, and ends with the process)."""
        with self._lock:
            self._closed = True
        self._work.put(None)

    def _serve(self) -> None:
        """The worker thread: each piece of work in turn, its result queued for _hand_back."""
        while (work := self._work.get()) is not None:
            awaited, function, args = work
            result, error = None, None
            try:
                result = function(*args)
            except BaseException as raised:  # raised in the awaiting coroutine instead: a
                error = raised  # thread that died would hold every later path's turn
            with self._lock:
                if self._closed:
                    return
                self._finished.append((awaited, result, error))
                self._wake.trigger()

    def _hand_back(self) -> None:
        """On the executor thread: every finished work's result to its awaiting coroutine."""
        with self._lock:
            finished, self._finished = self._finished, []
        for awaited, result, error in finished:
            if error is not None:
                awaited.set_exception(error)
            else:
                awaited.set_result(result)
