"""Metrics through FK, in mm and degrees; joint errors that know 2*pi."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.metrics import (
    accuracy_report,
    joint_differences,
    pose_errors,
    solution_diversity,
    summary,
    within_mm,
    wrapped_difference,
)
from iknet_core.solvers.result import Solutions
from iknet_train.synthetic import synthetic_samples

# The FACTS.md row with joint1 past pi.
Q_PAST_PI = np.array([3.285787, -1.066117, 0.207087, 0.582913])
POSE_PAST_PI = np.array([-0.088727, -0.014626, 0.287644, 0.137263, 0.009913, 0.987912, -0.071349])


def test_recorded_pose_of_joints_past_pi_has_no_error_either_way() -> None:
    shifted = Q_PAST_PI - np.array([2 * math.pi, 0, 0, 0])
    position, angle = pose_errors(
        OMX_CHAIN, np.stack([Q_PAST_PI, shifted]), np.stack([POSE_PAST_PI] * 2)
    )
    assert np.all(position < 1e-6) and np.all(angle < 1e-5)
    assert abs(wrapped_difference(Q_PAST_PI, shifted)[0]) < 1e-12


def test_joint_differences_wrap_turns_but_not_slides() -> None:
    from test_prismatic import SCARA  # shoulder, elbow, quill (m), wrist

    a = np.array([math.pi - 0.1, 0.2, 0.15, 0.0])
    b = np.array([-math.pi + 0.1, 0.2, 0.15 - 2 * math.pi, 0.3])
    np.testing.assert_allclose(
        joint_differences(SCARA, a, b), [-0.2, 0.0, 2 * math.pi, -0.3], atol=1e-12
    )


def test_errors_are_sign_free_and_measure_offsets() -> None:
    poses, joints = synthetic_samples(OMX_CHAIN, 100, seed=4)
    poses[::2, 3:] *= -1.0
    moved = poses.copy()
    moved[:, 0] += 0.003
    position, angle = pose_errors(OMX_CHAIN, joints, moved)
    np.testing.assert_allclose(position, 0.003, atol=1e-9)
    assert angle.max() < 1e-6

    torch_position, _ = pose_errors(OMX_CHAIN, torch.as_tensor(joints), torch.as_tensor(moved))
    np.testing.assert_allclose(torch_position.numpy(), position, atol=1e-12)
    with pytest.raises(ValueError, match=r'got \(100, 4\) and \(99, 7\)'):
        pose_errors(OMX_CHAIN, joints, moved[1:])


def test_summary_and_within() -> None:
    values = np.arange(1, 101, dtype=float)
    result = summary(values)
    assert result == pytest.approx(
        {'mean': 50.5, 'median': 50.5, 'p95': 95.05, 'p99': 99.01, 'max': 100.0}
    )
    assert within_mm(np.array([0.0005, 0.002, 0.008, 0.02])) == {'1': 0.25, '5': 0.5, '10': 0.75}
    with pytest.raises(ValueError, match='empty'):
        summary(np.array([]))


def test_accuracy_report_keys() -> None:
    poses, joints = synthetic_samples(OMX_CHAIN, 50, seed=5)
    report = accuracy_report(OMX_CHAIN, joints + 0.01, poses, joints)
    assert report['n_samples'] == 50
    assert set(report['position_error_mm']) == {'mean', 'median', 'p95', 'p99', 'max'}
    assert set(report['joint_error_rad']) == set(OMX_CHAIN.joint_names)
    assert report['joint_error_rad']['joint1']['max'] == pytest.approx(0.01)
    assert report['within_mm'].keys() == {'1', '5', '10'}


def test_solution_diversity_counts_distinct_exact_solutions() -> None:
    rows = np.array([[0.0, 0.0], [0.01, -0.01], [0.5, 0.0], [1.0, 1.0]])  # a repeat, a miss
    found = Solutions(
        rows, np.zeros(4), np.zeros(4), np.ones(4, bool), np.array([True, True, True, False])
    )
    asked = []

    def solve(position, rotation, max_solutions):
        asked.append(max_solutions)
        return found

    report = solution_diversity(solve, np.zeros((3, 3)), np.zeros((3, 3, 3)), 6)
    assert asked == [6, 6, 6]
    assert report['distinct_exact']['max'] == 2 and report['several'] == 1.0
    assert report['none'] == 0.0 and report['n_poses'] == 3
    with pytest.raises(ValueError, match='at least one pose'):
        solution_diversity(solve, np.zeros((0, 3)), np.zeros((0, 3, 3)), 6)
