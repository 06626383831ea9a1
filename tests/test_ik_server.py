"""The IK server as a real process beside the simulated OM-X, called over DDS (loopback)."""

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from message_helpers import readme_service_calls
from open_manipulator_msgs.msg import KinematicsPose
from open_manipulator_msgs.srv import SetKinematicsPose
from processes import NODE_START_S
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

from iknet.srv import SolveIK
from iknet_core.csv_schema import KINEMATICS_POSE_FILE, POSE_COLUMNS
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics, pose_from_joints
from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_angle_between
from iknet_core.resources import TEST_DATA, shipped
from iknet_core.resources import installed_executable as executable
from iknet_ros.qos import SERVICE_QUEUE_QOS

CLIENT = Path(__file__).parent / 'nodes' / 'solve_client.py'
POSITION_TOLERANCE = 1e-6  # m, the shipped config


def test_poses(count: int) -> np.ndarray:
    poses = pd.read_csv(shipped(TEST_DATA) / KINEMATICS_POSE_FILE)[list(POSE_COLUMNS)].to_numpy()
    return poses[np.linspace(0, len(poses) - 1, count).astype(int)]


test_poses.__test__ = False  # a helper, not a test


def solve_request(pose, max_solutions=1, refine=True, frame='world', seed=None) -> SolveIK.Request:
    request = SolveIK.Request(max_solutions=max_solutions, refine=refine)
    request.target.header.frame_id = frame
    p, o = request.target.pose.position, request.target.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pose[:3])
    o.x, o.y, o.z, o.w = (float(v) for v in pose[3:])
    if seed is not None:
        request.seed = seed
    return request


def assert_errors_match_fk(response, pose) -> None:
    joints = np.array([s.position for s in response.solutions])
    position, rotation = forward_kinematics(OMX_CHAIN, joints)
    np.testing.assert_allclose(
        response.position_errors, np.linalg.norm(position - pose[:3], axis=-1), atol=1e-9
    )
    target_rotation = matrix_from_quaternion(np.asarray(pose[3:]))
    np.testing.assert_allclose(
        response.orientation_errors, rotation_angle_between(rotation, target_rotation), atol=1e-7
    )


@pytest.fixture
def server(processes, tmp_path):
    processes.start(executable('omx_sim'), log=tmp_path / 'sim.log')
    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'device:=cpu', log=tmp_path / 'server.log'
    )
    return tmp_path


@pytest.fixture
def solve_client(server, ros):
    node = ros.node('test_client')
    client = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    assert client.wait_for_service(timeout_sec=NODE_START_S), (server / 'server.log').read_text()
    return client


def latest_pose(ros, node) -> list[KinematicsPose]:
    poses: list[KinematicsPose] = []
    node.create_subscription(KinematicsPose, '/kinematics_pose', poses.append, 10)
    assert ros.spin_until(lambda: bool(poses), 10.0), 'no /kinematics_pose from the simulator'
    return poses


def test_solves_100_test_poses_with_errors_matching_fk(ros, solve_client):
    for pose in test_poses(100):
        response = ros.call(solve_client, solve_request(pose, max_solutions=2))
        assert response.success, response.message
        assert response.position_errors[0] < POSITION_TOLERANCE
        assert response.solutions[0].name == OMX_CHAIN.joint_names
        assert_errors_match_fk(response, pose)


def test_seed_puts_the_nearest_solution_first(ros, solve_client):
    pose = test_poses(7)[3]
    both = ros.call(solve_client, solve_request(pose, max_solutions=4))
    assert both.success
    for solution in both.solutions:
        seed = JointState(name=OMX_CHAIN.joint_names, position=list(solution.position))
        response = ros.call(solve_client, solve_request(pose, max_solutions=4, seed=seed))
        wrapped = np.angle(np.exp(1j * (np.array(response.solutions[0].position) - seed.position)))
        assert np.abs(wrapped).max() < 1e-3, response.message


