"""The simulator's FollowJointTrajectory action, as a ros2_control JointTrajectoryController
serves it: a goal it cannot follow is rejected (the reason logged), a new goal or command
replaces the one being followed, a cancel holds the arm where it is at once, and the result comes
when the trajectory has ended (the simulated arm ends exactly at its last point). A replaced goal
ends ABORTED (a JointTrajectoryController reports it CANCELED; rclpy lets an executing goal that
was not asked to cancel end only as succeeded or aborted)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.action.server import ServerGoalHandle
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from iknet_collect.joint_goals import GoalRejectedError
from iknet_collect.motion import Trajectory
from iknet_core.kinematics import Chain
from iknet_ros.arm_command import first_done

Result = FollowJointTrajectory.Result
# How often a goal being followed publishes feedback and looks for a cancel (s).
FEEDBACK_PERIOD_S = 0.05


class TrajectoryActionServer:
    """`<name>` FollowJointTrajectory server for a simulated arm.

    plan(trajectory) is the trajectory the arm would follow from now (GoalRejectedError when it
    cannot), move(motion) makes the arm follow it, moving() is what it follows now, present() is
    (joints, velocities) now and now() the motion clock (s).
    """

    def __init__(
        self,
        node: Node,
        name: str,
        chain: Chain,
        plan: Callable[[JointTrajectory], Trajectory],
        move: Callable[[Trajectory], None],
        moving: Callable[[], object],
        present: Callable[[], tuple[np.ndarray, np.ndarray]],
        now: Callable[[], float],
    ) -> None:
        self._node, self._chain = node, chain
        self._plan, self._move, self._moving = plan, move, moving
        self._present, self._now = present, now
        self._group = ReentrantCallbackGroup()
        self._following: tuple[ServerGoalHandle, Trajectory] | None = None
        self._server = ActionServer(
            node, FollowJointTrajectory, name, self._execute,
            goal_callback=self._check, cancel_callback=self._cancel, callback_group=self._group,
        )  # fmt: skip

    def _cancel(self, handle: ServerGoalHandle) -> CancelResponse:
        """Hold the arm now if it still follows this goal; the goal ends when _execute next
        looks."""
        if self._following is not None:
            following, motion = self._following
            if following is handle and self._moving() is motion:
                held, _ = self._present()
                self._move(Trajectory(held))
        return CancelResponse.ACCEPT

    def _check(self, goal: FollowJointTrajectory.Goal) -> GoalResponse:
        try:
            self._plan(goal.trajectory)
        except GoalRejectedError as error:
            self._node.get_logger().warning(f'FollowJointTrajectory goal rejected: {error}')
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    async def _execute(self, handle: ServerGoalHandle) -> FollowJointTrajectory.Result:
        goal: FollowJointTrajectory.Goal = handle.request
        names = list(goal.trajectory.joint_names)
        try:  # planned again from now: the arm may have moved since the goal was checked
            motion = self._plan(goal.trajectory)
        except GoalRejectedError as error:
            handle.abort()
            return Result(error_code=Result.INVALID_GOAL, error_string=str(error))
        self._move(motion)
        self._following = handle, motion
        self._node.get_logger().info(
            f'following a FollowJointTrajectory goal of {len(goal.trajectory.points)} points'
        )
        while True:
            if handle.is_cancel_requested:  # the arm was held when the cancel came
                handle.canceled()
                return Result(error_code=Result.SUCCESSFUL, error_string='canceled: holding')
            if self._moving() is not motion:
                handle.abort()
                replaced = 'replaced: the arm took a newer goal, a joint goal or torque off'
                return Result(error_code=Result.INVALID_GOAL, error_string=replaced)
            now = self._now()
            handle.publish_feedback(self._feedback(names, motion, now))
            if now >= motion.end_time:
                break
            await first_done(self._node, self._group, None, FEEDBACK_PERIOD_S)
        handle.succeed()
        return Result(error_code=Result.SUCCESSFUL)

    def _feedback(
        self, names: list[str], motion: Trajectory, now: float
    ) -> FollowJointTrajectory.Feedback:
        desired, _ = motion.sample(now)
        actual, velocity = self._present()
        index = [self._chain.joint_names.index(name) for name in names]
        feedback = FollowJointTrajectory.Feedback(joint_names=names)
        feedback.header.stamp = self._node.get_clock().now().to_msg()
        feedback.desired = JointTrajectoryPoint(positions=desired[index].tolist())
        feedback.actual = JointTrajectoryPoint(
            positions=actual[index].tolist(), velocities=velocity[index].tolist()
        )
        feedback.error = JointTrajectoryPoint(positions=(desired - actual)[index].tolist())
        return feedback
