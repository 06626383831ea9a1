"""The `analytic` backend: the OM-X closed form, every solution, in the common result format."""

from __future__ import annotations

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.omx_ik import OmxAnalyticIK, OmxGeometry, branches_of_pose
from iknet_core.solvers.base import check_max_solutions, check_pose, check_poses, check_seed
from iknet_core.solvers.kernels import JOINT_ROWS, CompiledChain, pose_error
from iknet_core.solvers.policy import BranchPolicy, select_candidates
from iknet_core.solvers.result import Solutions
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings


@njit(cache=True)
def _solve_pose(
    position,
    rotation,
    geometry_values,
    joints,
    tip,
    shifts,
    bounds,
    full_turn,
    setting_values,
    seed,
    has_seed,
    max_solutions,
):
    """One pose in one compiled call: both elbows, their FK errors (m, rad), the branch policy's
    choice in Solutions' field order. The arguments after tip: BranchPolicy.kernel_arguments().

    Every argument is an array or a flat tuple of scalars: numba unboxes those in C, where a
    nested tuple (such as *arguments) costs several us per call inside the server."""
    n = seed.shape[0]
    scratch = np.empty(2 * n + 4)  # one allocation: see select_candidates
    branches = scratch[: 2 * n].reshape((2, n))
    position_errors, orientation_errors = scratch[2 * n : 2 * n + 2], scratch[2 * n + 2 :]
    branches_of_pose(position, rotation, OmxGeometry(*geometry_values), branches)
    for row in range(2):
        position_errors[row], orientation_errors[row] = pose_error(
            branches[row], position, rotation, joints, tip
        )
    return select_candidates(
        branches,
        position_errors,
        orientation_errors,
        shifts,
        bounds,
        full_turn,
        setting_values,
        seed,
        has_seed,
        max_solutions,
    )


@njit(cache=True)
def _solve_best(position, rotation, constants):
    """_solve_pose for the server's common query, one solution without a seed, in 3 arguments.

    On the cold cache a request wakes the server to, numba pays about 1 us per argument to type
    and unbox it (2-3 us for a tuple), more than the closed form itself; so the arm's constants
    come as one flat array, `_best_constants`, read back here as views."""
    c = constants
    n = int(c[0])
    geometry = (c[1], c[2], complex(c[3], c[4]), complex(c[5], c[6]), complex(c[7], c[8]),
                complex(c[9], c[10]))  # fmt: skip
    settings = (c[11], c[12], c[13], int(c[14]), c[15], int(c[16]), int(c[17]))
    start = _CONSTANTS_HEAD
    joints = c[start : start + 3 * JOINT_ROWS * n].reshape((n, JOINT_ROWS, 3))
    start += 3 * JOINT_ROWS * n
    tip = c[start : start + 12].reshape((4, 3))
    start += 12
    bounds = c[start : start + 4 * n].reshape((4, n))
    full_turn = c[start + 4 * n : start + 5 * n]
    # For one solution the policy picks each candidate's best whole-turn twin itself and reads
    # no shift rows; the seed is unused without has_seed. Both are the constants' zeros.
    no_seed = c[start + 5 * n : start + 6 * n]
    no_shift = no_seed.reshape((1, n))
    return _solve_pose(
        position, rotation, geometry, joints, tip, no_shift, bounds, full_turn, settings,
        no_seed, False, 1,
    )  # fmt: skip


# Scalars before the arrays in _best_constants: n, the geometry (10), the settings (7).
_CONSTANTS_HEAD = 18


def _best_constants(
    geometry: OmxGeometry,
    joints: np.ndarray,
    tip: np.ndarray,
    bounds: np.ndarray,
    full_turn: np.ndarray,
    settings: tuple,
) -> np.ndarray:
    """What _solve_best reads, as one float64 array in its order."""
    n = len(joints)
    shapes = (joints.shape, tip.shape, bounds.shape, full_turn.shape, len(geometry), len(settings))
    # _solve_best reads them by offset
    if shapes != ((n, JOINT_ROWS, 3), (4, 3), (4, n), (n,), 6, 7):
        raise ValueError(f'unexpected kernel arguments for _solve_best: {shapes}')
    scalars = [n, geometry.axis_x, geometry.axis_y]
    for point in geometry[2:]:
        scalars += [point.real, point.imag]
    scalars += [float(value) for value in settings]
    arrays = (joints, tip, bounds, full_turn, np.zeros(n))
    return np.concatenate([np.array(scalars, dtype=np.float64)] + [a.ravel() for a in arrays])


class AnalyticSolver:
    """Both elbows and the whole-turn twins of joint1; exact for reachable poses.

    A single pose is one compiled call plus the ranking (a few us): the numpy closed form costs
    ~50 us per call at batch size 1. Unreachable targets get the stretched or folded arm with
    its error, never success.
    """

    name = 'analytic'

    def __init__(self, chain: Chain, settings: SolverSettings = DEFAULT_SETTINGS) -> None:
        self.chain = chain
        self.settings = settings
        self.ik = OmxAnalyticIK(chain)
        self.policy = BranchPolicy(chain, settings)
        self.compiled = CompiledChain(chain)
        self._arrays = self.compiled.arrays
        # The geometry as a plain tuple: numba types it in C, a named tuple in Python (see
        # SolverSettings.kernel).
        self._chain_arguments = (tuple(self.ik.geometry), self._arrays.joints, self._arrays.tip)
        _, bounds, full_turn, settings, *_ = self.policy.kernel_arguments(None, 1)
        self._best_constants = _best_constants(
            self.ik.geometry, self._arrays.joints, self._arrays.tip, bounds, full_turn, settings
        )
        # Load (or compile) the kernels now: the common query's, and the one for a seed or
        # several solutions (called from Python, it has another signature than inside).
        self.solve(np.zeros(3), np.eye(3))
        self.solve(np.zeros(3), np.eye(3), max_solutions=2)

    def solve(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None = None,
        max_solutions: int = 1,
    ) -> Solutions:
        """Solutions of one pose (3,) m, (3, 3), best first; nearest to seed (n,) when given."""
        position, rotation = check_pose(position, rotation)
        max_solutions = check_max_solutions(max_solutions)
        if seed is None and max_solutions == 1:  # the server's common case
            return Solutions(*_solve_best(position, rotation, self._best_constants))
        if seed is not None:
            seed = check_seed(seed, self.chain)
        arguments = self._chain_arguments + self.policy.kernel_arguments(seed, max_solutions)
        return Solutions(*_solve_pose(position, rotation, *arguments))

    def solve_batch(
        self, positions: np.ndarray, rotations: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best solution per pose: (B, 3), (B, 3, 3) -> joints (B, n), errors (B,) m, (B,) rad."""
        positions, rotations = check_poses(positions, rotations)
        joints = self.ik.branches(positions, rotations)
        count, branches, n = joints.shape
        position_errors, orientation_errors = self.compiled.pose_errors(
            joints.reshape(-1, n),
            np.repeat(positions, branches, 0),
            np.repeat(rotations, branches, 0),
        )
        return self.policy.best_per_pose(
            joints,
            position_errors.reshape(count, branches),
            orientation_errors.reshape(count, branches),
        )