def test_goal_task_space_path_moves_the_simulated_arm(ros, solve_client):
    node = ros.node('mover')
    poses = latest_pose(ros, node)
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    target = test_poses(9)[4]
    request = SetKinematicsPose.Request(planning_group='arm', path_time=1.0)
    request.kinematics_pose.pose = solve_request(target).target.pose
    # On a loaded machine the server may not have discovered the controller yet; it then refuses
    # with "not available" (see the silent-controller test), and a caller tries again.
    assert ros.spin_until(lambda: ros.call(mover, request, timeout_s=20.0).is_planned, 20.0)

    def error() -> float:
        reached = poses[-1].pose.position
        return float(np.linalg.norm(np.array([reached.x, reached.y, reached.z]) - target[:3]))

    # path_time is 1 s; allow a loaded machine some slack before judging where the arm ended.
    # The simulator quantizes joints to 4096 ticks: ~0.4 mm of tip motion per tick.
    ros.spin_until(lambda: error() < 2e-3, 6.0)
    assert error() < 2e-3


BAD_REQUESTS = {
    'nan position': (lambda r: setattr(r.target.pose.position, 'x', math.nan), 'not finite'),
    'inf orientation': (lambda r: setattr(r.target.pose.orientation, 'w', math.inf), 'finite'),
    'zero quaternion': (
        lambda r: [setattr(r.target.pose.orientation, a, 0.0) for a in 'xyzw'],
        'unit quaternion',
    ),
    'non-unit quaternion': (lambda r: setattr(r.target.pose.orientation, 'w', 3.0), 'norm'),
    'other frame': (lambda r: setattr(r.target.header, 'frame_id', 'camera'), 'base frame'),
    'unreachable': (lambda r: setattr(r.target.pose.position, 'x', 0.5), 'mm'),
    'millimetres for metres': (
        lambda r: setattr(r.target.pose.position, 'x', 200.0),
        'the target is 200 m from the base, the arm 0.461 m stretched: positions are in metres',
    ),
    'unknown solver': (lambda r: setattr(r, 'solver', 'magic'), "solver 'magic' is not available"),
    'wrong seed names': (
        lambda r: setattr(r, 'seed', JointState(name=['a', 'b', 'c', 'd'], position=[0.0] * 4)),
        'seed lacks joints',
    ),
}


def test_bad_requests_fail_with_a_reason_and_never_move_the_arm(ros, solve_client):
    node = ros.node('watcher')
    poses = latest_pose(ros, node)
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    good = test_poses(5)[2]
    ros.spin_until(lambda: False, 0.3)
    before = poses[-1].pose.position
    for name, (corrupt, reason) in BAD_REQUESTS.items():
        request = solve_request(good)
        corrupt(request)
        response = ros.call(solve_client, request)
        assert not response.success, name
        assert reason in response.message, (name, response.message)
        goal = SetKinematicsPose.Request(path_time=0.5)
        goal.kinematics_pose.pose = request.target.pose
        goal.kinematics_pose.header.frame_id = request.target.header.frame_id
        if name not in ('wrong seed names', 'unknown solver'):  # not part of a move request
            assert not ros.call(mover, goal).is_planned, name
    bad_time = SetKinematicsPose.Request(path_time=-1.0)
    bad_time.kinematics_pose.pose = solve_request(good).target.pose
    assert not ros.call(mover, bad_time).is_planned
    ros.spin_until(lambda: False, 1.0)
    after = poses[-1].pose.position
    assert (after.x, after.y, after.z) == (before.x, before.y, before.z)
    assert ros.call(solve_client, solve_request(good)).success  # still answering


def test_a_move_too_fast_for_the_arm_is_refused(processes, ros, server):
    node = ros.node('hurried')
    stop = node.create_client(Trigger, '/ik_server/stop')
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    assert stop.wait_for_service(timeout_sec=NODE_START_S), (server / 'server.log').read_text()
    # The server has the arm's joint states once it holds the arm at them.
    assert ros.spin_until(lambda: ros.call(stop, Trigger.Request()).success, 60.0)
    # A millisecond for a turn of joint1 of a radian or more (the simulator starts at 0).
    target = pose_from_joints(OMX_CHAIN, np.array([[1.2, 0.0, 0.3, 0.5]]))[0]
    too_fast = SetKinematicsPose.Request(path_time=1e-3)
    too_fast.kinematics_pose.pose = solve_request(target).target.pose
    assert not ros.call(mover, too_fast).is_planned
    processes.stop_all()  # the server's log, whole
    assert (
        'goal_task_space_path refused: path_time 0.001 s needs joint1 at'
        in (server / 'server.log').read_text()
    )


