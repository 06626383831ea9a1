"""Ways to send joint goals to the arm: the legacy ROBOTIS service, a ros2_control trajectory
topic, or nowhere. Each reports whether the goal was accepted, with a reason when it was not."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Protocol

from builtin_interfaces.msg import Duration
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.node import Node
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

COMMAND_INTERFACES = ('legacy', 'trajectory', 'none')


class ArmCommander(Protocol):
    def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        """Send a joint goal reached after path_time (s); (accepted, reason)."""
        ...


class LegacyCommander:
    """SetJointPosition on /goal_joint_space_path, as the ROBOTIS legacy controller serves it."""

    def __init__(self, node: Node, service: str, timeout_s: float) -> None:
        from open_manipulator_msgs.srv import SetJointPosition

        self._request_type = SetJointPosition.Request
        # Reentrant: the answer must be processed while the calling service callback waits.
        self._client = node.create_client(
            SetJointPosition, service, callback_group=ReentrantCallbackGroup()
        )
        self._timeout_s = timeout_s

    def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        # A controller started together with the server may still be in discovery.
        if not self._client.wait_for_service(timeout_sec=self._timeout_s):
            return False, f'arm controller service {self._client.srv_name} is not available'
        request = self._request_type(path_time=float(path_time))
        request.joint_position.joint_name = list(names)
        request.joint_position.position = [float(p) for p in positions]
        # DDS can lose the answer to a client the controller has just discovered; resending the
        # same joint goal is harmless, so try twice before reporting failure.
        for _attempt in range(2):
            answered = threading.Event()
            future = self._client.call_async(request)
            future.add_done_callback(lambda _, event=answered: event.set())
            if answered.wait(self._timeout_s):
                break
            self._client.remove_pending_request(future)
        else:
            return False, f'{self._client.srv_name} did not answer within {self._timeout_s} s'
        if not future.result().is_planned:
            return False, f'{self._client.srv_name} refused the goal'
        return True, f'sent to {self._client.srv_name}'


class TrajectoryCommander:
    """A one-point JointTrajectory for a ros2_control JointTrajectoryController."""

    def __init__(self, node: Node, topic: str) -> None:
        self._publisher = node.create_publisher(JointTrajectory, topic, 10)

    def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        if self._publisher.get_subscription_count() == 0:
            return False, f'nothing subscribes to {self._publisher.topic_name}'
        seconds = int(path_time)
        point = JointTrajectoryPoint(
            positions=[float(p) for p in positions],
            time_from_start=Duration(sec=seconds, nanosec=int((path_time - seconds) * 1e9)),
        )
        self._publisher.publish(JointTrajectory(joint_names=list(names), points=[point]))
        return True, f'published on {self._publisher.topic_name}'


class NoCommander:
    """Solve only: for dry runs and for arms commanded by something else."""

    def command(
        self, names: Sequence[str], positions: Sequence[float], path_time: float
    ) -> tuple[bool, str]:
        return True, 'not sent (command_interface is none)'


def make_commander(
    node: Node, interface: str, service: str, topic: str, timeout_s: float
) -> ArmCommander:
    if interface == 'legacy':
        return LegacyCommander(node, service, timeout_s)
    if interface == 'trajectory':
        return TrajectoryCommander(node, topic)
    if interface == 'none':
        return NoCommander()
    raise ValueError(f'command_interface {interface!r} is not one of {COMMAND_INTERFACES}')
