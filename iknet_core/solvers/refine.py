"""Batched Levenberg-Marquardt refinement of IK seeds (network guesses, joint states).

A 4-DOF arm cannot reach every 6-D pose: the cost weighs the orientation error (rad) by a length
(m/rad), so an unreachable target ends at the nearest weighted compromise, with its error reported.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.solvers import kernels
from iknet_core.solvers.base import check_poses
from iknet_core.solvers.parallel import run_in_blocks
from iknet_core.solvers.policy import full_turn_joints, joint_bounds
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings


@dataclass(slots=True)  # not frozen, for speed, as Solutions; treat it as read-only
class Refinement:
    """Refined joints (B, n) rad with FK errors (B,) m and (B,) rad, iterations (B,) and whether
    each met the tolerance (B,)."""

    joints: np.ndarray
    position_errors: np.ndarray
    orientation_errors: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray


class Refiner:
    """Damped least squares on the chain's compiled FK, one call for any batch size.

    Each sample stops as soon as it meets settings.tolerance; settings.orientation_weight (m/rad)
    weighs orientation against position error. bounds: 'reach' (what the joints physically take)
    or 'limits' (software limits); full-turn joints wrap, others clamp.
    """

    def __init__(
        self, chain: Chain, settings: SolverSettings = DEFAULT_SETTINGS, bounds: str = 'reach'
    ) -> None:
        low, high = joint_bounds(chain, bounds)
        self.chain = chain
        self.settings = settings
        self.tolerance = settings.tolerance
        self.orientation_weight = settings.orientation_weight
        self.compiled = kernels.CompiledChain(chain)
        self._bounds = np.stack([low, high, full_turn_joints(chain, bounds)], -1).astype(float)
        self._settings = settings.kernel()
        self._settings_without_restarts = replace(settings, restarts=0).kernel()
        # Load (or compile, the first time ever) the kernels now rather than in the first query.
        zero = np.zeros((1, chain.n_joints))
        self.refine(*forward_kinematics(chain, zero), zero)

    def refine(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        seeds: np.ndarray,
        restarts: bool = False,
        stop_on_stall: bool = False,
    ) -> Refinement:
        """Refine seeds (B, n) rad towards targets (B, 3) m, (B, 3, 3); with restarts, a seed
        that misses the tolerance is followed by settings.restarts spread-out ones. stop_on_stall
        (implied by restarts): give a seed up as soon as its cost stops falling, for callers
        that try other seeds next; otherwise it runs settings.max_iterations."""
        positions, rotations = check_poses(positions, rotations)
        joints = np.array(seeds, dtype=np.float64, order='C')  # a copy: refined in place
        if joints.shape != (len(positions), self.chain.n_joints):
            raise ValueError(
                f'expected seeds of shape ({len(positions)}, {self.chain.n_joints}), '
                f'got {joints.shape}'
            )
        count = len(joints)
        errors = np.empty((count, 2))
        iterations = np.empty(count, dtype=np.int64)
        converged = np.empty(count, dtype=np.bool_)
        arrays = self.compiled.arrays
        arguments = (
            joints,
            positions,
            rotations,
            arrays.joints,
            arrays.tip,
            *self.kernel_arguments(restarts),
            stop_on_stall,
        )

        def refine_rows(rows: slice) -> None:
            kernels.refine_batch(
                *arguments, (rows.start, rows.stop), errors, iterations, converged
            )

        run_in_blocks(count, self.settings.batch_threads, refine_rows)
        return Refinement(joints, errors[:, 0], errors[:, 1], iterations, converged)

    def kernel_arguments(self, restarts: bool) -> tuple:
        """What kernels.refine_batch takes after the chain's joints and tip: the joint bounds
        and the settings, with or without restarts. For kernels that refine inside."""
        return self._bounds, self._settings if restarts else self._settings_without_restarts
