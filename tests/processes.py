"""Node processes started by tests, the demo and benchmarks, and always ended: no DDS
participant is left behind to keep discovering."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# How long a test waits for a node's services: a server's first start on a cold numba cache
# compiles its kernels (about a minute, several on a busy 2-core machine; the wait ends as soon
# as they are up).
NODE_START_S = 300.0


class ProcessGroup:
    """Starts processes in sessions of their own; stop_all sends SIGINT, then SIGKILL."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
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

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all()
