"""The simulated OM-X: motions, goal checks, and the node over DDS like the legacy controller."""

from __future__ import annotations

import math

import numpy as np
import pytest
from golden import REFERENCE_JOINTS, REFERENCE_POSES
from open_manipulator_msgs.msg import KinematicsPose, OpenManipulatorState
from open_manipulator_msgs.srv import SetActuatorState, SetJointPosition
from recording_helpers import start_sim
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from iknet_collect.encoder import RAD_PER_TICK, quantize
from iknet_collect.hand_guided import HAND_GUIDED_RANGES, HandGuidedMotion, clear_of_table
from iknet_collect.joint_goals import GoalRejectedError, joint_goal, path_time
from iknet_collect.legacy_pose import legacy_pose
from iknet_collect.motion import Trajectory
from iknet_core.kinematics import OMX_CHAIN

HOME = np.array([0.0, -1.05, 0.35, 0.70])


def test_quantize_to_encoder_ticks():
    assert pytest.approx(0.001534, abs=1e-6) == RAD_PER_TICK
    q = quantize(np.array([0.0, 0.0007, 0.0008, -1.0]))
    np.testing.assert_allclose(q / RAD_PER_TICK, np.round(q / RAD_PER_TICK), atol=1e-9)
    np.testing.assert_allclose(q[:3], [0.0, 0.0, RAD_PER_TICK])


def test_legacy_pose_reproduces_the_real_controller_with_its_quaternion_signs():
    np.testing.assert_allclose(legacy_pose(REFERENCE_JOINTS), REFERENCE_POSES, atol=2e-6)
    # Single and batched calls agree.
    np.testing.assert_allclose(legacy_pose(REFERENCE_JOINTS[3]), REFERENCE_POSES[3], atol=2e-6)


def test_minimum_jerk_move_starts_and_ends_at_rest():
    trajectory = Trajectory(HOME)
    goal = np.array([0.5, 0.2, -0.3, 1.0])
    trajectory.append(3.0, goal, start=1.0)
    for t, expected in ((0.0, HOME), (1.0, HOME), (2.0, (HOME + goal) / 2), (9.0, goal)):
        q, _ = trajectory.sample(t)
        np.testing.assert_allclose(q, expected, atol=1e-12)
    for t in (1.0, 3.0, 5.0):
        np.testing.assert_allclose(trajectory.sample(t)[1], 0.0, atol=1e-12)
    # Velocity is the derivative of position.
    dt = 1e-6
    numeric = (trajectory.sample(1.7 + dt)[0] - trajectory.sample(1.7 - dt)[0]) / (2 * dt)
    np.testing.assert_allclose(trajectory.sample(1.7)[1], numeric, atol=1e-6)


def _hand_guided(seed: int, seconds: float = 900.0) -> tuple[np.ndarray, np.ndarray]:
    motion = HandGuidedMotion(np.random.default_rng(seed), HOME)
    samples = [motion.sample(t) for t in np.arange(0.0, seconds, 0.01)]
    return np.array([q for q, _ in samples]), np.array([v for _, v in samples])


def test_hand_guided_motion_covers_the_observed_workspace_smoothly():
    q, velocity = _hand_guided(seed=1)
    low, high = HAND_GUIDED_RANGES[:, 0], HAND_GUIDED_RANGES[:, 1]
    assert (q >= np.minimum(low, HOME) - 1e-9).all() and (q <= high + 1e-9).all()
    # Most of each observed range is visited, both elbow branches, and joint1 past pi.
    assert ((q.max(0) - q.min(0)) > 0.9 * (high - low)).all()
    assert (q[:, 2] > 0.2).mean() > 0.2 and (q[:, 2] < -0.2).mean() > 0.2
    assert (q[:, 0] > math.pi).any()
    assert clear_of_table(q).all()
    # Human speeds, pauses (the arm at rest), no jumps.
    assert np.abs(velocity).max() < 2.0
    assert (np.abs(velocity).max(1) == 0.0).mean() > 0.05
    assert np.abs(np.diff(q, axis=0)).max() < 0.03