def test_eight_concurrent_clients_200_requests_each(processes, server, tmp_path):
    """Eight client processes at once, each sending 200 requests one after the other."""
    poses_file = tmp_path / 'poses.csv'
    np.savetxt(poses_file, test_poses(200), delimiter=',')
    logs = [tmp_path / f'client_{index}.log' for index in range(8)]
    clients = [processes.python(CLIENT, poses_file, log=log) for log in logs]
    for client in clients:
        client.wait(timeout=300)
    outputs = [log.read_text() for log in logs]
    assert [client.returncode for client in clients] == [0] * 8, outputs
    # Lost first answers are discovery (service_calls.py); later ones would be the queue depth.
    assert all('answered 200, resent 0 after the first' in output for output in outputs), outputs


def test_solve_ik_answers_while_a_move_waits_for_a_silent_controller(processes, ros, tmp_path):
    """No controller at all: the move waits command_timeout, IK requests are answered meanwhile."""
    processes.start(
        executable('ik_server'),
        '--ros-args',
        '-p', 'device:=cpu',
        '-p', 'command_timeout:=4.0',
        '-p', 'goal_joint_space_path_service:=/nobody/goal_joint_space_path',
        log=tmp_path / 'server.log',
    )  # fmt: skip
    node = ros.node('impatient')
    solve = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    assert solve.wait_for_service(timeout_sec=NODE_START_S), (tmp_path / 'server.log').read_text()
    pose = test_poses(5)[1]
    goal = SetKinematicsPose.Request(path_time=1.0)
    goal.kinematics_pose.pose = solve_request(pose).target.pose
    # A refused goal first: once it is answered the server has discovered this client, so the
    # one call below that cannot be resent is not lost to discovery (service_calls.py).
    assert not ros.call(mover, SetKinematicsPose.Request(path_time=-1.0)).is_planned
    moving = mover.call_async(goal)
    answered_while_moving = 0
    for pose in test_poses(20):
        response = ros.call(solve, solve_request(pose))
        assert response.success, response.message
        answered_while_moving += not moving.done()
    assert answered_while_moving == 20
    # No joint states either: a stop cannot hold the arm, and says so.
    stop = node.create_client(Trigger, '/ik_server/stop')
    stopped = ros.call(stop, Trigger.Request(), timeout_s=60.0)
    assert not stopped.success
    assert 'no joint states from the arm have come' in stopped.message, stopped.message
    assert ros.spin_until(moving.done, 15.0)
    assert not moving.result().is_planned
    assert 'nobody/goal_joint_space_path is not available' in (tmp_path / 'server.log').read_text()


def test_the_readme_service_call_is_answered(ros, solve_client):
    (request,) = readme_service_calls('/ik_server/solve_ik', SolveIK)
    response = ros.call(solve_client, request)
    assert response.success, response.message
    assert 1 <= len(response.solutions) <= request.max_solutions
    assert response.solutions[0].name == OMX_CHAIN.joint_names


def test_position_only_requests_reach_the_position_in_any_orientation(ros, solve_client):
    # A point the OM-X reaches, with an orientation it cannot take there (tool rolled 90 deg).
    pose = [0.2, 0.05, 0.12, 0.7071068, 0.0, 0.0, 0.7071068]
    full = ros.call(solve_client, solve_request(pose))
    assert not full.success
    request = solve_request(pose)
    request.position_only = True
    answer = ros.call(solve_client, request)
    assert answer.success, answer.message
    assert answer.message.startswith('network+refine (position only):'), answer.message
    assert answer.position_errors[0] <= POSITION_TOLERANCE
    assert answer.orientation_errors[0] > 0.1  # reported, not required
    position, _ = forward_kinematics(OMX_CHAIN, np.array(answer.solutions[0].position))
    assert np.linalg.norm(np.asarray(position) - pose[:3]) <= POSITION_TOLERANCE
    request.solver = 'analytic'
    refused = ros.call(solve_client, request)
    assert not refused.success and 'analytic solves whole poses' in refused.message


