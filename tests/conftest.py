"""Fixtures for tests over real DDS: one domain per test module, no process left behind."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from domain_coordinator import domain_id

from iknet_core.resources import PANDA_MODEL, shipped
from iknet_ros.server_processes import ProcessGroup
from iknet_ros.service_calls import spin_until

REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope='module')
def ros_env() -> Iterator[dict[str, str]]:
    """Environment for this module's DDS participants: loopback discovery, its own domain."""
    keys = ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE')
    saved = {key: os.environ.get(key) for key in keys}
    # A domain reserved for this module, so test runs side by side never see each other.
    with domain_id() as domain:
        os.environ['ROS_DOMAIN_ID'] = str(domain)
        os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
        yield dict(os.environ)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def processes(ros_env: dict[str, str]) -> Iterator[ProcessGroup]:
    group = ProcessGroup(ros_env)
    try:
        yield group
    finally:
        group.stop_all()


class RosSession:
    """rclpy nodes in a context of their own, spun by one executor, with timeouts on every wait."""

    def __init__(self) -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.nodes = []

    def node(self, name: str):
        import rclpy

        node = rclpy.create_node(name, context=self.context)
        self.executor.add_node(node)
        self.nodes.append(node)
        return node

    def spin_until(self, done: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        """Spin until done() is true or the timeout passes; returns done()."""
        return spin_until(self.executor, done, timeout_s)

    def call(self, client, request, timeout_s: float = 15.0, resend: bool = True):
        """Call a service and return its response; fails the test if it does not answer.

        Resends a late request, as every client in the project does (iknet_ros/service_calls.py),
        unless resend is False (requests that move the arm).
        """
        from iknet_ros.service_calls import call_with_resend

        resend_after_s = 1.0 if resend else timeout_s
        answer = call_with_resend(self.executor, client, request, timeout_s, resend_after_s)
        assert answer.found, f'{client.srv_name} not available'
        assert answer.response is not None, f'{client.srv_name}: no answer'
        return answer.response

    def close(self) -> None:
        import rclpy

        for node in self.nodes:
            self.executor.remove_node(node)
            node.destroy_node()
        self.executor.shutdown()
        rclpy.try_shutdown(context=self.context)


@pytest.fixture
def ros(ros_env: dict[str, str]) -> Iterator[RosSession]:
    session = RosSession()
    try:
        yield session
    finally:
        session.close()


@pytest.fixture
def ros_node(ros: RosSession) -> Callable[[str], object]:
    """An rclpy node factory; the nodes are spun by the `ros` fixture's executor."""
    return ros.node


@pytest.fixture(scope='session')
def panda_model_path() -> Path:
    """The shipped Panda sampler (models/panda_mixture.pt), where it is installed."""
    try:
        return shipped(PANDA_MODEL)
    except FileNotFoundError as error:
        pytest.skip(str(error))
