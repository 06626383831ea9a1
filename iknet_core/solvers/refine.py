"""Batched Levenberg-Marquardt refinement of IK seeds (network guesses, joint states).

A 4-DOF arm cannot reach every 6-D pose: the cost weighs the orientation error (rad) by a length
(m/rad), so an unreachable target ends at the nearest weighted compromise, with its error reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.solvers import kernels
from iknet_core.solvers.base import check_poses
from iknet_core.solvers.policy import full_turn_joints, joint_bounds
from iknet_core.solvers.result import DEFAULT_TOLERANCE, Tolerance


@dataclass(frozen=True)
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

    tolerance: each sample stops as soon as it meets it. orientation_weight (m/rad): how much a
    radian of orientation error costs against a metre of position error. bounds: 'reach' (what the
    joints physically take) or 'limits' (software limits); full-turn joints wrap, others clamp.
    """

    def __init__(
        self,
        chain: Chain = OMX_CHAIN,
        tolerance: Tolerance = DEFAULT_TOLERANCE,
        orientation_weight: float = 0.1,
        max_iterations: int = 100,
        bounds: str = 'reach',
    ) -> None:
        if not orientation_weight >= 0.0:
            raise ValueError(f'orientation_weight must be >= 0 m/rad, got {orientation_weight}')
        if max_iterations < 0:
            raise ValueError(f'max_iterations must be >= 0, got {max_iterations}')
        low, high = joint_bounds(chain, bounds)
        self.chain = chain
        self.tolerance = tolerance
        self.orientation_weight = orientation_weight
        self.compiled = kernels.CompiledChain(chain)
        self._bounds = np.stack([low, high, full_turn_joints(chain, bounds)], -1).astype(float)
        self._settings = np.array(
            [orientation_weight, tolerance.position, tolerance.orientation, max_iterations],
            dtype=np.float64,
        )
        # Load (or compile, the first time ever) the kernels now rather than in the first query.
        zero = np.zeros((1, chain.n_joints))
        self.refine(*forward_kinematics(chain, zero), zero)

    def refine(
        self, positions: np.ndarray, rotations: np.ndarray, seeds: np.ndarray
    ) -> Refinement:
        """Refine seeds (B, n) rad towards targets (B, 3) m, (B, 3, 3)."""
        positions, rotations = check_poses(positions, rotations)
        joints = np.array(seeds, dtype=np.float64, order='C')  # a copy: refined in place
        if joints.shape != (len(positions), self.chain.n_joints):
            raise ValueError(
                f'expected seeds of shape ({len(positions)}, {self.chain.n_joints}), '
                f'got {joints.shape}'
            )
        errors = np.empty((len(joints), 2))
        iterations = np.empty(len(joints), dtype=np.int64)
        arrays = self.compiled.arrays
        kernels.refine_batch(
            joints,
            positions,
            rotations,
            arrays.joints,
            arrays.tip,
            self._bounds,
            self._settings,
            errors,
            iterations,
        )
        position_errors, orientation_errors = errors[:, 0], errors[:, 1]
        return Refinement(
            joints=joints,
            position_errors=position_errors,
            orientation_errors=orientation_errors,
            iterations=iterations,
            converged=self.tolerance.met(position_errors, orientation_errors),
        )
