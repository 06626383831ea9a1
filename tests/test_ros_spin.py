"""spin_until_stopped: a shutdown in the middle of a spin is a normal stop, a real fault is not."""

import pytest
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

from iknet_core.ros_spin import run_node, spin_until_stopped


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


def test_run_node_tears_down_when_building_the_node_fails(ros_env):
    def broken_node():
        raise ValueError('bad parameter')

    with pytest.raises(ValueError, match='bad parameter'):
        run_node(broken_node)
    assert not rclpy.ok()  # the context was shut down on the way out