def test_trajectory_interface_publishes_the_solution(processes, ros, tmp_path):
    """command_interface trajectory with no action: one JointTrajectory point on the topic,
    reached after path_time."""
    from trajectory_msgs.msg import JointTrajectory

    processes.start(
        executable('ik_server'),
        '--ros-args', '-p', 'device:=cpu', '-p', 'command_interface:=trajectory',
        '-p', "follow_joint_trajectory_action:=''", log=tmp_path / 'server.log',
    )  # fmt: skip
    node = ros.node('arm_controller')
    received: list[JointTrajectory] = []
    node.create_subscription(
        JointTrajectory, '/arm_controller/joint_trajectory', received.append, 10
    )
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    assert mover.wait_for_service(timeout_sec=NODE_START_S), (tmp_path / 'server.log').read_text()
    target = test_poses(9)[4]
    goal = SetKinematicsPose.Request(path_time=2.5)
    goal.kinematics_pose.pose = solve_request(target).target.pose
    # The server's publisher may not have matched this subscription yet: retry until it has.
    assert ros.spin_until(lambda: ros.call(mover, goal).is_planned, 20.0)
    assert ros.spin_until(lambda: bool(received), 5.0)
    trajectory = received[-1]
    assert trajectory.joint_names == OMX_CHAIN.joint_names
    (point,) = trajectory.points
    assert (point.time_from_start.sec, point.time_from_start.nanosec) == (2, 500_000_000)
    position, _ = forward_kinematics(OMX_CHAIN, np.array(point.positions))
    assert np.linalg.norm(position - target[:3]) < POSITION_TOLERANCE


def test_a_solver_the_server_cannot_serve_is_refused_when_set(processes, ros, tmp_path):
    """Started analytic-only (no model), `ros2 param set /ik_server solver network` is refused
    with a reason, and the server keeps answering."""
    from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
    from rcl_interfaces.srv import SetParameters

    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'solver:=analytic',
        '-p', f'model_path:={tmp_path / "missing.pt"}', '-p', 'command_interface:=none',
        log=tmp_path / 'server.log',
    )  # fmt: skip
    node = ros.node('parameter_client')
    solve = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    assert solve.wait_for_service(timeout_sec=NODE_START_S), (tmp_path / 'server.log').read_text()
    setter = node.create_client(SetParameters, '/ik_server/set_parameters')
    results = {}
    for solver in ('network', 'refine-from-zero'):
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=solver)
        request = SetParameters.Request(parameters=[Parameter(name='solver', value=value)])
        results[solver] = ros.call(setter, request).results[0]
    assert not results['network'].successful
    assert "solver 'network' is not available here" in results['network'].reason
    assert results['refine-from-zero'].successful
    response = ros.call(solve, solve_request(test_poses(1)[0]))
    assert response.success and response.message.startswith('refine-from-zero:'), response.message
    assert 'serving without a network' in (tmp_path / 'server.log').read_text()
    # command_interface none sends nothing: a move is not planned (it said it was).
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    move = SetKinematicsPose.Request(planning_group='arm', path_time=1.0)
    move.kinematics_pose.pose = solve_request(test_poses(1)[0]).target.pose
    assert not ros.call(mover, move).is_planned
    assert 'not sent (command_interface is none)' in (tmp_path / 'server.log').read_text()


@pytest.mark.parametrize('solver', ['network', 'network+refine', 'analytic'])
def test_iknet_test_answers_what_the_server_answers(processes, ros, tmp_path, solver):
    """iknet-test's solver (method_under_test) and ik_server give the same joints per pose."""
    from iknet_train.evaluate import build_parser, method_under_test

    processes.start(
        executable('ik_server'), '--ros-args', '-p', f'solver:={solver}', '-p', 'device:=cpu',
        '-p', 'command_interface:=none', log=tmp_path / 'server.log',
    )  # fmt: skip
    node = ros.node('pin_client')
    client = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    assert client.wait_for_service(timeout_sec=NODE_START_S), (tmp_path / 'server.log').read_text()
    poses = test_poses(40)
    flags = build_parser().parse_args(['--solver', solver, '--device', 'cpu'])
    _, local = method_under_test(flags)
    rotations = matrix_from_quaternion(poses[:, 3:])
    expected = [local.solve(p, r).joints[0] for p, r in zip(poses[:, :3], rotations, strict=True)]
    for pose, joints in zip(poses, expected, strict=True):
        response = ros.call(client, solve_request(pose, refine=False))
        assert response.message.startswith(f'{solver}:'), response.message
        np.testing.assert_allclose(response.solutions[0].position, joints, atol=1e-9)


