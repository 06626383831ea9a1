"""`~/solve_path` of the IK server as a real process, called over DDS (loopback)."""

import math
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from arm_helpers import legacy_controller_stand_in
from builtin_interfaces.msg import Time
from chain_helpers import omx_with_one_turn_base
from geometry_msgs.msg import Pose, PoseStamped
from message_helpers import readme_service_calls
from open_manipulator_msgs.msg import KinematicsPose
from open_manipulator_msgs.srv import SetKinematicsPose
from processes import NODE_START_S
from rcl_interfaces.msg import Log
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from test_path_timing import finite_differences

from iknet.srv import SolveIK, SolvePath
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.kinematics.robots import example_robot_urdf, named_chain
from iknet_core.resources import installed_executable as executable
from iknet_core.solvers.path import smooth_joint_paths
from iknet_core.solvers.settings import DEFAULT_SETTINGS
from iknet_ros import path_service
from iknet_ros.requests import RequestError

MAX_VELOCITY, MAX_ACCELERATION = 0.8, 1.5  # rad/s, rad/s^2
HELD_CONTROLLER = Path(__file__).parent / 'nodes' / 'held_trajectory_controller.py'


@pytest.fixture
def client(processes, ros, tmp_path):
    # No simulator: no joint states, so a request without start joints is refused.
    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'device:=cpu', log=tmp_path / 'server.log'
    )
    node = ros.node('path_client')
    client = node.create_client(SolvePath, '/ik_server/solve_path')
    assert client.wait_for_service(timeout_sec=NODE_START_S), (tmp_path / 'server.log').read_text()
    return client


def path_request(poses: np.ndarray, start: np.ndarray | None, frame: str = 'world'):
    request = SolvePath.Request(max_velocity=MAX_VELOCITY, max_acceleration=MAX_ACCELERATION)
    request.path.header.frame_id = frame
    for pose in poses:
        message = Pose()
        p, o = message.position, message.orientation
        p.x, p.y, p.z = (float(v) for v in pose[:3])
        o.x, o.y, o.z, o.w = (float(v) for v in pose[3:])
        request.path.poses.append(message)
    if start is not None:
        request.start = JointState(name=OMX_CHAIN.joint_names, position=start.tolist())
    return request


def to_timed(request, times, keep_path: bool = False):
    """The request's path moved to timed_path, waypoint i at times[i] s after a start at 100 s."""
    request.timed_path.header.frame_id = request.path.header.frame_id
    request.timed_path.header.stamp = Time(sec=100)
    for pose, seconds in zip(request.path.poses, times, strict=True):
        stamped = PoseStamped(pose=pose)
        stamped.header.stamp = Time(sec=100 + int(seconds), nanosec=round(seconds % 1 * 1e9))
        request.timed_path.poses.append(stamped)
    if not keep_path:
        request.path.poses = []
    return request


def seconds(point) -> float:
    return point.time_from_start.sec + point.time_from_start.nanosec * 1e-9


def test_a_smooth_path_comes_back_as_a_timed_trajectory_that_reaches_every_waypoint(ros, client):
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=50, seed=8)[0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    response = ros.call(client, path_request(poses, curve[0]), timeout_s=60.0)
    assert response.success, response.message
    assert response.failed_at == -1
    trajectory = response.trajectory
    assert trajectory.joint_names == OMX_CHAIN.joint_names
    assert trajectory.header.frame_id == 'world'
    joints = np.array([point.positions for point in trajectory.points])
    assert joints.shape == (50, 4)
    reached, _ = forward_kinematics(OMX_CHAIN, joints)
    assert np.linalg.norm(reached - poses[:, :3], axis=-1).max() < 1e-6
    assert max(response.position_errors) < 1e-6 and len(response.orientation_errors) == 50
    # Timed from the start joints: every stamp after 0 s, every joint within the speed limit.
    stamps = np.array([0.0] + [seconds(point) for point in trajectory.points])
    assert (np.diff(stamps) > 0).all()
    speeds = (
        np.abs(np.diff(np.concatenate([curve[:1], joints]), axis=0)) / np.diff(stamps)[:, None]
    )
    assert speeds.max() <= MAX_VELOCITY * (1 + 1e-6)
    assert not response.executed


def test_a_resent_path_request_is_answered_as_the_first_was(processes, ros, client, tmp_path):
    # ik_client resends a path request it has no answer to after 1 s (discovery may lose the
    # first): followed again, a long path held the single-threaded server for seconds more.
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=50, seed=3)[0]
    request = path_request(pose_from_joints(OMX_CHAIN, curve), curve[0])
    first = ros.call(client, request, timeout_s=60.0)
    again = ros.call(client, request, timeout_s=60.0)
    assert first.success and list(again.position_errors) == list(first.position_errors)
    request.max_velocity = MAX_VELOCITY / 2  # another request: followed and timed anew
    slower = ros.call(client, request, timeout_s=60.0)
    assert seconds(slower.trajectory.points[-1]) > seconds(first.trajectory.points[-1])
    processes.stop_all()  # its log, whole
    log = (tmp_path / 'server.log').read_text()
    # At least the second (a call unanswered for 1 s on a busy machine is resent too).
    assert 'solve_path: a resent request, answered as before' in log, log


