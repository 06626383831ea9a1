"""A peer process for the interface round-trip test: serves SolveIK with the closed-form OM-X IK,
answers SetJointPosition and publishes the FK pose of the last accepted goal as KinematicsPose."""

import numpy as np
from open_manipulator_msgs.msg import KinematicsPose
from open_manipulator_msgs.srv import SetJointPosition
from rclpy.node import Node
from sensor_msgs.msg import JointState

from iknet.srv import SolveIK
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics, pose_from_joints
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_angle_between
from iknet_ros.node_runtime import run_node


class InterfacePeer(Node):
    def __init__(self) -> None:
        super().__init__('interface_peer')
        self.solver = OmxAnalyticIK(OMX_CHAIN)
        self.joints = np.zeros(4)
        self.create_service(SolveIK, 'solve_ik', self.solve)
        self.create_service(SetJointPosition, 'goal_joint_space_path', self.set_joints)
        self.pose_publisher = self.create_publisher(KinematicsPose, 'kinematics_pose', 10)
        self.create_timer(0.05, self.publish_pose)

    def solve(self, request: SolveIK.Request, response: SolveIK.Response) -> SolveIK.Response:
        pose = request.target.pose
        position = np.array([pose.position.x, pose.position.y, pose.position.z])
        quaternion = [
            pose.orientation.x,
            pose.orientation.y,
            pose.orientation.z,
            pose.orientation.w,
        ]
        rotation = matrix_from_quaternion(np.array(quaternion))
        solutions = self.solver.solve(position, rotation)[: max(1, request.max_solutions)]
        fk_position, fk_rotation = forward_kinematics(OMX_CHAIN, solutions)
        response.solutions = [
            JointState(name=OMX_CHAIN.joint_names, position=list(q)) for q in solutions
        ]
        response.position_errors = list(np.linalg.norm(fk_position - position, axis=-1))
        response.orientation_errors = list(rotation_angle_between(fk_rotation, rotation))
        response.within_limits = [True] * len(solutions)
        response.success = bool(len(solutions))
        response.message = f'{len(solutions)} solutions'
        return response

    def set_joints(self, request, response):
        names = list(request.joint_position.joint_name)
        response.is_planned = names == OMX_CHAIN.joint_names
        if response.is_planned:
            self.joints = np.array(request.joint_position.position)
        return response

    def publish_pose(self) -> None:
        pose = pose_from_joints(OMX_CHAIN, self.joints)
        message = KinematicsPose()
        message.header.stamp = self.get_clock().now().to_msg()
        message.pose.position.x, message.pose.position.y, message.pose.position.z = pose[:3]
        orientation = message.pose.orientation
        orientation.x, orientation.y, orientation.z, orientation.w = pose[3:]
        self.pose_publisher.publish(message)


def main() -> None:
    run_node(InterfacePeer)


if __name__ == '__main__':
    main()
