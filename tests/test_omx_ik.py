import math

import numpy as np
import pytest
from golden import REFERENCE_JOINTS, REFERENCE_POSES, random_observed_joints

from iknet_core.kinematics import OMX_CHAIN, Chain, forward_kinematics
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_angle_between


@pytest.fixture(scope='module')
def solver() -> OmxAnalyticIK:
    return OmxAnalyticIK(OMX_CHAIN)


def position_errors(solutions: np.ndarray, target: np.ndarray) -> np.ndarray:
    return np.linalg.norm(forward_kinematics(OMX_CHAIN, solutions)[0] - target, axis=-1)


def test_every_returned_solution_reproduces_10000_random_poses(solver):
    q = random_observed_joints(10_000, seed=6)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    branches = solver.branches(positions, rotations)
    branch_errors = position_errors(branches.reshape(-1, 4), np.repeat(positions, 2, 0))
    assert branch_errors.max() < 1e-9
    _, branch_rotations = forward_kinematics(OMX_CHAIN, branches)
    angles = rotation_angle_between(branch_rotations, rotations[:, None])
    assert angles.max() < 1e-9


def test_solve_returns_all_solutions_that_reproduce_the_pose(solver):
    q = random_observed_joints(2_000, seed=7)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    for joints, position, rotation in zip(q, positions, rotations, strict=True):
        solutions = solver.solve(position, rotation)
        assert len(solutions) >= 1
        assert position_errors(solutions, position).max() < 1e-9
        # The sampled joints themselves are among the solutions (2*pi shifts included).
        assert np.abs(solutions - joints).max(axis=1).min() < 1e-9


def test_joint1_beyond_pi_and_its_shift_are_both_returned(solver):
    joints = REFERENCE_JOINTS[3]  # joint1 = 3.2858 rad, beyond pi
    solutions = solver.solve(
        REFERENCE_POSES[3, :3], matrix_from_quaternion(REFERENCE_POSES[3, 3:])
    )
    joint1_values = set(np.round(solutions[:, 0], 5))
    assert round(joints[0], 5) in joint1_values
    assert round(joints[0] - 2 * math.pi, 5) in joint1_values


def test_both_elbow_branches_are_found(solver):
    # Near a straight elbow both branches stay within the joints' reach.
    q = np.array([0.3, 0.1, -1.0, 0.4])
    position, rotation = forward_kinematics(OMX_CHAIN, q)
    solutions = solver.solve(position, rotation)
    straight = -math.atan2(0.128, 0.024)
    elbows = {np.sign(s[2] - straight) for s in solutions}
    assert len(solutions) >= 2 and len(elbows) == 2


def test_unreachable_target_gives_the_stretched_arm(solver):
    far = np.array([[1.0, 0.0, 0.2]])
    branches = solver.branches(far, np.eye(3)[None])
    reached = forward_kinematics(OMX_CHAIN, branches[0])[0]
    assert np.all(np.linalg.norm(reached - far, axis=-1) > 0.5)
    assert np.all(np.isfinite(branches))


def test_other_chain_structures_are_refused():
    data = OMX_CHAIN.to_dict()
    data['joints'][1]['axis'] = (1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match='not a yaw-pitch-pitch-pitch arm'):
        OmxAnalyticIK(Chain.from_dict(data))


def test_pointing_rotation_is_reachable_with_the_requested_pitch(solver):
    position = np.array([0.15, 0.08, 0.1])
    rotation = solver.pointing_rotation(position, 0.7)
    solutions = solver.solve(position, rotation)
    assert len(solutions) >= 1
    fk_position, fk_rotation = forward_kinematics(OMX_CHAIN, solutions[0])
    assert np.linalg.norm(fk_position - position) < 1e-9
    assert rotation_angle_between(fk_rotation, rotation) < 1e-9
    assert abs(solutions[0][1:].sum() - 0.7) < 1e-9