def test_a_path_there_and_back_slows_for_its_reversal_and_for_the_move_to_its_start(ros, client):
    there = np.linspace([0.0, -0.3, 0.2, 0.5], [0.3, 0.0, 0.0, 0.6], 30)
    curve = np.concatenate([there, there[::-1][1:]])
    start = curve[0] - 0.05  # the arm a little off the first waypoint, as its joint states are
    request = path_request(pose_from_joints(OMX_CHAIN, curve), start)
    response = ros.call(client, request, timeout_s=60.0)
    assert response.success, response.message
    joints = np.array([start] + [point.positions for point in response.trajectory.points])
    stamps = np.array([0.0] + [seconds(point) for point in response.trajectory.points])
    speed, acceleration = finite_differences(joints, stamps)
    # Stamps travel in whole nanoseconds: 1e-6 of a short segment's time.
    assert speed <= MAX_VELOCITY * (1 + 1e-5)
    assert acceleration <= MAX_ACCELERATION * (1 + 1e-5)


def test_a_path_out_of_reach_stops_at_its_first_unreachable_waypoint(ros, client):
    start = np.array([0.0, 0.0, 0.0, 0.0])
    pose = pose_from_joints(OMX_CHAIN, start)
    poses = np.repeat(pose[None], 40, 0)
    poses[:, 0] += np.linspace(0.0, 0.4, 40)  # straight out along x, far beyond the reach
    response = ros.call(client, path_request(poses, start), timeout_s=60.0)
    assert not response.success
    assert 0 < response.failed_at < 40
    assert f'waypoint {response.failed_at} is not reached' in response.message
    assert len(response.trajectory.points) == response.failed_at
    assert math.isnan(response.position_errors[-1])
    # Timed, with a speed limit: the same failure, not a speed refusal of the part reached.
    timed = to_timed(path_request(poses, start), 0.01 * np.arange(1, 41))
    again = ros.call(client, timed, timeout_s=60.0)
    assert (again.success, again.failed_at, again.message) == (
        False,
        response.failed_at,
        response.message,
    )


BAD = {
    'empty path': (lambda r: r.path.poses.clear(), 'the path is empty'),
    'nan waypoint': (lambda r: setattr(r.path.poses[1].position, 'y', math.nan), 'waypoint 1:'),
    'other frame': (lambda r: setattr(r.path.header, 'frame_id', 'camera'), 'base frame'),
    'no start': (lambda r: setattr(r, 'start', JointState()), 'no start joints'),
    'start without a joint': (
        lambda r: setattr(r, 'start', JointState(name=['joint1'], position=[0.0])),
        "start lacks joints ['joint2', 'joint3', 'joint4']",
    ),
    'start outside limits': (
        lambda r: setattr(r.start, 'position', [0.0, 0.0, 0.0, 9.0]),
        'outside its reach',
    ),
    'negative speed': (lambda r: setattr(r, 'max_velocity', -1.0), 'max_velocity'),
    'a speed in the wrong unit': (
        lambda r: setattr(r, 'max_velocity', 1e-9),
        'the trajectory would take',
    ),
    'non-increasing times': (
        lambda r: to_timed(r, [1.0, 2.0, 2.0, 3.0, 4.0]),
        'waypoint 2 at 2.000000000 s after the header stamp does not come after waypoint 1',
    ),
    'first time at the start': (
        lambda r: to_timed(r, [0.0, 1.0, 2.0, 3.0, 4.0]),
        'does not come after the header stamp',
    ),
    'times too fast': (
        lambda r: to_timed(r, [1e-3, 2e-3, 3e-3, 4e-3, 5e-3]),
        'rad/s to reach waypoint',
    ),
    'clock times under a zero header': (
        lambda r: setattr(
            to_timed(r, [1.7e9 + k for k in range(5)]).timed_path.header, 'stamp', Time()
        ),
        'more than a day: stamp the header',
    ),
    'path and timed_path': (
        lambda r: to_timed(r, [1.0, 2.0, 3.0, 4.0, 5.0], keep_path=True),
        'one of path and timed_path',
    ),
    'waypoint in another frame': (
        lambda r: setattr(
            to_timed(r, [1, 2, 3, 4, 5]).timed_path.poses[3].header, 'frame_id', 'cam'
        ),
        "waypoint 3: frame 'cam' is not the path's 'world'",
    ),
}


