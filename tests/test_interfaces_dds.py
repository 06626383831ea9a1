"""The generated interfaces between two real processes over DDS (loopback only)."""

from pathlib import Path

import numpy as np
from golden import REFERENCE_JOINTS, REFERENCE_POSES
from open_manipulator_msgs.msg import KinematicsPose
from open_manipulator_msgs.srv import SetJointPosition

from iknet.srv import SolveIK
from iknet_core.kinematics import OMX_CHAIN, pose_from_joints

PEER = Path(__file__).parent / 'nodes' / 'interface_peer.py'


def test_solve_ik_round_trip(processes, ros):
    processes.python(PEER)
    node = ros.node('solve_ik_client')
    client = node.create_client(SolveIK, 'solve_ik')
    for joints, pose in zip(REFERENCE_JOINTS, REFERENCE_POSES, strict=True):
        request = SolveIK.Request(max_solutions=4)
        request.target.header.frame_id = 'world'
        position = request.target.pose.position
        position.x, position.y, position.z = pose[:3]
        orientation = request.target.pose.orientation
        orientation.x, orientation.y, orientation.z, orientation.w = pose[3:]
        response = ros.call(client, request)
        assert response.success
        assert len(response.solutions) == len(response.position_errors) >= 1
        assert response.solutions[0].name == OMX_CHAIN.joint_names
        # Rows are rounded to 1e-6, so the closed form reproduces them to a few micrometres.
        assert max(response.position_errors) < 5e-6
        recovered = np.array([s.position for s in response.solutions])
        wrapped = np.angle(np.exp(1j * (recovered - joints)))
        assert np.abs(wrapped).max(axis=1).min() < 1e-4


def test_open_manipulator_msgs_round_trip(processes, ros):
    processes.python(PEER)
    node = ros.node('omx_client')
    poses: list[KinematicsPose] = []
    node.create_subscription(KinematicsPose, 'kinematics_pose', poses.append, 10)
    client = node.create_client(SetJointPosition, 'goal_joint_space_path')
    request = SetJointPosition.Request(path_time=1.0)
    request.joint_position.joint_name = OMX_CHAIN.joint_names
    request.joint_position.position = list(REFERENCE_JOINTS[0])
    assert ros.call(client, request).is_planned
    request.joint_position.joint_name = ['elbow']
    assert not ros.call(client, request).is_planned

    expected = pose_from_joints(OMX_CHAIN, REFERENCE_JOINTS[0])
    assert ros.spin_until(
        lambda: bool(poses) and abs(poses[-1].pose.position.z - expected[2]) < 1e-9
    )
    latest = poses[-1]
    assert latest.header.stamp.sec > 0
    np.testing.assert_allclose(
        [latest.pose.position.x, latest.pose.position.y, latest.pose.position.z],
        expected[:3],
        atol=1e-12,
    )
