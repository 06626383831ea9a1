"""Service calls that survive an answer DDS drops while the server is still discovering the client.

`wait_for_service` says the client has matched the server, not that the server has matched the
client's response reader. Fast DDS gives a server 100 ms to do so, then drops the answer (the
server logs "failed to send response (timeout)"), so a first call from a busy or new process can
go unanswered. Every caller in this project therefore sends the request again when its answer is
late, and takes whichever answer comes first. Only idempotent requests go through here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from rclpy.executors import Executor
from rclpy.task import Future

SPIN_STEP_S = 0.05
# How long a tool waits for a freshly started server: a first start on a cold numba cache
# compiles every kernel (python -m iknet_core.solvers.warm_up: 55 s on 2 idle cores, 284 s
# beside two busy processes; the build runs it, so a server after `make` or colcon loads them in
# seconds). The tools that start the server stop waiting at once where it exits.
READY_TIMEOUT_S = 900.0


def spin_until(executor: Executor, done: Callable[[], bool], timeout_s: float) -> bool:
    """Spin until done() is true or the timeout passes; returns done().

    The spin step is constant: rclpy restarts its wait generator whenever spin_once's arguments
    change, and a restarted generator serves pending coroutine tasks before any new message.
    """
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        executor.spin_once(timeout_sec=SPIN_STEP_S)
    return done()


@dataclass(frozen=True)
class Answer:
    """A service's response (None if none came before the timeout) and how often it was resent.

    found is False when the service never appeared, so nothing was sent.
    """

    response: object | None
    resent: int
    found: bool = True


def call_with_resend(
    executor: Executor,
    client,
    request,
    timeout_s: float,
    resend_after_s: float = 1.0,
    max_resends: int | None = None,
) -> Answer:
    """Call, resending after resend_after_s and then at doubling intervals, until timeout_s
    (at most max_resends times: a request that takes the server seconds is computed again for
    each resend, on a server that answers one request at a time).

    The executor must spin the client's node. Requests still pending at the end are removed
    from the client, so late answers are not kept.
    """
    deadline = time.monotonic() + timeout_s
    if not client.wait_for_service(timeout_sec=timeout_s):
        return Answer(None, 0, found=False)
    pending: list[Future] = []
    wait_s = resend_after_s
    while True:
        pending.append(client.call_async(request))
        remaining_s = deadline - time.monotonic()
        last = max_resends is not None and len(pending) > max_resends
        waited_s = remaining_s if last else min(wait_s, remaining_s)
        if spin_until(executor, lambda: any(f.done() for f in pending), waited_s):
            break
        if last or wait_s >= remaining_s:
            break
        wait_s *= 2
    answered = next((future for future in pending if future.done()), None)
    for future in pending:
        if not future.done():
            client.remove_pending_request(future)
    return Answer(answered.result() if answered else None, len(pending) - 1)
