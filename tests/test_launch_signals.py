"""Ctrl-C under `ros2 launch`, as the terminal does it: the nodes of each launch file exit 0, with
no traceback, and a recording's files and metadata are complete.

The terminal sends SIGINT to its foreground process group (launch and every node) and launch
forwards one more to each node, so a second SIGINT lands while the nodes tear down. Launch files
cannot be executed here; these processes in one group stand in for them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from recording_helpers import read_csv, ros_args, wait_for

from iknet.srv import SolveIK
from iknet_core.csv_schema import KINEMATICS_POSE_COLUMNS, joint_states_columns
from iknet_core.resources import installed_executable as executable
from iknet_ros.qos import SERVICE_QUEUE_QOS

RESIGNAL_PERIOD_S = 0.01  # while a node tears down, another SIGINT at least this often
EXIT_DEADLINE_S = 20.0  # launch escalates to SIGTERM after 5 s; this only bounds a broken node


class ForegroundGroup:
    """Processes in one process group of this session, like a terminal's foreground job."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.processes: dict[str, subprocess.Popen] = {}
        self.pgid = 0  # 0: the first process leads a new group

    def start(self, name: str, *command: str | Path) -> subprocess.Popen:
        with open(self.log(name), 'w') as output:
            process = subprocess.Popen(
                [str(part) for part in command],
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                process_group=self.pgid,
            )
        self.pgid = self.pgid or process.pid
        self.processes[name] = process
        return process

    def log(self, name: str) -> Path:
        return self.log_dir / f'{name}.log'

    def interrupt(self) -> None:
        """SIGINT to the whole group, as Ctrl-C in a terminal (or launch forwarding it)."""
        with contextlib.suppress(ProcessLookupError):  # every member has exited
            os.killpg(self.pgid, signal.SIGINT)

    def ctrl_c(self) -> dict[str, int]:
        """SIGINT to the group, then again until every process has exited; their exit codes.

        The second SIGINT follows at once, as launch forwards it; the repeats make sure some land
        in each node's tear-down (flush, metadata, destroy_node), whenever that happens.
        """
        self.interrupt()
        self.interrupt()
        deadline = time.monotonic() + EXIT_DEADLINE_S
        for name, process in self.processes.items():
            while True:
                try:
                    process.wait(timeout=RESIGNAL_PERIOD_S)
                    break
                except subprocess.TimeoutExpired:
                    assert time.monotonic() < deadline, f'{name} still running after Ctrl-C'
                    self.interrupt()
        return {name: process.returncode for name, process in self.processes.items()}

    def kill(self) -> None:
        if any(process.poll() is None for process in self.processes.values()):
            os.killpg(self.pgid, signal.SIGKILL)
        for process in self.processes.values():
            process.wait()


@pytest.fixture
def group(ros_env: dict[str, str], tmp_path: Path) -> Iterator[ForegroundGroup]:
    foreground = ForegroundGroup(ros_env, tmp_path)
    try:
        yield foreground
    finally:
        foreground.kill()  # only after a failure is anything left


def assert_clean_exits(group: ForegroundGroup, codes: dict[str, int]) -> None:
    for name, code in codes.items():
        log = group.log(name).read_text()
        assert code == 0, f'{name} exited with {code}:\n{log}'
        assert 'Traceback' not in log, f'{name}:\n{log}'


def test_record_launch_ctrl_c_leaves_a_complete_recording(group, tmp_path):
    """record.launch.xml use_sim:=true: the simulator moved by hand, and the recorder."""
    group.start('omx_sim', executable('omx_sim'), *ros_args(torque_enabled=False))
    recorder = group.start(
        'recorder',
        executable('recorder'),
        *ros_args(output_dir=tmp_path / 'out', recording_name='run'),
    )
    directory = tmp_path / 'out' / 'run'
    joint_states, poses = directory / 'joint_states.csv', directory / 'kinematics_pose.csv'

    def rows(path: Path) -> int:
        return len(read_csv(path)[1]) if path.exists() else 0

    wait_for(lambda: rows(joint_states) > 100 and rows(poses) > 100, 60.0, 'rows of both topics')
    assert_clean_exits(group, group.ctrl_c())

    for path, columns in (
        (joint_states, joint_states_columns(5)),
        (poses, KINEMATICS_POSE_COLUMNS),
    ):
        assert path.read_text().endswith('\n'), f'{path.name}: last row cut'
        header, body = read_csv(path)
        assert header == list(columns)
        assert all(len(row) == len(columns) for row in body)
    metadata = json.loads((directory / 'metadata.json').read_text())
    assert metadata['status'] == 'complete', metadata
    assert metadata['stop_reason'] == 'stopped by signal'
    assert metadata['pid'] == recorder.pid
    assert metadata['streams']['joint_states']['written'] == rows(joint_states)
    assert metadata['streams']['kinematics_pose']['written'] == rows(poses)


