"""Servers a tool starts itself (service_bench, the demo): waiting for them to come up ends at
once, with the server's own last lines, where one exits first, instead of after the deadline."""

from __future__ import annotations

import dataclasses
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from rclpy.executors import Executor

from iknet_ros.service_calls import spin_until

# Lines of a server's output shown when it exits before it is up.
LOG_LINES_SHOWN = 5


@dataclasses.dataclass(frozen=True)
class Server:
    """A server process and the file its output goes to."""

    name: str
    process: subprocess.Popen
    log: Path

    def exited(self) -> str | None:
        """Why the server is gone (its exit status and last lines), or None while it runs."""
        if self.process.poll() is None:
            return None
        text = self.log.read_text(errors='replace') if self.log.is_file() else ''
        last = '\n'.join(text.strip().splitlines()[-LOG_LINES_SHOWN:]) or '(no output)'
        return f'{self.name} exited with status {self.process.returncode}; its last lines:\n{last}'


def wait_until_up(
    executor: Executor,
    up: Callable[[], bool],
    servers: Sequence[Server],
    timeout_s: float,
    what: str,
) -> None:
    """Spin until up() is true; SystemExit naming the server that exited first, or what did not
    come up within timeout_s."""

    def up_or_gone() -> bool:
        return up() or any(server.exited() for server in servers)

    spin_until(executor, up_or_gone, timeout_s)
    for server in servers:
        if reason := server.exited():
            raise SystemExit(reason)
    if not up():
        raise SystemExit(f'{what} did not come up within {timeout_s:.0f} s')
