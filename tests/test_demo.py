"""`make demo`'s loop (tools/demo.py) as a user runs it, on two poses: the model's test table,
then simulator and server as real processes, and the simulated arm arriving at each target.

It runs with an empty numba cache, as a first run after a fresh clone does: it cannot pass on
compiled code left by earlier runs."""

import re
import subprocess
import sys

import pytest
from conftest import REPO_ROOT


# A cold server compiled for 284 s beside two busy processes: room for that, the cold
# iknet-test before it, and the moves (the waits inside end on readiness, not on this clock).
@pytest.mark.timeout(1560)
def test_demo_drives_the_simulated_arm_to_test_poses(ros_env, tmp_path):
    cold = {**ros_env, 'NUMBA_CACHE_DIR': str(tmp_path / 'numba_cache')}
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / 'tools' / 'demo.py'), '--poses', '2', '--path-time', '1'],
        env=cold,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for step in ('1/4 model', '2/4 test', '3/4 simulated', '4/4 2 poses'):
        assert f'=== {step}' in output, output
    assert 'position error (mm)' in output, output  # iknet-test's table
    # One row per target: ... | joints | reached | error in mm; the simulator's encoder ticks
    # move the tip by ~0.4 mm, so arrival is judged at 2 mm.
    errors = [float(e) for e in re.findall(r'\|\s+([0-9.]+)$', result.stdout, re.MULTILINE)]
    assert len(errors) == 2, output
    assert max(errors) < 2.0, output
    assert 'move refused' not in output
    # The cache was cold: the kernels were compiled into it, not loaded from elsewhere.
    assert any((tmp_path / 'numba_cache').rglob('*.nbi')), 'numba compiled nothing: warm cache?'