def test_a_timed_path_keeps_its_own_times(ros, client):
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=20, seed=8)[0]
    times = 2.0 + 0.25 * np.arange(20)
    request = to_timed(path_request(pose_from_joints(OMX_CHAIN, curve), curve[0]), times)
    request.max_velocity = 2.0  # the path's own times: 1.04 rad/s, within the limit given
    response = ros.call(client, request, timeout_s=60.0)
    assert response.success, response.message
    assert "on the path's times" in response.message
    got = [seconds(point) for point in response.trajectory.points]
    assert got == pytest.approx(times, abs=1e-9)
    # Every stamp the header's, as planners stamp a path: timed at the limits, as a PoseArray.
    request = path_request(pose_from_joints(OMX_CHAIN, curve), curve[0])
    untimed = ros.call(client, to_timed(request, np.zeros(20)), timeout_s=60.0)
    assert untimed.success and 'at the limits' in untimed.message
    # A stamped header over unstamped waypoints (zero), as other planners send them: the same.
    request = to_timed(path_request(pose_from_joints(OMX_CHAIN, curve), curve[0]), np.zeros(20))
    for pose in request.timed_path.poses:
        pose.header.stamp = Time()
    unstamped = ros.call(client, request, timeout_s=60.0)
    assert unstamped.success and 'at the limits' in unstamped.message, unstamped.message


def test_the_readme_path_calls_are_answered(ros, client):
    poses_only, timed = readme_service_calls('/ik_server/solve_path', SolvePath)
    # Both start where the arm reaches the first waypoint, as ik_client --line does.
    solve = ros.node('path_start').create_client(SolveIK, '/ik_server/solve_ik')
    first = SolveIK.Request(position_only=True)
    first.target.header.frame_id = 'world'
    first.target.pose = poses_only.path.poses[0]
    (start,) = ros.call(solve, first).solutions
    for request in (poses_only, timed):
        request.start = start
        response = ros.call(client, request, timeout_s=60.0)
        assert response.success, response.message
        assert len(response.trajectory.points) == 2
    assert [seconds(point) for point in response.trajectory.points] == [1.0, 2.0]


def test_alternatives_answer_the_best_of_several_starts(ros, client):
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=30, seed=8)[0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    plain = ros.call(client, path_request(poses, curve[0]), timeout_s=60.0)
    request = path_request(poses, curve[0])
    request.alternatives = 8
    best = ros.call(client, request, timeout_s=60.0)
    assert best.success, best.message
    assert (
        'the best of' in best.message
        and 'from the start joints to its first point' in best.message
    )
    # A whole pose of the OM-X has one solution inside the limits here: the start's own path.
    joints = np.array([point.positions for point in best.trajectory.points])
    assert np.allclose(joints, [point.positions for point in plain.trajectory.points], atol=1e-6)
    # Positions only: many solutions of the first waypoint; the answer still reaches them all.
    request.position_only = True
    anywhere = ros.call(client, request, timeout_s=60.0)
    assert anywhere.success, anywhere.message
    joints = np.array([point.positions for point in anywhere.trajectory.points])
    reached, _ = forward_kinematics(OMX_CHAIN, joints)
    assert np.linalg.norm(reached - poses[:, :3], axis=-1).max() < 1e-6
    start = np.array(anywhere.trajectory.points[0].positions)
    move = np.abs(start - curve[0]).max()  # untimed: the move to the first point is timed too
    assert seconds(anywhere.trajectory.points[0]) >= move / MAX_VELOCITY - 1e-9
    request.alternatives = 65
    refused = ros.call(client, request, timeout_s=60.0)
    assert not refused.success and 'alternatives must be at most 64' in refused.message


def test_tighten_searches_a_path_of_positions_and_says_where_there_is_nothing_to_spare(
    ros, client
):
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=40, seed=8)[0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    request = path_request(poses, curve[0])
    request.position_only = True  # one joint of the OM-X's four to spare
    plain = ros.call(client, request, timeout_s=60.0)
    assert plain.success, plain.message
    request.tighten = True
    tightened = ros.call(client, request, timeout_s=60.0)
    assert tightened.success, tightened.message
    assert 'not tightened' not in tightened.message
    joints = np.array([point.positions for point in tightened.trajectory.points])
    reached, _ = forward_kinematics(OMX_CHAIN, joints)
    assert np.linalg.norm(reached - poses[:, :3], axis=-1).max() < 1e-5
    before = np.array([point.positions for point in plain.trajectory.points])
    largest = np.abs(np.diff(joints, axis=0)).max()
    assert largest <= np.abs(np.diff(before, axis=0)).max() + 1e-9
    request.position_only = False  # whole poses: nothing to spare, followed as without
    whole = ros.call(client, request, timeout_s=60.0)
    assert whole.success and 'not tightened: the arm has no joints to spare' in whole.message


def test_alternatives_rescue_a_start_off_the_path_and_keep_a_timed_path_in_time(ros, client):
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=20, seed=8)[0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    away = curve[0] + np.array([0.6, 0.0, 0.0, 0.0])  # the first waypoint is a jump from here

    def request_from_away(alternatives: int = 0):
        request = path_request(poses, away)
        request.max_step, request.alternatives = 0.4, alternatives  # the curve's: 0.26 rad
        return request

    plain = ros.call(client, request_from_away(), timeout_s=60.0)
    assert (
        not plain.success
        and plain.failed_at == 0
        and 'the path starts away from them' in plain.message
    )
    request = request_from_away(8)
    rescued = ros.call(client, request, timeout_s=60.0)
    assert rescued.success, rescued.message
    first = np.array(rescued.trajectory.points[0].positions)
    assert np.allclose(first, curve[0], atol=1e-4)  # the one solution inside the limits
    assert '0.6 rad of joint travel' in rescued.message
    assert seconds(rescued.trajectory.points[0]) >= 0.6 / MAX_VELOCITY - 1e-9
    # A timed path must leave the time for that move (1 rad/s without max_velocity; its steps,
    # 0.26 rad each 0.3 s, are within that too).
    for first_stamp, taken in ((0.1, False), (2.0, True)):
        timed = to_timed(request_from_away(8), first_stamp + 0.3 * np.arange(20))
        timed.max_velocity = 0.0
        response = ros.call(client, timed, timeout_s=60.0)
        assert response.success == taken, response.message


def test_bad_requests_get_success_false_with_the_reason(ros, client):
    """Every case against one server (a server per case cost CI a minute); each is named."""
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=5, seed=9)[0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    wrong = {}
    for case, (spoil, reason) in BAD.items():
        request = path_request(poses, curve[0])  # a new request each time: spoil changes it
        spoil(request)
        response = ros.call(client, request, timeout_s=60.0)
        refused = not response.success and reason in response.message
        if not (refused and response.failed_at == -1 and not response.trajectory.points):
            wrong[case] = (response.success, response.failed_at, response.message)
    assert not wrong, f'not refused with the reason, failed_at -1 and no points: {wrong}'


# command_interface -> (extra server parameters, how the server says it handed the path over).
ROUTES = {
    'legacy': ((), '30 goals for /goal_joint_space_path: the first taken'),
    'trajectory': ((), 'sent to /arm_controller/follow_joint_trajectory'),
    'trajectory topic': (
        ('-p', "follow_joint_trajectory_action:=''"),
        'published on /arm_controller/joint_trajectory',
    ),
}


def test_a_start_a_turn_past_the_reach_is_timed_from_the_same_arm():
    # path_service itself, in-process: a continuous joint's state a turn off times the path
    # from the joints follow_path starts from, not a turn away.

    curve = np.array([-2.9, 0.1, 0.2, 0.3]) + np.linspace(0.0, 0.05, 6)[:, None] * [1, 0, 0, 0]
    answers = []
    for start in (curve[0], curve[0] + [2 * math.pi, 0.0, 0.0, 0.0]):
        request = path_request(pose_from_joints(OMX_CHAIN, curve), start)
        answers.append(path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {}))
    assert all(answer.success for answer in answers), [a.message for a in answers]
    assert [seconds(a.trajectory.points[-1]) for a in answers[1:]] == pytest.approx(
        [seconds(answers[0].trajectory.points[-1])]
    )


