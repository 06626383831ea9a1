"""The IK server for an arm given as a URDF: a file, or /robot_description as MoveIt has it."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
from arm_helpers import legacy_controller_stand_in
from chain_helpers import omx_with_one_turn_base
from open_manipulator_msgs.srv import SetKinematicsPose
from processes import NODE_START_S
from rcl_interfaces.srv import GetParameters
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from recording_helpers import wait_for
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from test_chain_tool import LONG_ARM
from test_ik_server import solve_request

from iknet.srv import SolveIK
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.transforms import quaternion_from_matrix
from iknet_core.kinematics.urdf import chain_to_urdf
from iknet_core.resources import DEFAULT_MODEL, shipped
from iknet_core.resources import installed_executable as executable
from iknet_ros.qos import SERVICE_QUEUE_QOS

LINKS = ('-p', 'base_link:=world', '-p', 'tip_link:=end_effector_link')


def reachable_poses(count: int) -> tuple[np.ndarray, np.ndarray]:
    """Poses (count, 7) of LONG_ARM from joints inside its limits, and those joints."""
    low, high = np.array([joint.limits for joint in LONG_ARM.joints]).T
    joints = np.random.default_rng(3).uniform(low, high, (count, LONG_ARM.n_joints)) * 0.8
    position, rotation = forward_kinematics(LONG_ARM, joints)
    return np.concatenate([position, quaternion_from_matrix(rotation)], axis=-1), joints


def assert_serves_the_long_arm(ros, log: Path) -> None:
    node = ros.node('urdf_client')
    client = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    assert client.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    # The service exists before the chain arrives (requests until then: "not ready").
    wait_for(lambda: 'ready in' in log.read_text(), 90.0, f'the server to log "ready" ({log})')
    poses, _ = reachable_poses(10)
    solved = 0
    for pose in poses:
        response = ros.call(client, solve_request(pose))
        if response.success:
            solved += 1
            assert response.solutions[0].name == LONG_ARM.joint_names
            position, _ = forward_kinematics(LONG_ARM, np.array(response.solutions[0].position))
            assert np.linalg.norm(np.asarray(position) - pose[:3]) < 1e-6
    assert solved >= 8, f'{solved} of 10 reachable poses solved from zero'


def test_server_started_from_a_urdf_file_answers_with_its_joints(processes, ros, tmp_path):
    urdf = tmp_path / 'long_arm.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    log = tmp_path / 'server.log'
    processes.start(
        executable('ik_server'), '--ros-args', '-p', f'urdf:={urdf}', *LINKS,
        '-p', 'solver:=refine-from-zero', '-p', 'command_interface:=none', log=log,
    )  # fmt: skip
    assert_serves_the_long_arm(ros, log)
    assert 'serving long_arm without a network: the shipped models are for open_manipulator_x' in (
        log.read_text()
    )


def test_server_reads_the_arm_from_robot_description(processes, ros, tmp_path):
    node = ros.node('robot_state_publisher_stand_in')
    latched = QoSProfile(
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )
    publisher = node.create_publisher(String, '/robot_description', latched)
    publisher.publish(String(data=''))  # an empty one first: not an arm, so still waiting
    log = tmp_path / 'server.log'
    # The default solver, network+refine, with no model for this arm: refine-from-zero serves.
    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'robot_description_topic:=/robot_description',
        *LINKS, '-p', 'command_interface:=none', log=log,
    )  # fmt: skip
    wait_for(
        lambda: 'an empty robot description' in log.read_text(), 90.0, f'the refusal in {log}'
    )
    # A client is told why nothing is served: the description came and was refused.
    solve = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    assert solve.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    refused = ros.call(solve, solve_request(np.array([0.2, 0.0, 0.1, 0.0, 0.0, 0.0, 1.0])))
    assert not refused.success
    assert 'on /robot_description cannot be served (it was empty)' in refused.message
    publisher.publish(String(data=chain_to_urdf(LONG_ARM)))
    assert_serves_the_long_arm(ros, log)
    text = log.read_text()
    assert "solver 'network+refine' needs a model_path trained for long_arm" in text
    assert 'solver refine-from-zero; available' in text
    getter = node.create_client(GetParameters, '/ik_server/get_parameters')
    (value,) = ros.call(getter, GetParameters.Request(names=['solver'])).values
    assert value.string_value == 'refine-from-zero'  # as `ros2 param get` reads it


def test_a_continuous_joint_is_solved_and_moved_on_from_where_the_arm_is(processes, ros, tmp_path):
    # The arm's continuous joint1 reads a turn on, 3.0 + 2 pi: a goal at 3.1 rad is commanded
    # as 3.1 + 2 pi, a short move, not as 3.1 (a turn back round).
    chain = omx_with_one_turn_base()
    urdf = tmp_path / 'omx_continuous.urdf'
    urdf.write_text(chain_to_urdf(chain))
    node = ros.node('legacy_controller_stand_in')
    commanded = legacy_controller_stand_in(node)
    arm = [3.0 + 2 * math.pi, 0.1, 0.2, 0.3]
    states = node.create_publisher(JointState, '/joint_states', 10)
    node.create_timer(
        0.05, lambda: states.publish(JointState(name=chain.joint_names, position=arm))
    )
    log = tmp_path / 'server.log'
    processes.start(
        executable('ik_server'), '--ros-args', '-p', f'urdf:={urdf}', *LINKS,
        '-p', 'solver:=refine-from-zero', log=log,
    )  # fmt: skip
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    assert mover.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    wait_for(lambda: 'ready in' in log.read_text(), 90.0, f'the server to log "ready" ({log})')
    goal = np.array([3.1, 0.1, 0.2, 0.3])
    position, rotation = forward_kinematics(chain, goal)
    request = SetKinematicsPose.Request(planning_group='arm', path_time=1.0)
    pose = request.kinematics_pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in position)
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(v) for v in quaternion_from_matrix(rotation))
    # Until the server has the arm's states it solves without a seed: ask until it moved from them.
    assert ros.spin_until(
        lambda: (
            ros.call(mover, request, resend=False).is_planned
            and abs(commanded[-1][0] - arm[0]) < 0.5
        ),
        30.0,
    ), (commanded, log.read_text())
    turned_on = goal + np.array([2 * math.pi, 0, 0, 0])
    np.testing.assert_allclose(commanded[-1], turned_on, atol=1e-4)
    # SolveIK seeded with the arm's joints answers the same way; unseeded, inside +-pi.
    solve = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    target = np.concatenate([position, quaternion_from_matrix(rotation)])
    seeded = solve_request(target, seed=JointState(name=chain.joint_names, position=arm))
    for request, expected in ((seeded, turned_on), (solve_request(target), goal)):
        response = ros.call(solve, request)
        assert response.success, response.message
        np.testing.assert_allclose(response.solutions[0].position, expected, atol=1e-4)
        assert response.within_limits[0]


def test_a_model_for_another_arm_is_refused_at_start(ros_env, tmp_path):
    urdf = tmp_path / 'long_arm.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    command = [
        str(executable('ik_server')), '--ros-args', '-p', f'urdf:={urdf}', *LINKS,
        '-p', f'model_path:={shipped(DEFAULT_MODEL)}', '-p', 'command_interface:=none',
    ]  # fmt: skip
    result = subprocess.run(command, env=ros_env, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "was trained for chain 'open_manipulator_x'" in output and "not 'long_arm'" in output


def test_a_parameter_of_the_wrong_type_is_one_fatal_line(ros_env):
    command = [str(executable('ik_server')), '--ros-args', '-p', 'position_tolerance:=fine']
    result = subprocess.run(command, env=ros_env, capture_output=True, text=True, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and 'Traceback' not in output, output
    assert "parameter 'position_tolerance' to 'fine' of type 'STRING'" in output
    assert "expecting type 'DOUBLE'" in output