def test_hand_guided_motion_is_deterministic_per_seed():
    first, _ = _hand_guided(seed=3, seconds=60.0)
    again, _ = _hand_guided(seed=3, seconds=60.0)
    other, _ = _hand_guided(seed=4, seconds=60.0)
    np.testing.assert_array_equal(first, again)
    assert np.abs(first - other).max() > 0.1


@pytest.mark.parametrize(
    ('names', 'positions', 'match'),
    [
        (['elbow'], [0.1], 'unknown joint'),
        (['joint1'], [float('nan')], 'not a finite'),
        (['joint2'], [1.6], 'outside'),
        (['joint1', 'joint2'], [0.1], 'names but'),
        (['joint1', 'joint1'], [0.1, 0.2], 'twice'),
    ],
)
def test_bad_goals_are_rejected_with_a_reason(names, positions, match):
    with pytest.raises(GoalRejectedError, match=match):
        joint_goal(OMX_CHAIN, names, positions, HOME)


def test_partial_goal_keeps_the_other_joints():
    np.testing.assert_allclose(
        joint_goal(OMX_CHAIN, ['joint3'], [0.1], HOME), [0.0, -1.05, 0.1, 0.70]
    )
    with pytest.raises(GoalRejectedError, match='path_time'):
        path_time(0.0)


class SimClient:
    """Subscriptions and clients of a test node talking to the simulator process."""

    def __init__(self, ros) -> None:
        self.ros = ros
        self.node = ros.node('sim_test')
        self.joints: list[JointState] = []
        self.poses: list[KinematicsPose] = []
        self.states: list[OpenManipulatorState] = []
        self.node.create_subscription(JointState, 'joint_states', self.joints.append, 100)
        self.node.create_subscription(KinematicsPose, 'kinematics_pose', self.poses.append, 100)
        self.node.create_subscription(OpenManipulatorState, 'states', self.states.append, 10)
        self.goal = self.node.create_client(SetJointPosition, 'goal_joint_space_path')
        self.torque = self.node.create_client(SetActuatorState, 'set_actuator_state')
        self.trajectory = self.node.create_publisher(
            JointTrajectory, 'arm_controller/joint_trajectory', 10
        )

    def arm(self) -> np.ndarray:
        assert self.ros.spin_until(lambda: bool(self.joints), 10.0), 'no joint states'
        return np.array(self.joints[-1].position[:4])

    def send_goal(self, names: list[str], positions: list[float], seconds: float) -> bool:
        request = SetJointPosition.Request(path_time=seconds)
        request.joint_position.joint_name = names
        request.joint_position.position = positions
        return self.ros.call(self.goal, request).is_planned

    def settle(self, seconds: float) -> None:
        """Spin for `seconds` of joint states."""
        self.ros.spin_until(lambda: False, seconds)


def test_goal_is_reached_after_path_time_and_bad_goals_are_refused(processes, ros, tmp_path):
    start_sim(processes, tmp_path, seed=0)
    sim = SimClient(ros)
    np.testing.assert_allclose(sim.arm(), HOME, atol=RAD_PER_TICK)
    assert sim.joints[-1].name == ['joint1', 'joint2', 'joint3', 'joint4', 'gripper']
    assert sim.ros.spin_until(lambda: bool(sim.states), 5.0)
    assert sim.states[-1].open_manipulator_actuator_state == 'ACTUATOR_ENABLED'

    goal = [0.3, -0.2, 0.4, 0.5]
    assert sim.send_goal(OMX_CHAIN.joint_names, goal, 1.0)
    sim.settle(0.5)
    assert np.abs(sim.arm() - goal).max() > 0.01, 'moved instantly instead of over path_time'
    assert sim.states[-1].open_manipulator_moving_state == 'IS_MOVING'
    sim.settle(0.8)
    np.testing.assert_allclose(sim.arm(), goal, atol=RAD_PER_TICK)
    assert sim.states[-1].open_manipulator_moving_state == 'STOPPED'

    for names, positions in (
        (['elbow'], [0.1]),
        (['joint1'], [float('nan')]),
        (['joint2'], [1.6]),
    ):
        assert not sim.send_goal(names, positions, 1.0)
    assert not sim.send_goal(['joint1'], [0.1], 0.0)
    sim.settle(0.3)
    np.testing.assert_allclose(sim.arm(), goal, atol=RAD_PER_TICK)