def test_a_start_past_a_software_limit_is_timed_from_where_the_arm_is():
    # path_service itself, in-process: joint3 rests at 1.48 rad, past its limit (1.4) but
    # inside its reach (1.49). The path is followed from the limit, and the move there takes
    # its time: timed from the limit, the first point came 1 ms in (80 rad/s).
    arm = np.array([0.0, -0.3, 1.48, 0.2])
    inside = np.array([0.0, -0.3, 1.4, 0.2])
    curve = inside + np.linspace(0.0, 0.02, 5)[:, None] * [1.0, 0.0, 0.0, 0.0]
    request = path_request(pose_from_joints(OMX_CHAIN, curve), arm)
    answer = path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})
    assert answer.success, answer.message
    first = np.array(answer.trajectory.points[0].positions)
    assert first[2] <= 1.4 + 1e-9  # inside the limits
    assert seconds(answer.trajectory.points[0]) >= (1.48 - first[2]) / MAX_VELOCITY


def test_tighten_reaches_the_follower_with_and_without_alternatives(monkeypatch):
    # path_service itself, in-process: the request's tighten goes to follow_path, or to
    # alternative_paths where other starts are asked for.
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=10, seed=8)[0]
    asked = []
    for name in ('follow_path', 'alternative_paths'):
        real = getattr(path_service, name)

        def spy(*arguments, real=real, name=name, **keywords):
            asked.append((name, keywords.get('tighten')))
            return real(*arguments, **keywords)

        monkeypatch.setattr(path_service, name, spy)
    request = path_request(pose_from_joints(OMX_CHAIN, curve), curve[0])
    request.position_only, request.tighten = True, True
    for alternatives in (0, 2):
        request.alternatives = alternatives
        answer = path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})
        assert answer.success and 'not tightened' not in answer.message, answer.message
    assert asked == [('follow_path', True), ('alternative_paths', True)]


def test_a_continuous_joint_turned_on_is_followed_from_where_the_arm_is():
    # path_service itself, in-process: an arm whose continuous joint1 reads a turn on gets a
    # trajectory that goes on from there, past +-pi, not one that first turns the base round.
    chain = omx_with_one_turn_base()
    curve = np.array([2.9, 0.1, 0.2, 0.3]) + np.linspace(0.0, 0.5, 11)[:, None] * [1, 0, 0, 0]
    arm = curve[0] + [2 * math.pi, 0.0, 0.0, 0.0]
    states = dict(zip(chain.joint_names, arm, strict=True))
    answer = path_service.solve_path(
        path_request(pose_from_joints(chain, curve), None),
        chain,
        'world',
        DEFAULT_SETTINGS,
        states,
    )
    assert answer.success, answer.message
    joint1 = [point.positions[0] for point in answer.trajectory.points]
    np.testing.assert_allclose(joint1, curve[:, 0] + 2 * math.pi, atol=1e-4)


