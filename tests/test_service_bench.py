"""`ros2 run iknet service_bench`, as the README shows it, on a few requests: it starts both
servers itself and prints both figures of issue 5 (round-trip ratio, compute in the server)."""

import re
import subprocess

from iknet_core.resources import installed_executable


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
