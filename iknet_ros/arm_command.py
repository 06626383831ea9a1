"""Ways to send joint goals to the arm: the legacy ROBOTIS service, a ros2_control trajectory
controller (its FollowJointTrajectory action, or its topic), or nowhere. Each reports whether the
goal was accepted, with a reason when it was not.

`command` is a coroutine: the server's single executor thread keeps answering IK requests while
a move waits for the controller.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from typing import Protocol

from action_msgs.msg import GoalStatus
from builtin_interfaces.msg import Duration
from rclpy.action import ActionClient
from rclpy.action.client import ClientGoalHandle
from rclpy.callback_groups import CallbackGroup, ReentrantCallbackGroup
from rclpy.node import Node
from rclpy.task import Future
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

COMMAND_INTERFACES = ('legacy', 'trajectory', 'none')
# How long (s) a trajectory controller's action may come up after its topic did (discovery finds
# a controller's endpoints together, but a loaded machine spreads them out).
ACTION_GRACE_S = 1.0
# Why a goal was not sent: a newer command, path or stop came first.
REPLACED = 'replaced by a newer goal'
# A goal the controller has not ended: it may still move the arm.
ACTIVE_STATUSES = (GoalStatus.STATUS_ACCEPTED, GoalStatus.STATUS_EXECUTING)
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
        """Send a timed trajectory (points timed from now); (accepted, reason). It replaces
        the goal or trajectory in progress, as a newer command does."""
        ...

    def drop_pending(self) -> None:
        """No goal asked for before now is sent from now on (a path's remaining points)."""
        ...

    def cancel_active(self) -> bool:
        """Cancel the controller's goal in progress, where the interface can (a trajectory
        controller then holds the arm); True if one was canceled."""
        ...


class NewestGoal:
    """Goals numbered as they are asked for: one that is no longer the newest is not sent, so a
    newer command, path or stop replaces an older one still waiting for its controller, and the
    rest of a path being sent point by point."""

    def __init__(self) -> None:
        self._newest = 0

    def drop_pending(self) -> None:
        """No goal asked for before now is sent from now on."""
        self._newest += 1

    def _number(self) -> int:
        self.drop_pending()
        return self._newest

    def _replaced(self, number: int) -> bool:
        return number != self._newest


class LegacyCommander(NewestGoal):
    """SetJointPosition on /goal_joint_space_path, as the ROBOTIS legacy controller serves it."""

    def __init__(self, node: Node, service: str, timeout_s: float) -> None:
        from open_manipulator_msgs.srv import SetJointPosition

        super().__init__()
        self._node = node
        self._request_type = SetJointPosition.Request
        # Not the node's default group: a waiting move holds that, and the answer must get through.
        self._group = ReentrantCallbackGroup()
        self._client = node.create_client(SetJointPosition, service, callback_group=self._group)
        self._timeout_s = timeout_s

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        return await self._send(self._number(), names, positions, path_time)

    async def _send(
        self, number: int, names: Sequence[str], positions: Sequence[float], path_time: float
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
            if self._replaced(number):
                return False, REPLACED
            future = self._client.call_async(request)
            if await first_done(self._node, self._group, future, self._timeout_s):
                break
            self._client.remove_pending_request(future)
        else:
            return False, f'{self._client.srv_name} did not answer within {self._timeout_s} s'
        if not future.result().is_planned:
            # SetJointPosition carries no reason: the controller's log has it.
            return False, (
                f'{self._client.srv_name} refused the goal (its log says why: torque off? '
                'a goal past its limits?)'
            )
        return True, f'sent to {self._client.srv_name}'

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        """One goal per point, each sent when the previous one is due and reached over the
        time between them: the legacy controller takes no trajectories. The answer comes once
        the first goal is taken; the rest are sent in the background, as a trajectory
        controller follows its goal, until a newer goal or a stop replaces them."""
        number = self._number()
        points = trajectory.points
        started = time.monotonic()
        first = duration_s(points[0].time_from_start)
        accepted, reason = await self._send(
            number, trajectory.joint_names, points[0].positions, first
        )
        if not accepted:
            return False, f'point 0 of {len(points)}: {reason}'
        name = self._client.srv_name
        if len(points) == 1:
            return True, f'1 goal sent to {name}'
        if self._replaced(number):  # a newer goal or a stop came while point 0 awaited its answer
            return True, f'point 0 of {len(points)} sent to {name}, the rest not: {REPLACED}'
        self._node.executor.create_task(self._send_rest(trajectory, number, started))
        return True, (
            f'{len(points)} goals for {name}: the first taken, the rest sent as they fall due '
            f'over {duration_s(points[-1].time_from_start):.3g} s'
        )

    def cancel_active(self) -> bool:
        return False  # the legacy controller has no cancel: its goal runs its path_time

    async def _send_rest(self, trajectory: JointTrajectory, number: int, started: float) -> None:
        """The points after the first, each when the one before it is due; the outcome is
        logged, as a trajectory controller's result is (a task must not raise: the executor
        would take the node down)."""
        logger = self._node.get_logger()
        try:
            points = trajectory.points
            previous = duration_s(points[0].time_from_start)
            for index in range(1, len(points)):
                wait = started + previous - time.monotonic()
                if wait > 0.0:
                    await first_done(self._node, self._group, None, wait)
                else:
                    started -= wait  # a late answer delays the rest, so no segment gets shorter
                due = duration_s(points[index].time_from_start)
                accepted, reason = (
                    (False, REPLACED)
                    if self._replaced(number)
                    else await self._send(
                        number, trajectory.joint_names, points[index].positions, due - previous
                    )
                )
                if not accepted:
                    replaced = reason == REPLACED
                    log_outcome(
                        logger,
                        replaced,
                        f'path: point {index} of {len(points)} not sent: {reason}'
                        + ('' if replaced else '; the arm stays at the last point it took'),
                    )
                    return
                previous = due
            logger.info(f'path: {len(points)} goals sent to {self._client.srv_name}')
        except Exception:  # logged, never raised into the executor
            logger.error(f'path: sending its goals failed:\n{traceback.format_exc()}')


def log_outcome(logger, expected: bool, message: str) -> None:
    """message at info where the outcome was expected, else as a warning. rclpy ties one
    severity to each logging call site, and a second from the same line raised ValueError
    inside the server (it exited): one call site per severity."""
    if expected:
        logger.info(message)
    else:
        logger.warning(message)


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


class TrajectoryCommander(NewestGoal):
    """Trajectories for a ros2_control JointTrajectoryController: a goal of its
    FollowJointTrajectory action where the controller serves one (the result is logged when it
    comes), else a message on its JointTrajectory topic. A joint goal is a one-point trajectory.
    """

    def __init__(self, node: Node, topic: str, action: str, timeout_s: float) -> None:
        super().__init__()
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
        self._goals_sent = 0  # a goal's result once a newer one was sent: replaced, as asked
        self._active: ClientGoalHandle | None = None  # the last goal accepted

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        point = JointTrajectoryPoint(
            positions=[float(p) for p in positions], time_from_start=duration_msg(path_time)
        )
        return await self.follow(JointTrajectory(joint_names=list(names), points=[point]))

    async def follow(self, trajectory: JointTrajectory) -> tuple[bool, str]:
        number = self._number()
        route = await self._route()
        if self._replaced(number):  # a newer goal came while this one waited for discovery
            return False, REPLACED
        if route == 'action':
            return await self._send_goal(trajectory, number)  # its turn (NewestGoal)
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

    async def _send_goal(self, trajectory: JointTrajectory, turn: int) -> tuple[bool, str]:
        """The goal sent to the action; turn: its number among the goals asked for."""
        name = self._action_name
        # Numbered as sent, not as accepted: the controller aborts the goal this replaces as it
        # accepts this one, and that result can come in before the acceptance does.
        self._goals_sent += 1
        number = self._goals_sent
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
        if self._replaced(turn):
            # A stop came while it awaited acceptance (one without joint states to hold the arm
            # at found no goal to cancel), or a newer goal, which would replace it anyway.
            self._node.get_logger().info(f'{name}: canceling a goal replaced before accepted')
            handle.cancel_goal_async()
            return False, REPLACED
        self._active = handle
        handle.get_result_async().add_done_callback(lambda done: self._log_result(done, number))
        return True, f'sent to {name}'

    def cancel_active(self) -> bool:
        handle, self._active = self._active, None
        if handle is None or handle.status not in ACTIVE_STATUSES:
            return False  # none sent, or it ended already
        handle.cancel_goal_async()
        return True

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
            log_outcome(
                logger,
                replaced,
                f'{self._action_name}: trajectory {status} (error_code '
                f'{answer.result.error_code}): {answer.result.error_string}'
                f'{"; a newer goal was sent" if replaced else ""}',
            )


class NoCommander:
    """Solve only: for dry runs and for arms commanded by something else."""

    def drop_pending(self) -> None:
        pass

    def cancel_active(self) -> bool:
        return False

    async def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        # Not accepted: is_planned says the arm took the goal (it said so, and the arm stayed).
        return False, 'not sent (command_interface is none)'

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
