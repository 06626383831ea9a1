"""Fixtures for tests over real DDS: one domain per test module, no process left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def executable(name: str) -> Path:
    """The installed `ros2 run iknet NAME` executable (install/lib/iknet/NAME after the build)."""
    for prefix in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep):
        path = Path(prefix) / 'lib' / 'iknet' / name
        if prefix and path.is_file():
            return path
    raise FileNotFoundError(f'iknet executable {name!r} not found; run `make test`, source env.sh')


@pytest.fixture(scope='module')
def ros_env(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """Environment for this module's DDS participants: loopback discovery, its own domain."""
    keys = ('ROS_DOMAIN_ID', 'ROS_AUTOMATIC_DISCOVERY_RANGE')
    saved = {key: os.environ.get(key) for key in keys}
    # Distinct modules get distinct domains, so tests running side by side never see each other.
    domain = 1 + (zlib.crc32(f'{request.module.__name__}{os.getpid()}'.encode()) % 100)
    os.environ['ROS_DOMAIN_ID'] = str(domain)
    os.environ['ROS_AUTOMATIC_DISCOVERY_RANGE'] = 'LOCALHOST'
    yield dict(os.environ)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


class ProcessGroup:
    """Starts node processes and always ends them: SIGINT, then SIGKILL after a grace period."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.processes: list[subprocess.Popen] = []

    def start(self, *command: str | Path, log: Path | None = None) -> subprocess.Popen:
        output = open(log, 'w') if log else subprocess.DEVNULL  # noqa: SIM115 - closed with the process
        process = subprocess.Popen(
            [str(part) for part in command],
            env=self.env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def python(self, *args: str | Path, log: Path | None = None) -> subprocess.Popen:
        return self.start(sys.executable, *args, log=log)

    def stop_all(self, grace_s: float = 5.0) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGINT)
        deadline = time.monotonic() + grace_s
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest.fixture
def processes(ros_env: dict[str, str]) -> Iterator[ProcessGroup]:
    group = ProcessGroup(ros_env)
    try:
        yield group
    finally:
        group.stop_all()


@pytest.fixture
def ros_node(ros_env: dict[str, str]) -> Iterator[Callable[[str], object]]:
    """An rclpy node factory in a context of its own; spin with rclpy.spin_* and a timeout."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    nodes = []

    def make(name: str):
        node = rclpy.create_node(name, context=context)
        nodes.append(node)
        return node

    try:
        yield make
    finally:
        for node in nodes:
            node.destroy_node()
        rclpy.try_shutdown(context=context)
