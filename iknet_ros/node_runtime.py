"""A node process's life for every node's main(): build, spin until stopped, tear down.

Under `ros2 launch`, Ctrl-C reaches each node twice: the terminal sends SIGINT to the whole process
group and launch forwards another. rclpy's signal handler shuts the context down from another
thread (which wakes the executor) and then calls the Python handler installed before it. Python's
default one raises KeyboardInterrupt wherever the main thread is: half-way through a callback, in
a file's close, in destroy_node; a recording then kept `status: recording`. So here:

- while the node is being built, SIGINT or SIGTERM (or SIGHUP, a closed terminal, sent on as
  SIGTERM) raises KeyboardInterrupt: nothing to save yet, and a slow start-up stops at once.
  rclpy's handler may shut the context down before Python's runs (it runs at the next check of
  the main thread), so a half-built node's next rclpy call fails first: a build that fails on a
  context shut down is a stop too;
- while it spins, a signal only shuts the context down: the spin ends and the tear-down starts;
- from the tear-down on, SIGINT, SIGTERM and SIGHUP are ignored, so nothing interrupts the
  flush, the metadata or destroy_node; the process is about to exit.

A shutdown in the middle of a spin reaches the main thread as ExternalShutdownException, or as an
RCLError from a wait set made just after the context went invalid; both are a normal stop.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import TypeVar

import rclpy
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node
from rclpy.signals import uninstall_signal_handlers

from iknet_ros.node_parameters import warn_of_unknown

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
HANGUP = getattr(signal, 'SIGHUP', None)  # none on Windows
SPIN_PERIOD_S = 0.1  # the longest wait before a node checks it should stop

N = TypeVar('N', bound=Node)


class StopSignals:
    """Python's handler of SIGINT and SIGTERM, which rclpy's own handler calls after its own (and
    of SIGHUP, sent on as SIGTERM)."""

    def __init__(self) -> None:
        self.received = False
        self.starting = True
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_signal)
        # A closed terminal or a lost ssh session (SIGHUP) ends a node as SIGTERM does, with its
        # tear-down: by default it killed a recording before its last flush. Unless the process
        # was started to ignore it (nohup).
        if HANGUP is not None and signal.getsignal(HANGUP) is not signal.SIG_IGN:
            signal.signal(HANGUP, self._on_hangup)

    def _on_signal(self, number: int, frame: object) -> None:
        self.received = True
        if self.starting:
            raise KeyboardInterrupt  # still starting: stop now

    def _on_hangup(self, number: int, frame: object) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # rclpy's handler and ours, as for SIGTERM

    def ignore(self) -> None:
        """Nothing may interrupt the tear-down from here: not rclpy's handler, not Python's (a
        signal that came before may still be pending: it only counts as received)."""
        self.starting = False
        uninstall_signal_handlers()
        for number in (*STOP_SIGNALS, *([HANGUP] if HANGUP is not None else [])):
            signal.signal(number, signal.SIG_IGN)


def spin_until_stopped(spin: Callable[[], None]) -> bool:
    """Run spin(); True if it ended because the node was told to stop, False if it returned."""
    try:
        spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        return True
    except _rclpy.RCLError:
        if rclpy.ok():  # the context is fine, so this is a real fault
            raise
        return True
    return False


def run_node(
    make_node: Callable[[], N],
    args: Sequence[str] | None = None,
    *,
    finished: Callable[[N], bool] | None = None,
) -> N | None:
    """A node process's whole main(): init, build, spin until stopped or finished, tear down.

    One thread spins the node until a signal comes or finished(node) is true. Returns the node,
    destroyed, or None if a signal stopped the process while the node was being built. Errors from
    building or spinning the node propagate after the tear-down. Leaves SIGINT, SIGTERM and SIGHUP
    ignored: the process is about to exit.
    """
    stop = StopSignals()
    node: N | None = None
    executor: SingleThreadedExecutor | None = None
    initialized = False
    try:
        try:
            rclpy.init(args=args)
            initialized = True
            node = make_node()
            warn_of_unknown(node)
            executor = SingleThreadedExecutor()
            executor.add_node(node)
        except (KeyboardInterrupt, Exception):
            # Told to stop while starting; a half-built node may have failed on the context
            # rclpy's handler shut down before Python's handler ran.
            if stop.received or (initialized and not rclpy.ok()):
                return None
            raise
        stop.starting = False
        spin_until_stopped(lambda: _spin(executor, node, finished))
    except KeyboardInterrupt:
        if not stop.received:
            raise
        return None  # Python's handler ran late, in the failed build's own handling
    finally:
        stop.ignore()
        if executor is not None:
            # Bounded: a coroutine still awaiting (a move's controller, a path's solve) must not
            # hold the tear-down where an rclpy release waits for outstanding callbacks.
            executor.shutdown(timeout_sec=1.0)
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return node


def _spin(executor: SingleThreadedExecutor, node: N, finished: Callable[[N], bool] | None) -> None:
    """Spin until the context shuts down or finished(node), never waiting longer than
    SPIN_PERIOD_S at a time: a shutdown whose wake-up the wait missed still ends the spin (once,
    after a session of requests, SIGINT left ik_server waiting in rcl_wait for good under
    executor.spin())."""
    while executor.context.ok() and (finished is None or not finished(node)):
        executor.spin_once(timeout_sec=SPIN_PERIOD_S)
