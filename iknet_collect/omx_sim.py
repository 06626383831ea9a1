"""`ros2 run iknet omx_sim`: a simulated OM-X that behaves like the legacy ROBOTIS controller.

Publishes /joint_states, /kinematics_pose and /states from a wall timer, serves
/goal_joint_space_path and /set_actuator_state, and follows /arm_controller/joint_trajectory and
the /arm_controller/follow_joint_trajectory action like the newer ros2_control stacks. With torque
off it plays a person moving the arm by hand.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from open_manipulator_msgs.msg import KinematicsPose, OpenManipulatorState
from open_manipulator_msgs.srv import SetActuatorState, SetJointPosition
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from sensor_msgs.msg import JointState
from trajectory_msgs.msg import JointTrajectory

from iknet_collect.encoder import quantize
from iknet_collect.hand_guided import HandGuidedMotion
from iknet_collect.joint_goals import GoalRejectedError, joint_goal, path_time
from iknet_collect.legacy_pose import legacy_pose
from iknet_collect.message_rows import has_header
from iknet_collect.motion import Trajectory
from iknet_collect.trajectory_action import TrajectoryActionServer
from iknet_core.kinematics import OMX_CHAIN
from iknet_ros.node_parameters import declare
from iknet_ros.node_runtime import run_node

GRIPPER = 'gripper'
# ROBOTIS's initial pose of the OM-X (rad).
INITIAL_JOINTS = [0.0, -1.05, 0.35, 0.70]
MOVING_SPEED = 1e-6  # rad/s; slower than this the arm reports STOPPED


class OmxSim(Node):
    def __init__(self) -> None:
        super().__init__('open_manipulator_x_controller')
        rate_hz = declare(self, 'rate_hz', 100.0, 'publishing rate (Hz)', float_range=(1.0, 1e3))
        seed = declare(self, 'seed', 0, 'seed of the hand-guided motions', int_range=(0, 2**31))
        torque = declare(
            self,
            'torque_enabled',
            True,
            'torque at start-up: true holds position and accepts goals, false is hand-guided',
        )
        initial = declare(
            self, 'initial_joints', INITIAL_JOINTS, 'joint1..joint4 at start-up (rad)'
        )
        self.publish_pose = declare(
            self,
            'publish_kinematics_pose',
            True,
            'publish /kinematics_pose like the legacy controller (false: like ros2_control)',
        )
        if len(initial) != OMX_CHAIN.n_joints:
            raise ValueError(f'initial_joints needs {OMX_CHAIN.n_joints} values, got {initial}')

        self.rng = np.random.default_rng(seed)
        self.torque = True
        self.motion: Trajectory | HandGuidedMotion = Trajectory(np.array(initial, dtype=float))
        if not torque:
            self._set_torque(False)

        self.joint_pub = self.create_publisher(JointState, 'joint_states', 10)
        self.pose_pub = self.create_publisher(KinematicsPose, 'kinematics_pose', 10)
        self.state_pub = self.create_publisher(OpenManipulatorState, 'states', 10)
        self.create_service(SetJointPosition, 'goal_joint_space_path', self.on_joint_goal)
        self.create_service(SetActuatorState, 'set_actuator_state', self.on_actuator_state)
        self.create_subscription(
            JointTrajectory, 'arm_controller/joint_trajectory', self.on_trajectory, 10
        )
        self.trajectory_action = TrajectoryActionServer(
            self, 'arm_controller/follow_joint_trajectory', OMX_CHAIN,
            plan=self._follow, move=self._move, moving=lambda: self.motion,
            present=self.present, now=self.now,
        )  # fmt: skip
        self.create_timer(1.0 / rate_hz, self.publish)
        mode = 'holding position' if self.torque else 'hand-guided (torque off)'
        self.get_logger().info(f'simulated OM-X at {rate_hz:g} Hz, seed {seed}, {mode}')

    @staticmethod
    def now() -> float:
        """Motion time (s): monotonic, so clock jumps never jerk the arm."""
        return time.monotonic()

    def present(self) -> tuple[np.ndarray, np.ndarray]:
        return self.motion.sample(self.now())

    def publish(self) -> None:
        q, velocity = self.present()
        q = quantize(q)
        stamp = self.get_clock().now().to_msg()
        joints = JointState()
        joints.header.stamp = stamp
        joints.name = [*OMX_CHAIN.joint_names, GRIPPER]
        joints.position = [*q.tolist(), 0.0]
        joints.velocity = [*velocity.tolist(), 0.0]
        joints.effort = [0.0] * len(joints.name)
        self.joint_pub.publish(joints)
        if self.publish_pose:
            pose = KinematicsPose()
            if has_header(KinematicsPose):  # ROBOTIS's own KinematicsPose has none
                pose.header.stamp = stamp
            values = legacy_pose(q).tolist()
            p, o = pose.pose.position, pose.pose.orientation
            p.x, p.y, p.z = values[:3]
            o.x, o.y, o.z, o.w = values[3:]
            self.pose_pub.publish(pose)
        state = OpenManipulatorState()
        moving = float(np.max(np.abs(velocity))) > MOVING_SPEED
        state.open_manipulator_moving_state = (
            OpenManipulatorState.IS_MOVING if moving else OpenManipulatorState.STOPPED
        )
        state.open_manipulator_actuator_state = (
            OpenManipulatorState.ACTUATOR_ENABLED
            if self.torque
            else OpenManipulatorState.ACTUATOR_DISABLED
        )
        self.state_pub.publish(state)

    def _set_torque(self, enabled: bool) -> None:
        q, _ = self.present()
        self.torque = enabled
        # Torque on: the servos hold where the hand left the arm. Off: the hand takes over.
        self.motion = Trajectory(q) if enabled else HandGuidedMotion(self.rng, q, self.now())

    def on_actuator_state(
        self, request: SetActuatorState.Request, response: SetActuatorState.Response
    ) -> SetActuatorState.Response:
        self._set_torque(bool(request.set_actuator_state))
        self.get_logger().info('torque on: holding' if self.torque else 'torque off: hand-guided')
        response.is_planned = True
        return response

    def on_joint_goal(
        self, request: SetJointPosition.Request, response: SetJointPosition.Response
    ) -> SetJointPosition.Response:
        try:
            self._require_torque()
            q, velocity = self.present()
            goal = joint_goal(
                OMX_CHAIN, request.joint_position.joint_name, request.joint_position.position, q
            )
            duration = path_time(request.path_time)
        except GoalRejectedError as error:
            self.get_logger().warning(f'goal_joint_space_path refused: {error}')
            response.is_planned = False
            return response
        start = self.now()
        # Leaving at the present velocity: a new goal mid-move never jerks the arm.
        self.motion = Trajectory(q, velocity)
        self.motion.append(start + duration, goal, start=start)
        self.get_logger().info(f'moving to {np.round(goal, 4).tolist()} in {duration:g} s')
        response.is_planned = True
        return response

    def on_trajectory(self, message: JointTrajectory) -> None:
        try:
            self.motion = self._follow(message)
        except GoalRejectedError as error:
            self.get_logger().warning(f'joint trajectory refused: {error}')
            return
        self.get_logger().info(f'following a trajectory of {len(message.points)} points')

    def _move(self, motion: Trajectory) -> None:
        self.motion = motion

    def _follow(self, message: JointTrajectory) -> Trajectory:
        """The trajectory through the message's points, timed from its stamp (0: now)."""
        self._require_torque()
        if not message.points:
            raise GoalRejectedError('trajectory has no points')
        now = self.now()
        q, velocity = self.present()
        stamp_ns = message.header.stamp.sec * 10**9 + message.header.stamp.nanosec
        delay = 0.0
        if stamp_ns:  # a stamp in the future delays the start, as in a JointTrajectoryController
            delay = max(0.0, (stamp_ns - self.get_clock().now().nanoseconds) / 1e9)
        # A delayed start begins from rest; an immediate one from the present velocity.
        trajectory = Trajectory(q, None if delay else velocity)
        previous = 0.0
        for point in message.points:
            offset = point.time_from_start.sec + point.time_from_start.nanosec / 1e9
            if offset <= previous:
                raise GoalRejectedError(f'time_from_start {offset} s does not increase')
            goal = joint_goal(OMX_CHAIN, message.joint_names, point.positions, trajectory.final)
            v1 = None
            if len(point.velocities) == len(message.joint_names):
                v1 = np.zeros(OMX_CHAIN.n_joints)
                for name, value in zip(message.joint_names, point.velocities, strict=True):
                    v1[OMX_CHAIN.joint_names.index(name)] = value
                if not np.isfinite(v1).all():
                    raise GoalRejectedError('velocities are not finite numbers')
            start = now + delay if not trajectory.segments else None
            trajectory.append(now + delay + offset, goal, v1, start=start)
            previous = offset
        return trajectory

    def _require_torque(self) -> None:
        if not self.torque:
            raise GoalRejectedError('torque is off (hand-guided); call /set_actuator_state true')


def main(args: list[str] | None = None) -> int | None:
    try:
        run_node(OmxSim, args)
    except (ValueError, ParameterException) as error:  # a bad parameter: say which, no traceback
        rclpy.logging.get_logger('omx_sim').error(str(error))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