def test_whole_numbers_are_taken_for_float_parameters(processes, ros, tmp_path):
    # As `-p` and launch type them: integers, which rclpy refuses for a float parameter.
    start_sim(processes, tmp_path, initial_joints='[0, 0, 0, 1]', rate_hz=50)
    np.testing.assert_allclose(SimClient(ros).arm(), [0, 0, 0, 1], atol=RAD_PER_TICK)
    assert 'simulated OM-X at 50 Hz' in (tmp_path / 'sim.log').read_text()


def test_a_parameter_the_node_does_not_have_is_named_in_a_warning(processes, ros, tmp_path):
    # rclpy ignores it: a typo of a real one (rate_hz) went unnoticed.
    start_sim(processes, tmp_path, rate_hrz=50)
    SimClient(ros).arm()  # up and publishing
    processes.stop_all()  # its log, whole
    log = (tmp_path / 'sim.log').read_text()
    said = "not parameters of open_manipulator_x_controller, ignored: ['rate_hrz'] (a typo, or"
    assert said in log, log
    assert "'rate_hz'" in log


def test_torque_off_is_hand_guided_and_refuses_goals(processes, ros, tmp_path):
    start_sim(processes, tmp_path, seed=0)
    sim = SimClient(ros)
    sim.arm()
    assert sim.ros.call(sim.torque, SetActuatorState.Request(set_actuator_state=False)).is_planned
    assert not sim.send_goal(['joint1'], [0.2], 1.0)
    count = len(sim.joints)
    sim.settle(3.0)
    moved = np.array([m.position[:4] for m in sim.joints[count:]])
    assert np.ptp(moved, axis=0).max() > 0.05, 'a hand-guided arm moves'
    assert sim.states[-1].open_manipulator_actuator_state == 'ACTUATOR_DISABLED'
    # Quantized like the encoders.
    np.testing.assert_allclose(moved / RAD_PER_TICK, np.round(moved / RAD_PER_TICK), atol=1e-6)
    assert sim.ros.call(sim.torque, SetActuatorState.Request(set_actuator_state=True)).is_planned
    assert sim.send_goal(['joint1'], [0.2], 0.5)


def test_joint_trajectory_is_followed(processes, ros, tmp_path):
    start_sim(processes, tmp_path, seed=0)
    sim = SimClient(ros)
    sim.arm()
    assert sim.ros.spin_until(lambda: sim.trajectory.get_subscription_count() > 0, 10.0)
    message = JointTrajectory(joint_names=['joint4', 'joint1'])
    for seconds, positions in ((0.4, [0.2, 0.3]), (0.8, [-0.3, 0.5])):
        point = JointTrajectoryPoint(positions=positions)
        point.time_from_start.sec, point.time_from_start.nanosec = 0, int(seconds * 1e9)
        message.points.append(point)
    sim.trajectory.publish(message)
    sim.settle(1.3)
    np.testing.assert_allclose(sim.arm(), [0.5, -1.05, 0.35, -0.3], atol=RAD_PER_TICK)


def _trajectory(names: list[str], timed_positions) -> JointTrajectory:
    message = JointTrajectory(joint_names=names)
    for seconds, positions in timed_positions:
        point = JointTrajectoryPoint(positions=positions)
        point.time_from_start.sec = int(seconds)
        point.time_from_start.nanosec = round(seconds % 1 * 1e9)
        message.points.append(point)
    return message


