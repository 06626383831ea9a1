"""A changed kernel source drops numba's cached kernels, which check only their own file; once the
server's warm-up has run, a request compiles nothing."""

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


# What ik_server does before it says ready (exercise each solver, then follow_path), then what
# a SolvePath request with alternatives asks, of poses and of positions; prints the kernels that
# compiled again for it.
COMPILED_BY_A_PATH_REQUEST = """
import importlib, pkgutil
import numpy as np
from numba.core.registry import CPUDispatcher
import iknet_core.solvers
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.resources import DEFAULT_MODEL, PANDA_MODEL, shipped
from iknet_core.solvers.factory import available_solvers, build_solver
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.path import alternative_paths, smooth_joint_paths, start_solutions
from iknet_core.solvers.settings import DEFAULT_SETTINGS as SETTINGS
from iknet_core.solvers.warm_up import exercise, exercise_path

def signatures():
    counts = {}
    for info in pkgutil.iter_modules(iknet_core.solvers.__path__):
        module = importlib.import_module(f'iknet_core.solvers.{info.name}')
        for name, value in vars(module).items():
            if isinstance(value, CPUDispatcher):
                counts[f'{info.name}.{name}'] = len(value.signatures)
    return counts

for model in (DEFAULT_MODEL, PANDA_MODEL):
    network = NetworkProposer(shipped(model), device='cpu', backend='compiled')
    chain = network.chain
    for name in available_solvers(chain, network):
        exercise(build_solver(name, chain, network, SETTINGS))
    exercise_path(chain, SETTINGS)
    before = signatures()
    solver = build_solver('network+refine', chain, network, SETTINGS.position_only())
    curve = smooth_joint_paths(chain, 1, 10)[0]
    poses = pose_from_joints(chain, curve)
    for targets in (poses, poses[:, :3]):
        others = start_solutions(chain, targets[0], 4, SETTINGS, solver=solver, avoid=curve[0])
        starts = np.concatenate([curve[:1], others])
        alternative_paths(chain, targets, starts, SETTINGS, origin=curve[0])
    print(chain.name, sorted(k for k, v in signatures().items() if v != before.get(k, 0)))
"""


def run_python(code: str, cache: Path | None = None) -> str:
    env = {**os.environ, 'NUMBA_CACHE_DIR': str(cache)} if cache else None
    return subprocess.run(
        [sys.executable, '-c', code], env=env, check=True, timeout=600, capture_output=True,
        text=True,
    ).stdout  # fmt: skip


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


def test_a_path_request_after_the_servers_warm_up_compiles_nothing() -> None:
    """A one-waypoint target was a read-only array (np.broadcast_to), for which numba compiled
    every kernel again: the first SolvePath with alternatives after 'ready' compiled for
    seconds, and the client gave up."""
    printed = run_python(COMPILED_BY_A_PATH_REQUEST).splitlines()
    assert printed == ['open_manipulator_x []', 'panda []']