def test_a_timed_path_is_held_to_the_default_speed_unless_max_velocity_says_more():
    # The OM-X has no URDF velocity limit: a timed path stamped in ms where s were meant (0.6 rad
    # in 10 ms) is refused at the default 1 rad/s, not executed at 60 rad/s; a max_velocity
    # given allows it.
    curve = np.array([0.8, 0.1, 0.2, 0.3]) - np.linspace(0.0, 0.6, 10)[:, None] * [1, 0, 0, 0]
    request = to_timed(
        path_request(pose_from_joints(OMX_CHAIN, curve), curve[0]), 1e-3 * np.arange(1, 11)
    )
    request.max_velocity = 0.0
    with pytest.raises(
        RequestError, match=r'joint1 at 66.7 rad/s .* above the default max_velocity 1 rad/s'
    ):
        path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})
    request.max_velocity = 100.0
    answer = path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})
    assert answer.success, answer.message


def test_an_empty_path_frame_is_the_base_frame_for_its_waypoints_too():
    # '' is the base frame: waypoints stamped in it by name belong to a path framed ''.
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=5, seed=9)[0]
    request = to_timed(
        path_request(pose_from_joints(OMX_CHAIN, curve), curve[0], frame=''), [2, 4, 6, 8, 10]
    )
    for pose in request.timed_path.poses:
        pose.header.frame_id = 'world'
    answer = path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})
    assert answer.success, answer.message
    request.timed_path.poses[2].header.frame_id = 'camera'
    with pytest.raises(RequestError, match="waypoint 2: frame 'camera' is not the path's ''"):
        path_service.solve_path(request, OMX_CHAIN, 'world', DEFAULT_SETTINGS, {})


def test_a_nan_joint_state_is_named_where_the_states_are_needed_and_ignored_elsewhere():
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=6, seed=5)[0]
    states = {**dict(zip(OMX_CHAIN.joint_names, curve[0], strict=True)), 'joint2': math.nan}
    from_start = path_request(pose_from_joints(OMX_CHAIN, curve), curve[0])
    answer = path_service.solve_path(from_start, OMX_CHAIN, 'world', DEFAULT_SETTINGS, states)
    assert answer.success, answer.message
    from_states = path_request(pose_from_joints(OMX_CHAIN, curve), None)
    with pytest.raises(RequestError, match=r"arm's joint positions .*'joint2': nan.* not finite"):
        path_service.solve_path(from_states, OMX_CHAIN, 'world', DEFAULT_SETTINGS, states)


def test_joint_states_from_several_publishers_are_merged_by_name(ros, client):
    # A gripper's driver beside the arm's on /joint_states: its messages, with none of the
    # arm's joints, must not hide the arm's from a request that starts from the joint states.
    node = ros.node('two_drivers')
    publisher = node.create_publisher(JointState, '/joint_states', 10)
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=10, seed=3)[0]
    arm = JointState(name=OMX_CHAIN.joint_names, position=curve[0].tolist())
    gripper = JointState(name=['gripper'], position=[0.01])
    request = path_request(pose_from_joints(OMX_CHAIN, curve), None)
    deadline = time.monotonic() + 60.0  # discovery on a loaded machine takes its time
    while True:
        publisher.publish(arm)
        for _ in range(5):  # the gripper's driver last, and more often
            publisher.publish(gripper)
        ros.spin_until(lambda: False, 0.2)
        response = ros.call(client, request, timeout_s=60.0)
        if 'no start joints' not in response.message or time.monotonic() > deadline:
            break
    assert response.success, response.message


