"""`ros2 run iknet service_bench`, as the README shows it, on a few requests: it starts both
servers itself and prints both figures of issue 5 (round-trip ratio, compute in the server)."""

import re
import subprocess
import time

import pytest

from iknet_core.checkpoint import save_checkpoint
from iknet_core.kinematics.robots import named_chain
from iknet_core.networks import build_model
from iknet_core.resources import installed_executable

UR5 = named_chain('ur5')


def test_prints_round_trips_ratio_and_compute_time(ros_env):
    result = subprocess.run(
        [str(installed_executable('service_bench')), '--requests', '20'],
        env=ros_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r'trivial service\s+median\s+\d+ us', result.stdout), result.stdout
    assert re.search(r'ik_server\s+median\s+\d+ us', result.stdout), result.stdout
    assert re.search(r'ratio of medians\s+\d+\.\d\d', result.stdout), result.stdout
    assert re.search(r'IK compute inside ik_server: median \d+ us', result.stdout), result.stdout
    # Unsolved requests are one summary line, never a line each.
    assert 'unsolved:' not in result.stdout + result.stderr


@pytest.fixture(scope='module')
def ur5_model(tmp_path_factory):
    """An untrained UR5 network: a seed for network+refine, enough to exercise the service."""
    model = build_model('iknet', {'n_joints': 6, 'width': 8, 'n_blocks': 1})
    return save_checkpoint(tmp_path_factory.mktemp('ur5') / 'ur5.pt', model, 'iknet', UR5)


def test_another_arms_model_is_asked_poses_of_its_own_arm(ros_env, ur5_model):
    # The OM-X recording's poses in 'world' were refused by a UR5 server (base_link), and the
    # bench then failed on the refusal's message.
    result = run_bench(ros_env, '--model', str(ur5_model), '--solver', 'network+refine')
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r'IK compute inside ik_server: median \d+ us', result.stdout), result.stdout


def test_a_server_that_cannot_start_ends_the_bench_with_its_reason(ros_env, ur5_model):
    # It waited 300 s in silence: the server's output went nowhere.
    started = time.monotonic()
    result = run_bench(ros_env, '--model', str(ur5_model), '--solver', 'analytic')
    assert result.returncode == 1
    assert 'ik_server exited with status 1; its last lines:' in result.stderr, result.stderr
    assert "solver 'analytic' is not available for ur5" in result.stderr
    assert time.monotonic() - started < 200  # not READY_TIMEOUT_S: it stops with the server


def test_a_model_it_cannot_read_is_one_line_before_any_server_starts(ros_env, tmp_path):
    result = run_bench(ros_env, '--model', str(tmp_path / 'nowhere.pt'))
    assert result.returncode == 1
    assert result.stderr.strip() == f'service_bench: error: no model file at {tmp_path}/nowhere.pt'


def run_bench(ros_env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(installed_executable('service_bench')), '--requests', '5', *args],
        env=ros_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
