"""A FollowJointTrajectory controller that holds each goal's acceptance until a file exists: a
controller slow to accept, for the race of a stop with a goal still awaiting acceptance.

Prints (flushed) 'goal received' as a goal comes, 'accepted' once the file exists, then
'canceled' or 'succeeded' as the goal ends (it runs until canceled, or for 60 s)."""

import sys
import time
from pathlib import Path

import rclpy
from control_msgs.action import FollowJointTrajectory
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor


def say(line: str) -> None:
    print(line, flush=True)


def main() -> int:
    release = Path(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node('held_trajectory_controller')

    def on_goal(goal: FollowJointTrajectory.Goal) -> GoalResponse:
        say('goal received')
        deadline = time.monotonic() + 60.0
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        say('accepted')
        return GoalResponse.ACCEPT

    def execute(handle) -> FollowJointTrajectory.Result:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            if handle.is_cancel_requested:
                handle.canceled()
                say('canceled')
                return FollowJointTrajectory.Result()
            time.sleep(0.01)
        handle.succeed()
        say('succeeded')
        return FollowJointTrajectory.Result()

    ActionServer(
        node, FollowJointTrajectory, '/arm_controller/follow_joint_trajectory', execute,
        goal_callback=on_goal, cancel_callback=lambda _: CancelResponse.ACCEPT,
        callback_group=ReentrantCallbackGroup(),
    )  # fmt: skip
    executor = MultiThreadedExecutor()
    executor.add_node(node)
    try:
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
