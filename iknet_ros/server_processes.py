"""Node processes a tool starts itself (service_bench, the demo, the tests), always ended, so no
DDS participant is left behind to keep discovering; waiting for servers to come up ends at once,
with the server's own last lines, where one exits first, instead of after the deadline."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from rclpy.executors import Executor

from iknet_ros.service_calls import spin_until

# Lines of a server's output shown when it exits before it is up.
LOG_LINES_SHOWN = 5


class ProcessGroup:
    """Starts processes in sessions of their own; stop_all (or the end of a with block) sends
    each session SIGINT, then SIGKILL to those still running after grace_s."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.env = env
        self.processes: list[subprocess.Popen] = []

    def start(self, *command: str | Path, log: Path | None = None) -> subprocess.Popen:
        """command started with its output (stdout and stderr) in log, else discarded."""
        with open(log, 'wb') if log else open(os.devnull, 'wb') as output:
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

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()


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
