"""Synthetic samples: joints in the configured ranges, poses exactly their FK."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from golden import OBSERVED_HIGH, OBSERVED_LOW

from iknet_core.kinematics import OMX_CHAIN, OMX_HAND_GUIDED_RANGES, pose_from_joints
from iknet_train.data import load_recording
from iknet_train.synthetic import (
    default_ranges,
    parse_ranges,
    synthetic_samples,
    write_recording,
)


def test_default_ranges_are_the_observed_hand_guided_ones() -> None:
    ranges = default_ranges(OMX_CHAIN)
    np.testing.assert_array_equal(ranges, np.stack([OBSERVED_LOW, OBSERVED_HIGH], -1))
    assert ranges[0, 1] > np.pi  # joint1 goes past pi when guided by hand


def test_samples_lie_in_their_ranges_and_poses_are_their_fk() -> None:
    poses, joints = synthetic_samples(OMX_CHAIN, 5000, seed=3)

    ranges = default_ranges(OMX_CHAIN)
    assert poses.shape == (5000, 7) and joints.shape == (5000, 4)
    assert np.all(joints >= ranges[:, 0]) and np.all(joints <= ranges[:, 1])
    np.testing.assert_allclose(poses, pose_from_joints(OMX_CHAIN, joints))
    # Spread over the ranges, not bunched.
    assert np.all(joints.min(0) < ranges[:, 0] + 0.05) and np.all(
        joints.max(0) > ranges[:, 1] - 0.05
    )


def test_same_seed_same_samples() -> None:
    a = synthetic_samples(OMX_CHAIN, 10, seed=7)[1]
    np.testing.assert_array_equal(a, synthetic_samples(OMX_CHAIN, 10, seed=7)[1])
    assert not np.array_equal(a, synthetic_samples(OMX_CHAIN, 10, seed=8)[1])


def test_parse_ranges_overrides_named_joints_only() -> None:
    ranges = parse_ranges('joint2=-0.5:0.5, joint4=-1:1', OMX_CHAIN)
    assert ranges[1].tolist() == [-0.5, 0.5] and ranges[3].tolist() == [-1.0, 1.0]
    assert ranges[0].tolist() == list(OMX_HAND_GUIDED_RANGES[0])
    with pytest.raises(ValueError, match='expected NAME=LOW:HIGH'):
        parse_ranges('elbow=0:1', OMX_CHAIN)
    with pytest.raises(ValueError, match="bad range 'joint1=1:0': LOW must be below HIGH"):
        parse_ranges('joint1=1:0', OMX_CHAIN)
    with pytest.raises(ValueError, match=r'joint2 reaches \[-1.5, 1.5\] rad; samples beyond'):
        parse_ranges('joint2=0:5', OMX_CHAIN)
    with pytest.raises(ValueError, match='increasing pairs'):
        synthetic_samples(OMX_CHAIN, 3, ranges=np.array([[1.0, 0.0]] * 4))


def test_parse_ranges_starts_from_the_reach_or_the_limits_when_told() -> None:
    reach = parse_ranges('reach', OMX_CHAIN)
    assert reach.tolist() == [list(joint.reach) for joint in OMX_CHAIN.joints]
    assert reach[1].tolist() == [-1.5, 1.5] != list(OMX_HAND_GUIDED_RANGES[1])
    limits = parse_ranges(' limits , joint2=-1:1', OMX_CHAIN)
    assert limits[0].tolist() == list(OMX_CHAIN.joints[0].limits)
    assert limits[1].tolist() == [-1.0, 1.0]
    with pytest.raises(ValueError, match="optional 'reach' or 'limits' first"):
        parse_ranges('joint2=-1:1,reach', OMX_CHAIN)


def test_written_recording_reads_back(tmp_path: Path) -> None:
    poses, joints = synthetic_samples(OMX_CHAIN, 50, seed=1)
    stamps = 10**18 + 10_000_000 * np.arange(50)
    pose_csv, joint_csv = write_recording(tmp_path, stamps, joints, OMX_CHAIN, {'gripper': 0.0})

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    np.testing.assert_allclose(recording.joints, joints, atol=1e-15)
    np.testing.assert_allclose(recording.poses, poses, atol=1e-15)