def test_demo_launch_ctrl_c_stops_both_nodes_cleanly(group, ros):
    """demo.launch.xml (and ik_server.launch.xml use_sim:=true): the simulator and the server."""
    group.start('omx_sim', executable('omx_sim'))
    group.start('ik_server', executable('ik_server'), *ros_args(device='cpu'))
    client = ros.node('ctrl_c_witness').create_client(
        SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS
    )
    # ik_server loads its model and solver kernels first: seconds, more on a cold numba cache.
    assert ros.spin_until(client.service_is_ready, 180.0), (
        '/ik_server/solve_ik did not come up:\n' + group.log('ik_server').read_text()
    )
    assert_clean_exits(group, group.ctrl_c())


def python_has_started_importing(pid: int) -> bool:
    """Whether the process has numpy's compiled core mapped: Python's own SIGINT handler is in
    place and the imports are under way (numpy loads first; torch, rclpy and numba after it)."""
    with contextlib.suppress(OSError):
        return '_multiarray_umath' in Path(f'/proc/{pid}/maps').read_text()
    return False


@pytest.mark.parametrize(
    ('name', 'args', 'status'),
    [
        ('ik_server', (), 0),  # a node: launch reports it finished cleanly
        ('omx_sim', (), 0),
        ('ik_client', ('--x', '0.2', '--y', '0.0', '--z', '0.1'), 128 + signal.SIGINT),
        ('iknet-train', ('--synthetic', '1000'), 128 + signal.SIGINT),  # pip's console script
    ],
)
def test_ctrl_c_while_an_executable_loads_exits_without_a_traceback(
    ros_env, tmp_path, name, args, status
):
    """A Ctrl-C right after `ros2 launch`, `ros2 run` or an iknet-* command, while the imports
    still load, ends the process with its status for a stop and no traceback (it printed one
    from inside torch)."""
    log = tmp_path / f'{name}.log'
    pip_script = Path(sys.executable).with_name(name)
    command = pip_script if name.startswith('iknet-') else executable(name)
    with open(log, 'w') as output:
        process = subprocess.Popen(
            [str(command), *args],
            env=ros_env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for(lambda: python_has_started_importing(process.pid), 60.0, f'{name} importing')
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=EXIT_DEADLINE_S)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    text = log.read_text()
    assert 'Traceback' not in text, text
    assert code == status, f'{name} exited with {code}:\n{text}'


def test_a_command_whose_reader_went_ends_without_a_traceback(tmp_path):
    """`iknet-chain --chain panda | head -1`: the reader gone, the table's writes fail."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the command writes a line: each write fails
    # Block-buffered, as a pipe is unless PYTHONUNBUFFERED is set: the table fails as it is
    # flushed, after main returned.
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONUNBUFFERED'}
    with open(tmp_path / 'stderr', 'w') as errors:
        process = subprocess.run(
            [str(Path(sys.executable).with_name('iknet-chain')), '--chain', 'panda'],
            stdout=write_end, stderr=errors, env=env, timeout=300, check=False,
        )  # fmt: skip
    os.close(write_end)
    text = (tmp_path / 'stderr').read_text()
    assert 'Traceback' not in text and 'BrokenPipeError' not in text, text
    assert process.returncode == 128 + signal.SIGPIPE


def test_a_tool_refusing_an_error_ends_with_one_line_but_a_closed_pipe_is_raised_on(capsys):
    # Tools catch OSError for files they cannot read or write: a broken pipe is one, and was
    # reported as 'error: [Errno 32] Broken pipe' with status 1 instead of ending as `| head`
    # expects (the front door's 141).
    from iknet_core.entry import failed

    assert failed('iknet-bench', OSError('No space left on device')) == 1
    assert capsys.readouterr().err == 'iknet-bench: error: No space left on device\n'
    with pytest.raises(BrokenPipeError):
        failed('iknet-bench', BrokenPipeError(32, 'Broken pipe'))
