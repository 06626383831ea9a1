"""Ways to send joint goals to the arm: the legacy ROBOTIS service, a ros2_control trajectory
controller (its FollowJointTrajectory action, or its topic), or nowhere. Each reports whether the
goal was accepted, with a reason when it was not.

`command` is a coroutine: the server's single executor thread keeps answering IK requests while
a move waits for the controller.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Protocol

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from rclpy.action import ActionClient
from rclpy.callback_groups import CallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

COMMAND_INTERFACES = ('legacy', 'trajectory', 'none')
# How long (s) a trajectory controller's action may come up after its topic did (discovery finds
# a controller's endpoints together, but a loaded machine spreads them out).
ACTION_GRACE_S = 1.0
GOAL_STATUS_NAMES = {
    GoalStatus.STATUS_CANCELED: 'canceled',
    GoalStatus.STATUS_ABORTED: 'aborted',
}


class ArmCommander(Protocol):
    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        """Send a joint goal reached after path_time (s); (accepted, reason)."""
        ...

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        """Send a timed trajectory (points timed from now); (accepted, reason)."""
        ...


class LegacyCommander:
    """SetJointPosition on /goal_joint_space_path, as the ROBOTIS legacy controller serves it."""

    def __init__(self, node: Node, service: str, timeout_s: float) -> None:
        from open_manipulator_msgs.srv import SetJointPosition

        self._node = node
        self._request_type = SetJointPosition.Request
        # Not the node's default group: a waiting move holds that, and the answer must get through.
        self._group = ReentrantCallbackGroup()
        self._client = node.create_client(SetJointPosition, service, callback_group=self._group)
        self._timeout_s = timeout_s

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        # A controller started together with the server may still be in discovery.
        deadline = time.monotonic() + self._timeout_s
        while not self._client.service_is_ready():
            if time.monotonic() > deadline:
                return False, f'arm controller service {self._client.srv_name} is not available'
            await first_done(self._node, self._group, None, 0.1)
        request = self._request_type(path_time=float(path_time))
        request.joint_position.joint_name = list(names)
        request.joint_position.position = [float(p) for p in positions]
        # DDS can lose the answer to a client the controller has just discovered; resending the
        # same joint goal is harmless, so try twice before reporting failure.
        for _attempt in range(2):
            future = self._client.call_async(request)
            if await first_done(self._node, self._group, future, self._timeout_s):
                break
            self._client.remove_pending_request(future)
        else:
            return False, f'{self._client.srv_name} did not answer within {self._timeout_s} s'
        if not future.result().is_planned:
            return False, f'{self._client.srv_name} refused the goal'
        return True, f'sent to {self._client.srv_name}'

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        """One goal per point, each sent when the previous one is due and reached over the
        time between them: the legacy controller takes no trajectories. A goal refused midway
        leaves the arm at the last point it took (the reason says which)."""
        started = time.monotonic()
        previous = 0.0
        for index, point in enumerate(trajectory.points):
            due = duration_s(point.time_from_start)
            accepted, reason = await self.command(
                trajectory.joint_names, point.positions, due - previous
            )
            if not accepted:
                return False, f'point {index} of {len(trajectory.points)}: {reason}'
            wait = started + due - time.monotonic()
            if wait < 0.0:
                started -= wait  # a late answer delays the rest, so no segment gets shorter
            elif index + 1 < len(trajectory.points):
                await first_done(self._node, self._group, None, wait)
            previous = due
        return True, f'{len(trajectory.points)} goals sent to {self._client.srv_name}'


async def first_done(
    node: Node, group: CallbackGroup, future: Future | None, timeout_s: float
) -> bool:
    """Wait in a coroutine callback for future, or timeout_s; True if the future is done.

    A one-shot timer in `group` ends the wait, so the executor thread stays free meanwhile. With
    no future this is a sleep.
    """
    woken = Future()

    def wake(_: object = None) -> None:
        if not woken.done():
            woken.set_result(None)

    timer = node.create_timer(timeout_s, wake, callback_group=group)
    if future is not None:
        future.add_done_callback(wake)
    try:
        await woken
    finally:
        node.destroy_timer(timer)
    return future is not None and future.done()


class TrajectoryCommander:
    """Trajectories for a ros2_control JointTrajectoryController: a goal of its
    FollowJointTrajectory action where the controller serves one (the result is logged when it
    comes), else a message on its JointTrajectory topic. A joint goal is a one-point trajectory.
    """

    def __init__(self, node: Node, topic: str, action: str, timeout_s: float) -> None:
        self._node = node
        self._group = ReentrantCallbackGroup()  # as LegacyCommander's
        self._publisher = node.create_publisher(JointTrajectory, topic, 10)
        self._action = None
        try:
            from control_msgs.action import FollowJointTrajectory
        except ImportError:
            if action:
                node.get_logger().warning(
                    f'control_msgs is not installed: {action} is not used, only {topic}'
                )
            action = ''
        if action:
            self._goal_type = FollowJointTrajectory.Goal
            self._action = ActionClient(
                node, FollowJointTrajectory, action, callback_group=self._group
            )
        self._action_name = action
        self._timeout_s = timeout_s
        self._topic_only = False  # the topic answered and the action never did
        self._goals_sent = 0  # a goal's result after a newer goal's: it was replaced, as asked

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        point = JointTrajectoryPoint(
            positions=[float(p) for p in positions], time_from_start=duration_msg(path_time)
        )
        return await self.follow(JointTrajectory(joint_names=list(names), points=[point]))

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        route = await self._route()
        if route == 'action':
            return await self._send_goal(trajectory)
        if route == 'topic':
            self._publisher.publish(trajectory)
            return True, f'published on {self._publisher.topic_name}'
        action = f'no {self._action_name} action server and ' if self._action else ''
        return False, f'{action}nothing subscribes to {self._publisher.topic_name}'

    async def _route(self) -> str:
        """'action', 'topic' or '' (neither came up within the timeout). A controller started
        together with the server may still be in discovery; where the topic has a subscriber
        but the action has no server yet, the action gets ACTION_GRACE_S more (once)."""
        deadline = time.monotonic() + self._timeout_s
        topic_since = None
        while True:
            if self._action is not None and self._action.server_is_ready():
                return 'action'
            now = time.monotonic()
            if topic_since is None and self._publisher.get_subscription_count() > 0:
                topic_since = now
            if topic_since is not None and (
                self._action is None
                or self._topic_only
                or now - topic_since > ACTION_GRACE_S
                or now > deadline
            ):
                self._topic_only = self._action is not None
                return 'topic'
            if now > deadline:
                return ''
            await first_done(self._node, self._group, None, 0.05)

    async def _send_goal(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        name = self._action_name
        sent = self._action.send_goal_async(self._goal_type(trajectory=trajectory))
        if not await first_done(self._node, self._group, sent, self._timeout_s):
            # Reported as not executed, so an answer that comes late must not move the arm.
            sent.add_done_callback(self._cancel_late_goal)
            return False, (
                f'{name} did not answer the goal within {self._timeout_s} s (a late acceptance '
                'is canceled)'
            )
        handle = sent.result()
        if not handle.accepted:
            return False, f'{name} rejected the trajectory (its controller logs why)'
        self._goals_sent += 1
        number = self._goals_sent
        handle.get_result_async().add_done_callback(lambda done: self._log_result(done, number))
        return True, f'sent to {name}'

    def _cancel_late_goal(self, future: Future) -> None:
        handle = future.result()
        if handle is not None and handle.accepted:
            self._node.get_logger().warning(f'{self._action_name}: canceling a goal accepted late')
            handle.cancel_goal_async()

    def _log_result(self, future: Future, number: int) -> None:
        """The result of the number-th goal sent: a warning where it failed, unless a newer
        goal of ours replaced it (a path sent while the move to its start settles)."""
        answer = future.result()
        logger = self._node.get_logger()
        if answer is None or answer.status == GoalStatus.STATUS_UNKNOWN:
            logger.warning(f'{self._action_name}: no result received for the trajectory')
        elif answer.status == GoalStatus.STATUS_SUCCEEDED:
            logger.info(f'{self._action_name}: trajectory done')
        else:
            status = GOAL_STATUS_NAMES.get(answer.status, str(answer.status))
            replaced = number < self._goals_sent
            (logger.info if replaced else logger.warning)(
                f'{self._action_name}: trajectory {status} (error_code '
                f'{answer.result.error_code}): {answer.result.error_string}'
                f'{"; a newer goal was sent" if replaced else ""}'
            )


class NoCommander:
    """Solve only: for dry runs and for arms commanded by something else."""

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        return True, 'not sent (command_interface is none)'

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        return False, 'not sent (command_interface is none)'


def duration_s(duration: Duration) -> float:
    return duration.sec + duration.nanosec * 1e-9


def duration_msg(seconds: float) -> Duration:
    """seconds >= 0 as a builtin_interfaces Duration, to the nearest nanosecond."""
    nanoseconds = round(seconds * 1e9)
    return Duration(sec=nanoseconds // 10**9, nanosec=nanoseconds % 10**9)


def make_commander(
    node: Node, interface: str, service: str, topic: str, action: str, timeout_s: float
) -> ArmCommander:
    if interface == 'legacy':
        return LegacyCommander(node, service, timeout_s)
    if interface == 'trajectory':
        return TrajectoryCommander(node, topic, action, timeout_s)
    if interface == 'none':
        return NoCommander()
    raise ValueError(f'command_interface {interface!r} is not one of {COMMAND_INTERFACES}')
