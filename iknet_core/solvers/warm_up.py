"""Compile every kernel the solvers use now, into numba's on-disk cache, so that the first
ik_server start after an install answers within seconds instead of compiling for ~50 s.

The colcon build (CMakeLists.txt) and tools/setup.sh run `python -m iknet_core.solvers.warm_up`;
`ros2 run iknet warm_up` runs it for a cold cache (as the installed package: numba keys its cache
by the source file, so run from a source tree, python -m would fill a cache the server never
reads); the server calls `exercise` on its own solvers, which loads the cached code.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence

import numpy as np

from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.fk import forward_kinematics, pose_from_joints
from iknet_core.solvers.base import Solver
from iknet_core.solvers.factory import available_solvers, build_solver
from iknet_core.solvers.mixture_kernel import CompiledMixture
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.path import follow_path
from iknet_core.solvers.path_smoothing import step_stands_out
from iknet_core.solvers.path_timing import time_stamps
from iknet_core.solvers.policy import joint_bounds
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings

logger = logging.getLogger(__name__)
# Above the compiled network's single-pose limit: torch takes those, so this stays at 2.
_BATCH = 2


def exercise(solver: Solver) -> None:
    """Every compiled path of a solver once: one pose with and without a seed, and a batch."""
    n = solver.chain.n_joints
    positions, rotations = forward_kinematics(solver.chain, np.full((_BATCH, n), 0.1))
    solver.solve(positions[0], rotations[0], seed=np.zeros(n), max_solutions=4)
    solver.solve(positions[0], rotations[0])
    solver.solve_batch(positions, rotations)


def exercise_path(chain: Chain, settings: SolverSettings = DEFAULT_SETTINGS) -> None:
    """follow_path's kernels once, on a three-waypoint path inside the limits; and its
    positions with a bound on the step that stops the path, so that (with a joint to spare)
    the self-motion search compiles too; the check of a step standing out, which a path that
    short is not asked; and the trajectory's time stamps (SolvePath's)."""
    low, high = joint_bounds(chain, 'limits')
    joints = np.clip(0.1 + np.array([[0.0], [0.01], [0.02]]), low, high)  # (3, n)
    poses = pose_from_joints(chain, joints)
    follow_path(chain, poses, joints[0], settings)
    follow_path(chain, poses[:, :3], joints[0], settings, max_step=1e-6)
    step_stands_out(joints, 1.0)
    time_stamps(joints)


def exercise_sampler(chain: Chain) -> None:
    """The compiled mixture sampler, on a small untrained model: its kernels take the same
    types whatever the model, so a trained one loads them from the cache."""
    from iknet_core.networks import build_model

    config = {'n_joints': chain.n_joints, 'width': 8, 'n_blocks': 1, 'head_width': 8}
    CompiledMixture(build_model('mixture', config, chain))


def warm_up(chain: Chain = OMX_CHAIN, network: NetworkProposer | None = None) -> list[str]:
    """Build and exercise every solver available for chain, follow_path and the mixture
    sampler; returns the solvers' names."""
    names = list(available_solvers(chain, network))
    for name in names:
        exercise(build_solver(name, chain, network))
    exercise_path(chain)
    exercise_sampler(chain)
    return names


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog='warm_up',
        description="Compile the IK server's solver kernels into numba's cache now (about a "
        'minute), so that its first start answers in seconds.',
    )


@exits_on_interrupt('warm_up', 'the kernels compiled so far stay cached')
def main(argv: Sequence[str] | None = None) -> int:
    build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    started = time.monotonic()
    try:
        network = NetworkProposer(device='cpu', backend='compiled')
    except (FileNotFoundError, ValueError) as error:
        logger.warning('no shipped model (%s): compiling the solvers without a network', error)
        network = None
    names = warm_up(network.chain if network else OMX_CHAIN, network)
    logger.info(
        'iknet: solver kernels compiled or loaded from cache in %.1f s (%s)',
        time.monotonic() - started,
        ', '.join(names),
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
