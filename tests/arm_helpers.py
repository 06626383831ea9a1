"""Stand-ins for an arm's interfaces, served by a test's own node, for the IK server to drive."""

from __future__ import annotations

from open_manipulator_msgs.srv import SetJointPosition


def legacy_controller_stand_in(node) -> list[list[float]]:
    """Serve /goal_joint_space_path on node, taking every goal; the list the goals' joint
    positions are appended to as they come."""
    commanded: list[list[float]] = []

    def take_goal(request, response):
        commanded.append(list(request.joint_position.position))
        response.is_planned = True
        return response

    node.create_service(SetJointPosition, '/goal_joint_space_path', take_goal)
    return commanded