def test_a_move_outside_the_limits_or_too_fast_is_refused_with_the_reason():
    from iknet_core.kinematics.chain import OMX_CHAIN
    from iknet_core.solvers import Solutions
    from iknet_ros.ik_server import MOVE_SPEED_CAP, move_refusal

    def solutions(*joints: float, within_limits: bool = True) -> Solutions:
        one = np.ones(1, dtype=bool)
        limits = np.full(1, within_limits)
        return Solutions(np.array([joints]), np.zeros(1), np.zeros(1), limits, one)

    start = np.zeros(4)
    assert move_refusal(OMX_CHAIN, solutions(0.5, 0.0, 0.0, 0.0), start, 1.0) == ''
    too_fast = move_refusal(OMX_CHAIN, solutions(0.98, 0.0, 0.0, 0.0), start, 1e-3)
    assert too_fast.startswith('path_time 0.001 s needs joint1 at 980 rad/s, above 6.28 rad/s')
    across = solutions(2.5, 0.0, 0.0, 0.0)  # 5 rad in 1 s: under a turn a second
    assert MOVE_SPEED_CAP > 5.0 and move_refusal(OMX_CHAIN, across, start - 2.5, 1.0) == ''
    # No joint state yet: the speed is not judged (across each joint's whole range, it refused
    # a server's first moves on a busy machine, before the joint states came).
    assert move_refusal(OMX_CHAIN, solutions(0.5, 0.0, 0.0, 0.0), None, 0.5) == ''
    # Outside the limits as the solver judged them (its slack: a goal on a limit is in).
    outside = move_refusal(OMX_CHAIN, solutions(0, 0, 0, 2.05, within_limits=False), start, 1.0)
    assert outside.startswith('joint4 = 2.0500 rad is outside its software limits')
    on_limit = solutions(0.0, 0.0, 0.0, 1.97 + 1e-14)
    assert move_refusal(OMX_CHAIN, on_limit, start, 1.0) == ''


def test_several_solutions_say_how_many_are_other_arm_poses():
    # A UR5 has eight arm poses at most, and turns whole turns at every joint: asked for eight,
    # some answers are twins of others, which the message says rather than eight arm poses.
    from iknet_core.kinematics.robots import named_chain
    from iknet_core.solvers.factory import build_solver
    from iknet_core.solvers.policy import arm_pose_count
    from iknet_core.solvers.settings import DEFAULT_SETTINGS
    from iknet_ros.ik_server import describe

    chain = named_chain('ur5')
    position, rotation = forward_kinematics(chain, np.array([0.3, -1.0, 1.2, -0.5, 0.8, 0.2]))
    solutions = build_solver('refine-from-zero', chain).solve(position, rotation, max_solutions=8)
    count = arm_pose_count(chain, solutions.joints, DEFAULT_SETTINGS.duplicate_tolerance)
    assert 1 < count < len(solutions) == 8
    said = describe(solutions, chain, DEFAULT_SETTINGS)
    assert said.startswith(f'8 solution(s) ({count} arm poses, the rest whole-turn twins), best')
    # A twin is a row turned a whole turn at a joint that turns; another arm pose is not.
    first = solutions.joints[0]
    twin, other = first + np.array([2 * math.pi, 0, 0, 0, 0, 0]), first + 0.3
    assert arm_pose_count(chain, np.array([first, twin]), 1e-3) == 1
    assert arm_pose_count(chain, np.array([first, twin, other]), 1e-3) == 2
    one = build_solver('refine-from-zero', chain).solve(position, rotation)
    assert describe(one, chain, DEFAULT_SETTINGS).startswith('1 solution(s), best')
