"""A node process's life: a shutdown mid-spin is a stop, a real fault is not, and no signal
interrupts the tear-down."""

import os
import signal
import time

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from rclpy.node import Node

from iknet.srv import SolveIK
from iknet_ros.node_runtime import STOP_SIGNALS, run_node, spin_until_stopped


@pytest.fixture
def default_context(ros_env):
    """The default rclpy context, which every node's main() uses."""
    rclpy.init()
    yield
    rclpy.try_shutdown()


def test_a_shutdown_while_spinning_is_a_stop(default_context):
    node = rclpy.create_node('told_to_stop')
    executor = SingleThreadedExecutor()
    executor.add_node(node)

    def spin() -> None:
        rclpy.shutdown()  # what the SIGTERM handler's thread does between two spins
        executor.spin_once(timeout_sec=0.1)

    assert spin_until_stopped(spin)
    executor.shutdown()
    node.destroy_node()


def test_a_spin_that_returns_was_not_stopped(default_context):
    assert not spin_until_stopped(lambda: None)


def test_a_wait_set_fault_on_a_valid_context_is_raised(default_context):
    def spin() -> None:
        raise _rclpy.RCLError('a fault unrelated to shutdown')

    with pytest.raises(_rclpy.RCLError, match='unrelated'):
        spin_until_stopped(spin)


@pytest.fixture
def signal_handlers():
    """run_node leaves SIGINT, SIGTERM and SIGHUP ignored (its process exits); pytest's come
    back (a SIGHUP left ignored is inherited by every process a later test starts)."""
    saved = {number: signal.getsignal(number) for number in (*STOP_SIGNALS, signal.SIGHUP)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


def test_run_node_tears_down_when_building_the_node_fails(ros_env, signal_handlers):
    def broken_node():
        raise ValueError('bad parameter')

    with pytest.raises(ValueError, match='bad parameter'):
        run_node(broken_node)
    assert not rclpy.ok()  # the context was shut down on the way out


def test_a_build_that_fails_on_a_context_shut_down_is_a_stop(ros_env, signal_handlers):
    """Ctrl-C while the node is built: rclpy's handler shuts the context down, and the next
    rclpy call fails before Python's handler has run."""

    def stopped_half_way() -> Node:
        node = rclpy.create_node('stopped_half_way')
        rclpy.shutdown()  # what rclpy's signal handler does first
        node.create_service(SolveIK, '~/solve_ik', lambda request, response: response)
        raise AssertionError('a service was made on a context that was shut down')

    assert run_node(stopped_half_way) is None
    assert not rclpy.ok()


class InterruptedTwice(Node):
    """Ctrl-C under `ros2 launch`: one SIGINT while spinning, another during the tear-down."""

    def __init__(self) -> None:
        super().__init__('interrupted_twice')
        self.torn_down = False
        self.create_timer(0.01, lambda: os.kill(os.getpid(), signal.SIGINT))

    def destroy_node(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        # Where Python's default handler would raise KeyboardInterrupt: a sleep is interrupted by
        # any handler that raises, and nothing can be waited on for a signal that is ignored.
        time.sleep(0.1)
        self.torn_down = True
        super().destroy_node()


def test_a_second_signal_does_not_interrupt_the_tear_down(ros_env, signal_handlers):
    node = run_node(InterruptedTwice)
    assert node is not None and node.torn_down
    assert not rclpy.ok()


def test_a_signal_while_starting_stops_at_once(ros_env, signal_handlers):
    def slow_start() -> Node:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30.0)  # a model loading; the signal interrupts it
        raise AssertionError('the signal did not stop the start-up')

    started = time.monotonic()
    assert run_node(slow_start) is None
    assert time.monotonic() - started < 10.0
    assert not rclpy.ok()


def test_an_outcome_is_logged_at_either_severity_from_one_place():
    # rclpy ties one severity to each logging call site: a stop that held the arm and one that
    # could not, logged from one line, raised ValueError and the server exited.
    import rclpy.logging

    from iknet_ros.arm_command import log_outcome

    logger = rclpy.logging.get_logger('outcomes')
    for expected in (True, False, True, False):
        log_outcome(logger, expected, 'an outcome')
