"""Shared by the simulator and recorder tests: start the two nodes, read what they wrote."""

from __future__ import annotations

import csv
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from iknet_core.resources import installed_executable as executable
from iknet_ros.server_processes import ProcessGroup


def ros_args(**params: object) -> list[str]:
    """`--ros-args -p name:=value ...`; booleans as true/false."""
    args = ['--ros-args']
    for name, value in params.items():
        text = str(value).lower() if isinstance(value, bool) else str(value)
        args += ['-p', f'{name}:={text}']
    return args


def start_sim(processes: ProcessGroup, log_dir: Path, **params: object) -> subprocess.Popen:
    return processes.start(executable('omx_sim'), *ros_args(**params), log=log_dir / 'sim.log')


def start_recorder(
    processes: ProcessGroup, log_dir: Path, node_name: str = 'recorder', **params: object
) -> subprocess.Popen:
    args = [*ros_args(**params), '-r', f'__node:={node_name}']
    return processes.start(executable('recorder'), *args, log=log_dir / f'{node_name}.log')


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f'timed out after {timeout_s} s waiting for {what}'
        time.sleep(0.05)


def read_csv(path: Path) -> tuple[list[str], list[list[str]]]:
    """Header and complete rows; a last line cut short by a kill (no newline) is left out."""
    text = path.read_text(encoding='utf-8')
    lines = text.split('\n')
    complete = lines[:-1]  # after the final newline: '' or a partial row
    rows = list(csv.reader(complete))
    return (rows[0], rows[1:]) if rows else ([], [])


def stamp_of(row: list[str]) -> int:
    return int(row[0]) * 10**9 + int(row[1])
