"""The `analytic` backend: the OM-X closed form, every solution, in the common result format."""

from __future__ import annotations

import numpy as np

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.solvers.base import check_pose, check_poses, check_seed
from iknet_core.solvers.kernels import CompiledChain
from iknet_core.solvers.policy import BranchPolicy
from iknet_core.solvers.result import DEFAULT_TOLERANCE, Solutions, Tolerance


class AnalyticSolver:
    """Both elbows and the whole-turn twins of joint1; exact for reachable poses.

    Errors come from the compiled FK (the generic one costs ~50 us per call at batch size 1).
    Unreachable targets get the stretched or folded arm with its error, never success.
    """

    name = 'analytic'

    def __init__(
        self,
        chain: Chain = OMX_CHAIN,
        tolerance: Tolerance = DEFAULT_TOLERANCE,
        orientation_weight: float = 0.1,
    ) -> None:
        self.chain = chain
        self.policy = BranchPolicy(chain, tolerance, orientation_weight)
        self.ik = OmxAnalyticIK(chain)
        self.compiled = CompiledChain(chain)

    def solve(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None = None,
        max_solutions: int = 1,
    ) -> Solutions:
        """Solutions of one pose (3,) m, (3, 3), best first; nearest to seed (n,) when given."""
        position, rotation = check_pose(position, rotation)
        if seed is not None:
            seed = check_seed(seed, self.chain)
        joints = self.ik.branches(position[None], rotation[None])[0]
        count = len(joints)
        position_errors, orientation_errors = self.compiled.pose_errors(
            joints, np.repeat(position[None], count, 0), np.repeat(rotation[None], count, 0)
        )
        return self.policy.select(joints, position_errors, orientation_errors, seed, max_solutions)

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