class SimulatedArm:
    """The simulator and a server commanding it through a route, with a client of the server's
    services and the simulator's joint states and poses as they come."""

    def __init__(self, processes, ros, tmp_path, route: str, *parameters: str) -> None:
        extra, _ = ROUTES[route]
        self.log = tmp_path / 'server.log'
        processes.start(executable('omx_sim'), log=tmp_path / 'sim.log')
        processes.start(
            executable('ik_server'), '--ros-args', '-p', 'device:=cpu',
            '-p', f'command_interface:={route.split()[0]}', *extra, *parameters, log=self.log,
        )  # fmt: skip
        self.ros = ros
        self.node = ros.node('path_mover')
        self.client = self.node.create_client(SolvePath, '/ik_server/solve_path')
        assert self.client.wait_for_service(timeout_sec=NODE_START_S), self.log.read_text()
        self.states, self.poses = [], []
        self.node.create_subscription(JointState, '/joint_states', self.states.append, 10)
        self.node.create_subscription(KinematicsPose, '/kinematics_pose', self.poses.append, 10)
        assert ros.spin_until(lambda: bool(self.states) and bool(self.poses), 20.0), 'no sim'
        # The simulator may still be settling into its start pose.
        assert ros.spin_until(self.at_rest, 20.0), 'the simulated arm does not come to rest'

    def at_rest(self) -> bool:
        """Still, by the simulator's velocities: a position held a few messages can be the
        turning point of an overshoot."""
        states = self.states
        return len(states) > 5 and not any(any(s.velocity) for s in states[-5:])

    def joints(self) -> np.ndarray:
        present = dict(zip(self.states[-1].name, self.states[-1].position, strict=False))
        return np.array([present[name] for name in OMX_CHAIN.joint_names])

    def execute(self, path: np.ndarray, max_velocity: float = MAX_VELOCITY) -> SolvePath.Response:
        """The path executed from the joint states the server received."""
        request = path_request(path, None)
        request.execute, request.max_velocity = True, max_velocity
        response = self.ros.call(self.client, request, timeout_s=60.0, resend=False)
        deadline = time.monotonic() + 60.0  # discovery on a loaded machine takes its time
        while 'no start joints' in response.message and time.monotonic() < deadline:
            # The server has no joint state yet: ask again once more have been published.
            seen = len(self.states)
            self.ros.spin_until(lambda seen=seen: len(self.states) > seen + 10, 10.0)
            response = self.ros.call(self.client, request, timeout_s=60.0, resend=False)
        assert response.success and response.executed, response.message
        return response


@pytest.mark.parametrize('route', list(ROUTES))
def test_an_executed_path_ends_the_simulated_arm_at_its_last_pose(processes, ros, tmp_path, route):
    arm = SimulatedArm(processes, ros, tmp_path, route)
    start = arm.joints()
    goal = np.array([0.5, -0.3, 0.2, 0.6])
    curve = start + np.linspace(0.0, 1.0, 30)[:, None] * (goal - start)
    path = pose_from_joints(OMX_CHAIN, curve)
    # Refused, unmoved, while the arm is not at the given start joints.
    elsewhere = path_request(path, start + np.array([0.3, 0.0, 0.0, 0.0]))
    elsewhere.execute = True
    refused = ros.call(arm.client, elsewhere, timeout_s=60.0, resend=False)
    assert not refused.success and not refused.executed
    # (or, before the server has heard the arm, that no joint state has come)
    assert 'not at the start joints' in refused.message or 'none has come' in refused.message

    response = arm.execute(path)
    assert ROUTES[route][1] in response.message, response.message

    def error() -> float:
        reached = arm.poses[-1].pose.position
        return float(np.linalg.norm(np.array([reached.x, reached.y, reached.z]) - path[-1, :3]))

    duration = seconds(response.trajectory.points[-1])
    # The simulator quantizes joints to 4096 ticks: ~0.4 mm of tip motion per tick.
    assert ros.spin_until(lambda: error() < 1e-3, duration + 15.0), f'{error() * 1e3:.2f} mm off'
    # The outcome, logged by the server when it came: the action's result, the legacy goals'.
    done = {
        'legacy': 'path: 30 goals sent to /goal_joint_space_path',
        'trajectory': '/arm_controller/follow_joint_trajectory: trajectory done',
    }.get(route)
    if done is not None:
        assert ros.spin_until(lambda: done in arm.log.read_text(), 15.0), arm.log.read_text()


@pytest.mark.parametrize('route', list(ROUTES))
def test_stop_holds_the_arm_partway_along_a_path_that_other_requests_did_not_wait_for(
    processes, ros, tmp_path, route
):
    arm = SimulatedArm(processes, ros, tmp_path, route)
    start = arm.joints()
    goal = start + np.array([0.9, 0.3, -0.2, 0.0])
    path = pose_from_joints(OMX_CHAIN, start + np.linspace(0.0, 1.0, 40)[:, None] * (goal - start))
    response = arm.execute(path, max_velocity=0.15)
    ends = time.monotonic() + seconds(response.trajectory.points[-1])  # ~6 s from now
    # A path request is answered while the arm moves along the first: a legacy path's goals,
    # sent as they fall due, no longer hold the server's path and move requests.
    answer = ros.call(arm.client, path_request(path, start), timeout_s=60.0)
    assert answer.success, answer.message
    assert goal[0] - arm.joints()[0] > 0.3, 'the arm was nearly done before the answer came'
    assert ros.spin_until(lambda: arm.joints()[0] > start[0] + 0.1, 30.0), 'the arm does not move'

    stop = arm.node.create_client(Trigger, '/ik_server/stop')
    assert stop.wait_for_service(timeout_sec=NODE_START_S), arm.log.read_text()
    (request,) = readme_service_calls('/ik_server/stop', Trigger)
    stopped = ros.call(stop, request, timeout_s=60.0)
    assert stopped.success and 'holding at' in stopped.message, stopped.message
    assert ros.spin_until(arm.at_rest, 20.0), 'the arm does not come to rest after the stop'
    held = arm.joints()
    assert goal[0] - held[0] > 0.2, f'the arm went on to {held}'
    # It stays there past the path's end: no later goal of the path moves it again.
    moved = ros.spin_until(
        lambda: np.abs(arm.joints() - held).max() > 0.01, max(ends - time.monotonic(), 0) + 1.0
    )
    assert not moved, f'the arm moved on from {held} to {arm.joints()}'
    if route == 'legacy':  # the path's remaining goals were dropped, and the server said so
        log = arm.log.read_text()
        assert 'not sent: replaced by a newer goal' in log and 'stop: holding at' in log, log


