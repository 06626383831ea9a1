"""IK accuracy as users need it: end-effector error through FK, in mm and degrees.

The one home for metrics: the test script, the training loop and the benchmark all use these.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.transforms import (
    Array,
    array_module,
    matrix_from_quaternion,
    rotation_angle_between,
)

WITHIN_MM = (1.0, 5.0, 10.0)
PERCENTILES = {'median': 50.0, 'p95': 95.0, 'p99': 99.0}
# Two solutions within this (rad, every joint) are one; a closed-form solution within it of a
# sample is found. Near a singularity (the OM-X straight elbow) solutions within the tolerance
# spread over ~0.01 rad.
SAME_SOLUTION_RAD = 0.02


def pose_errors(chain: Chain, joints: Array, poses: Array) -> tuple[Array, Array]:
    """FK(joints) against target poses: (..., n), (..., 7) -> position (m), angle (rad), (...,).

    numpy or torch; differentiable for torch, so training uses it too.
    """
    if poses.shape[-1] != 7 or joints.shape[:-1] != poses.shape[:-1]:
        raise ValueError(
            f'expected joints (..., {chain.n_joints}) and poses (..., 7) with one batch shape, '
            f'got {tuple(joints.shape)} and {tuple(poses.shape)}'
        )
    xp = array_module(joints)
    position, rotation = forward_kinematics(chain, joints)
    offset = position - poses[..., :3]
    position_error = xp.sqrt((offset * offset).sum(-1))
    angle = rotation_angle_between(rotation, matrix_from_quaternion(poses[..., 3:]))
    return position_error, angle


def wrapped_difference(a: Array, b: Array) -> Array:
    """a - b wrapped to (-pi, pi] (rad): q1 = 3.29 and -2.99 are the same joint position."""
    return math.pi - (math.pi - (a - b)) % (2 * math.pi)


def joint_differences(chain: Chain, a: Array, b: Array) -> np.ndarray:
    """a - b (..., n): a revolute joint's wrapped to (-pi, pi] (rad), a prismatic one's as it
    is (m): a slide 2 pi m further on is not the same position."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    prismatic = np.array([joint.prismatic for joint in chain.joints])
    return np.where(prismatic, a - b, wrapped_difference(a, b))


def summary(values: np.ndarray) -> dict[str, float]:
    """mean, median, p95, p99 and max of a 1-D array."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError('cannot summarise an empty array')
    result = {'mean': float(values.mean())}
    for key, percentile in PERCENTILES.items():
        result[key] = float(np.percentile(values, percentile))
    result['max'] = float(values.max())
    return result


def within_mm(position_error_m: np.ndarray, thresholds: tuple[float, ...] = WITHIN_MM) -> dict:
    """Fraction of samples within each threshold (mm), keyed by the threshold as text."""
    error_mm = np.asarray(position_error_m) * 1000.0
    return {f'{t:g}': float(np.mean(error_mm <= t)) for t in thresholds}


def accuracy_report(
    chain: Chain, predicted: np.ndarray, poses: np.ndarray, joints: np.ndarray | None = None
) -> dict:
    """JSON-able accuracy of predicted joints (B, n) for target poses (B, 7).

    joints: the recorded joints (B, n), for the per-joint error (wrap-aware, rad; a prismatic
    joint's in m under 'joint_error_m'); optional.
    """
    predicted = np.asarray(predicted, dtype=np.float64)
    poses = np.asarray(poses, dtype=np.float64)
    position_error, angle = pose_errors(chain, predicted, poses)
    report = {
        'n_samples': len(poses),
        'position_error_mm': summary(position_error * 1000.0),
        'orientation_error_deg': summary(np.degrees(angle)),
        'within_mm': within_mm(position_error),
    }
    if joints is not None:
        joints = np.asarray(joints, dtype=np.float64)
        difference = np.abs(joint_differences(chain, predicted, joints))
        for key, prismatic in (('joint_error_rad', False), ('joint_error_m', True)):
            errors = {
                joint.name: summary(difference[:, i])
                for i, joint in enumerate(chain.joints)
                if joint.prismatic == prismatic
            }
            if errors:
                report[key] = errors
    return report


def distinct_solutions(joints: np.ndarray, full_turn: np.ndarray | None = None) -> np.ndarray:
    """joints (k, n) without repeats: a row within SAME_SOLUTION_RAD of an earlier kept one is
    that one, and so, where full_turn (n,) marks the joints that turn whole turns, is a row a
    whole turn from one (the same arm). Not the branch policy's de-duplication: it also adds
    every whole-turn twin (3**6 per row on a UR5), which the samples already are or are not."""
    wraps = np.zeros(joints.shape[-1], bool) if full_turn is None else np.asarray(full_turn)
    kept: list[np.ndarray] = []
    for row in joints:  # against the kept rows only: (kept, n) per row, not (k, k, n)
        if kept:
            difference = np.array(kept) - row
            difference[:, wraps] = wrapped_difference(difference[:, wraps], 0.0)
            if (np.abs(difference) < SAME_SOLUTION_RAD).all(1).any():
                continue
        kept.append(row)
    return np.array(kept).reshape(-1, joints.shape[-1])


def solution_diversity(
    solve: Callable[..., object],
    positions: np.ndarray,
    rotations: np.ndarray,
    asked: int,
    full_turn: np.ndarray | None = None,
) -> dict:
    """How many distinct exact solutions a solver gives per pose when asked for `asked`:
    solve(position (3,), rotation (3, 3), max_solutions=asked) -> Solutions, for each target of
    positions (B, 3), rotations (B, 3, 3). Exact: within the solver's tolerance and the reach.
    Distinct: distinct_solutions, whole-turn twins of the full_turn joints counted once."""
    if asked < 1 or len(positions) == 0:
        raise ValueError(f'need at least one pose and one solution, got {len(positions)}, {asked}')
    counts = np.array(
        [
            len(distinct_solutions(found.joints[found.meets_tolerance], full_turn))
            for found in (
                solve(position, rotation, max_solutions=asked)
                for position, rotation in zip(positions, rotations, strict=True)
            )
        ]
    )
    return {
        'asked': asked,
        'n_poses': len(counts),
        'distinct_exact': summary(counts),
        'several': float((counts >= 2).mean()),
        'none': float((counts == 0).mean()),
    }
