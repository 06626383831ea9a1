"""Running a node until it is told to stop, for every node's main(). Imports rclpy: nodes only.

rclpy's signal handler shuts the context down from another thread, so Ctrl-C or SIGTERM reaches
the main thread as KeyboardInterrupt, ExternalShutdownException, or an RCLError from a wait set
made just after the context went invalid. All three are a normal stop; the last one was a
traceback and exit code 1 from `recorder` on SIGTERM before it had a home here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node


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


def run_node(make_node: Callable[[], Node], args: Sequence[str] | None = None) -> None:
    """A plain node's whole main(): init, build, spin until stopped, tear down.

    Errors from building or spinning the node propagate after the tear-down.
    """
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        spin_until_stopped(lambda: rclpy.spin(node))
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
