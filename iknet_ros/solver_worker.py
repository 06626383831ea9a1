"""Long solver work (a path: seconds for thousands of waypoints and many starts) on a thread of
its own, awaited from a service coroutine: the node's one executor thread stays free meanwhile
for a `~/stop`, joint states and a legacy path's goals falling due.

The result is handed back on the executor thread (a guard condition's callback sets the future
the coroutine awaits), as a service client's response is: a task resumes the same way on Humble
and later. One worker thread: requests that reach it are computed one after another."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future as ThreadFuture
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node
from rclpy.task import Future

T = TypeVar('T')


class SolverWorker:
    def __init__(self, node: Node) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix='iknet-solver')
        self._lock = threading.Lock()
        self._finished: list[tuple[Future, ThreadFuture]] = []
        self._wake = node.create_guard_condition(
            self._hand_back, callback_group=MutuallyExclusiveCallbackGroup()
        )

    async def run(self, function: Callable[..., T], *args: object) -> T:
        """function(*args) computed on the worker thread; its exception raised here."""
        awaited = Future()
        work = self._pool.submit(function, *args)
        work.add_done_callback(lambda done: self._on_done(awaited, done))
        return await awaited

    def close(self) -> None:
        """No further work; work in progress ends on its own (the process waits for it)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def _on_done(self, awaited: Future, work: ThreadFuture) -> None:
        """On the worker thread: queue the result and wake the executor."""
        with self._lock:
            self._finished.append((awaited, work))
        self._wake.trigger()

    def _hand_back(self) -> None:
        """On the executor thread: every finished work's result to its awaiting coroutine."""
        with self._lock:
            finished, self._finished = self._finished, []
        for awaited, work in finished:
            if work.cancelled():  # queued when the node closed
                awaited.set_exception(RuntimeError('the server is shutting down'))
            elif work.exception() is not None:
                awaited.set_exception(work.exception())
            else:
                awaited.set_result(work.result())
