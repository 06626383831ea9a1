"""A changed kernel source drops numba's cached kernels, which check only their own file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from iknet_core.solvers.kernel_cache import STAMP_FILE

COMPILE_ANALYTIC = (
    'from iknet_core.kinematics.chain import OMX_CHAIN\n'
    'from iknet_core.solvers.factory import build_solver\n'
    "build_solver('analytic', OMX_CHAIN)\n"
)


def run_python(code: str, cache: Path) -> None:
    env = {**os.environ, 'NUMBA_CACHE_DIR': str(cache)}
    subprocess.run([sys.executable, '-c', code], env=env, check=True, timeout=600)


def test_a_new_kernel_source_stamp_empties_every_cache_index(tmp_path: Path) -> None:
    run_python(COMPILE_ANALYTIC, tmp_path)
    (stamp,) = tmp_path.rglob(STAMP_FILE)
    index = {path: path.read_bytes() for path in tmp_path.rglob('*.nbi')}
    # An index without entries (kernels the analytic solver never compiled) is the smallest.
    empty_size = min(len(content) for content in index.values())
    filled = [path for path, content in index.items() if len(content) > empty_size]
    assert len(filled) > 5, 'the analytic solver cached its kernels'

    run_python('import iknet_core.solvers', tmp_path)  # same sources: the cache stays
    assert all(path.read_bytes() == content for path, content in index.items())

    stamp.write_text('the sources of an older iknet')
    run_python('import iknet_core.solvers', tmp_path)
    assert stamp.read_text() != 'the sources of an older iknet'
    assert all(len(path.read_bytes()) == empty_size for path in index)