def test_a_stop_without_recent_joint_states_cancels_the_trajectory_goal(processes, ros, tmp_path):
    # The server hears the arm on a topic of the test's own, which then falls silent: its
    # states go stale, so a stop must not send the arm back to them, and cancels the goal.
    arm = SimulatedArm(
        processes, ros, tmp_path, 'trajectory', '-p', 'joint_states_topic:=/relayed_states'
    )
    relay = arm.node.create_publisher(JointState, '/relayed_states', 10)
    start = arm.joints()
    goal = start + np.array([0.9, 0.3, -0.2, 0.0])
    path = pose_from_joints(OMX_CHAIN, start + np.linspace(0.0, 1.0, 40)[:, None] * (goal - start))
    request = path_request(path, start)
    request.execute, request.max_velocity = True, 0.15
    deadline = time.monotonic() + 60.0
    while True:  # until the server has heard the relayed states
        relay.publish(JointState(name=OMX_CHAIN.joint_names, position=start.tolist()))
        ros.spin_until(lambda: False, 0.2)
        response = ros.call(arm.client, request, timeout_s=60.0, resend=False)
        if 'none has come' not in response.message or time.monotonic() > deadline:
            break
    assert response.success and response.executed, response.message
    silent_since = time.monotonic()
    assert ros.spin_until(lambda: arm.joints()[0] > start[0] + 0.1, 30.0), 'the arm does not move'
    ros.spin_until(lambda: time.monotonic() - silent_since > 1.5, 5.0)  # the states go stale
    stop = arm.node.create_client(Trigger, '/ik_server/stop')
    assert stop.wait_for_service(timeout_sec=NODE_START_S), arm.log.read_text()
    stopped = ros.call(stop, Trigger.Request(), timeout_s=60.0)
    assert stopped.success, stopped.message
    assert "the arm's latest joint states are" in stopped.message
    assert 'canceled the trajectory goal in progress' in stopped.message
    assert ros.spin_until(arm.at_rest, 20.0), 'the arm does not come to rest after the cancel'
    assert goal[0] - arm.joints()[0] > 0.2, f'the arm went on to {arm.joints()}'
    canceled = '/arm_controller/follow_joint_trajectory: trajectory canceled'
    assert ros.spin_until(lambda: canceled in arm.log.read_text(), 15.0), arm.log.read_text()
    # Nor is a path executed from them: the arm may be anywhere by now.
    again = ros.call(arm.client, request, timeout_s=60.0, resend=False)
    assert not again.success and not again.executed
    assert "execute needs where the arm is: the arm's latest joint states are" in again.message