def test_follow_joint_trajectory_action_follows_rejects_and_cancels(processes, ros, tmp_path):
    """The simulator's FollowJointTrajectory action, as a ros2_control controller serves it."""
    from action_msgs.msg import GoalStatus
    from control_msgs.action import FollowJointTrajectory
    from rclpy.action import ActionClient

    start_sim(processes, tmp_path, seed=0)
    sim = SimClient(ros)
    sim.arm()
    name = 'arm_controller/follow_joint_trajectory'
    client = ActionClient(sim.node, FollowJointTrajectory, name)
    assert ros.spin_until(client.server_is_ready, 20.0), 'no FollowJointTrajectory server'

    def send(trajectory: JointTrajectory, feedback: list | None = None):
        sent = client.send_goal_async(
            FollowJointTrajectory.Goal(trajectory=trajectory),
            feedback_callback=None if feedback is None else feedback.append,
        )
        assert ros.spin_until(sent.done, 10.0), 'the goal was not answered'
        return sent.result()

    # Followed to the end: feedback on the way, the result when the arm is at the last point.
    feedback: list = []
    goal = [0.3, -0.2, 0.4, 0.5]
    trajectory = _trajectory(OMX_CHAIN.joint_names, [(0.3, HOME.tolist()), (0.9, goal)])
    handle = send(trajectory, feedback)
    assert handle.accepted
    result = handle.get_result_async()
    assert ros.spin_until(result.done, 10.0), 'no result'
    assert result.result().status == GoalStatus.STATUS_SUCCEEDED
    assert result.result().result.error_code == FollowJointTrajectory.Result.SUCCESSFUL
    assert feedback and feedback[-1].feedback.joint_names == OMX_CHAIN.joint_names
    sim.settle(0.2)
    np.testing.assert_allclose(sim.arm(), goal, atol=RAD_PER_TICK)

    # Rejected: times that do not increase, an unknown joint, a goal outside the limits.
    for bad in (
        _trajectory(['joint1'], [(0.5, [0.1]), (0.5, [0.2])]),
        _trajectory(['elbow'], [(0.5, [0.1])]),
        _trajectory(['joint2'], [(0.5, [1.6])]),
        _trajectory(['joint1'], []),
    ):
        assert not send(bad).accepted

    # Canceled halfway: the arm holds where it was, short of the goal.
    handle = send(_trajectory(['joint1'], [(3.0, [-0.5])]))
    assert handle.accepted
    sim.settle(1.0)
    canceling = handle.cancel_goal_async()
    assert ros.spin_until(canceling.done, 10.0)
    result = handle.get_result_async()
    assert ros.spin_until(result.done, 10.0)
    assert result.result().status == GoalStatus.STATUS_CANCELED
    sim.settle(0.3)  # joint states from before the cancel may still be queued
    held = sim.arm()
    sim.settle(0.5)
    np.testing.assert_allclose(sim.arm(), held, atol=RAD_PER_TICK)
    assert -0.45 < held[0] < 0.25, held

    # Replaced by a newer goal: the first one is aborted, the second followed.
    first = send(_trajectory(['joint1'], [(2.0, [0.6])]))
    second = send(_trajectory(['joint1'], [(0.5, [0.0])]))
    assert first.accepted and second.accepted
    results = first.get_result_async(), second.get_result_async()
    assert ros.spin_until(lambda: all(r.done() for r in results), 10.0)
    assert results[0].result().status == GoalStatus.STATUS_ABORTED
    assert 'replaced' in results[0].result().result.error_string
    assert results[1].result().status == GoalStatus.STATUS_SUCCEEDED
    sim.settle(0.2)
    assert abs(sim.arm()[0]) <= RAD_PER_TICK