def test_a_stop_is_answered_while_a_long_path_is_solved_and_what_came_before_it_is_not_moved(
    processes, ros, ros_env, tmp_path
):
    # A 7-joint arm's long path with many starts, tightened, takes seconds to solve: the server
    # solves it on its worker thread, so a stop is answered meanwhile. Neither that path nor a
    # move asked after it but before the stop (waiting its turn) is then sent to the arm.
    chain = named_chain('panda')
    start = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785])
    curve = start + np.linspace(0.0, 1.0, 3000)[:, None] * np.array(
        [0.5, 0.3, -0.3, 0.4, 0.3, -0.3, 0.5]
    )
    node = ros.node('panda_controller_stand_in')
    commanded = legacy_controller_stand_in(node)
    states = node.create_publisher(JointState, '/joint_states', 10)
    arm = JointState(name=list(chain.joint_names), position=start.tolist())
    node.create_timer(0.05, lambda: states.publish(arm))
    logged = []
    node.create_subscription(Log, '/rosout', lambda entry: logged.append(entry.msg), 100)
    log = tmp_path / 'server.log'
    server = processes.start(
        executable('ik_server'), '--ros-args', '-p', f'urdf:={example_robot_urdf("panda")}',
        '-p', 'base_link:=panda_link0', '-p', 'tip_link:=panda_hand', '-p', 'device:=cpu',
        '--log-level', 'ik_server:=debug', log=log,
    )  # fmt: skip
    client = node.create_client(SolvePath, '/ik_server/solve_path')
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    stop = node.create_client(Trigger, '/ik_server/stop')
    for service in (client, mover, stop):
        assert service.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    request = path_request(pose_from_joints(chain, curve), None, 'panda_link0')
    request.execute, request.alternatives, request.tighten = True, 64, True
    # ik_client's --pitch is the OM-X's tool orientation: for this arm, it says so (first: the
    # test's node publishes no joint states while it waits for the client).
    x, y, z = (f'{v:.4f}' for v in pose_from_joints(chain, start[None])[0, :3])
    command = [str(executable('ik_client')), '--x', x, '--y', y, '--z', z, '--pitch', '0',
               '--timeout', '60']  # fmt: skip
    result = subprocess.run(command, env=ros_env, capture_output=True, text=True, timeout=120)
    assert "note: --pitch builds the OM-X's tool orientation" in result.stdout, result.stdout
    # Until the server has heard the arm's states: a one-waypoint path from them is answered.
    probe = path_request(pose_from_joints(chain, start[None]), None, 'panda_link0')
    assert ros.spin_until(lambda: ros.call(client, probe).success, 60.0), log.read_text()
    path = client.call_async(request)
    asked = 'solve_path: 3000 waypoints, 64 alternatives, tighten, execute; '
    assert ros.spin_until(lambda: any(asked in m for m in logged), 60.0), log.read_text()
    move = SetKinematicsPose.Request(planning_group='arm', path_time=2.0)
    goal = pose_from_joints(chain, curve[-1:])[0]
    pose = move.kinematics_pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in goal[:3])
    o = pose.orientation
    o.x, o.y, o.z, o.w = (float(v) for v in goal[3:])
    moved = mover.call_async(move)
    waiting = 'goal_task_space_path: '  # taken by the server, waiting its turn
    assert ros.spin_until(lambda: any(waiting in m for m in logged), 60.0), log.read_text()
    stopped = ros.call(stop, Trigger.Request(), timeout_s=60.0, resend=False)
    assert stopped.success and 'holding at' in stopped.message, stopped.message
    assert not path.done(), 'the path was answered before the stop'
    assert ros.spin_until(lambda: path.done() and moved.done(), 300.0), 'no answer'
    response = path.result()
    assert response.success and not response.executed, response.message
    assert 'not executed: a stop came after it was asked' in response.message
    assert not moved.result().is_planned
    # The arm was held where it was, and given nothing of the path or the move.
    assert len(commanded) == 1, commanded
    np.testing.assert_allclose(commanded[0], start)
    # A Ctrl-C while a path ten times as long is solved ends the server cleanly, within the
    # grace before SIGKILL, instead of waiting the solve out.
    logged.clear()
    longer = np.concatenate([curve, curve[::-1]] * 5)
    longer_request = path_request(pose_from_joints(chain, longer), None, 'panda_link0')
    longer_request.alternatives, longer_request.tighten = 64, True
    client.call_async(longer_request)
    assert ros.spin_until(lambda: any('30000 waypoints' in m for m in logged), 60.0), logged
    processes.stop_all(grace_s=10.0)
    text = log.read_text()
    assert server.returncode == 0 and 'Traceback' not in text, text
    assert 'goal_task_space_path refused: a stop came after it was asked' in text


def test_a_goal_accepted_after_a_stop_without_joint_states_is_canceled(processes, ros, tmp_path):
    # A trajectory controller slow to accept: the move's goal awaits acceptance when a stop
    # comes, with joint states too old to hold the arm at and no goal in progress to cancel.
    # Accepted after the stop, the goal must not run on.
    release = tmp_path / 'accept'
    controller = tmp_path / 'controller.log'
    processes.python(HELD_CONTROLLER, release, log=controller)
    node = ros.node('arm_stand_in')
    states = node.create_publisher(JointState, '/joint_states', 10)
    arm = JointState(name=list(OMX_CHAIN.joint_names), position=[0.0, -0.5, 0.3, 0.7])
    publishing = [True]
    node.create_timer(0.05, lambda: publishing[0] and states.publish(arm))
    log = tmp_path / 'server.log'
    processes.start(
        executable('ik_server'), '--ros-args', '-p', 'device:=cpu',
        '-p', 'command_interface:=trajectory', '-p', 'command_timeout:=30.0', log=log,
    )  # fmt: skip
    mover = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    stop = node.create_client(Trigger, '/ik_server/stop')
    for service in (mover, stop):
        assert service.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    move = SetKinematicsPose.Request(planning_group='arm', path_time=2.0)
    goal = pose_from_joints(OMX_CHAIN, np.array([[0.3, -0.4, 0.3, 0.6]]))[0]
    pose = move.kinematics_pose.pose
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in goal[:3])
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = (
        float(v) for v in goal[3:]
    )
    moved = mover.call_async(move)
    assert ros.spin_until(lambda: 'goal received' in controller.read_text(), 60.0), log.read_text()
    publishing[0] = False
    silent_since = time.monotonic()
    ros.spin_until(lambda: time.monotonic() - silent_since > 1.5, 5.0)  # the states go stale
    stopped = ros.call(stop, Trigger.Request(), timeout_s=60.0, resend=False)
    assert 'cannot hold the arm at its joint states' in stopped.message, stopped.message
    release.touch()
    assert ros.spin_until(lambda: 'canceled' in controller.read_text(), 30.0), (
        controller.read_text()
    )
    assert ros.spin_until(moved.done, 30.0) and not moved.result().is_planned
