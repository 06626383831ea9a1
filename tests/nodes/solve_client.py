"""One IK client process: N test poses, one request at a time, each answer checked against FK.

Prints 'answered K, resent R after the first answer (first request resent F)' and exits 0 when
every answer was successful and matched FK. A late request is sent again
(iknet_ros/service_calls.py) and counted: F counts answers lost while the server was still
discovering this client, R counts answers lost afterwards, which a too-small response queue
would cause."""

import sys

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor

from iknet.srv import SolveIK
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.service_calls import call_with_resend


def main() -> int:
    poses = np.loadtxt(sys.argv[1], delimiter=',', ndmin=2)
    rclpy.init()
    node = rclpy.create_node('solve_client')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    client = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    resent = []
    try:
        for pose in poses:
            request = SolveIK.Request(max_solutions=1, refine=True)
            p, o = request.target.pose.position, request.target.pose.orientation
            p.x, p.y, p.z = (float(v) for v in pose[:3])
            o.x, o.y, o.z, o.w = (float(v) for v in pose[3:])
            answer = call_with_resend(
                executor, client, request, timeout_s=60.0, resend_after_s=5.0 if resent else 1.0
            )
            if answer.response is None:
                print(f'no answer after {len(resent)} answers (found: {answer.found})')
                return 1
            resent.append(answer.resent)
            response = answer.response
            position, _ = forward_kinematics(OMX_CHAIN, np.array(response.solutions[0].position))
            error = np.linalg.norm(position - pose[:3])
            if not response.success or abs(error - response.position_errors[0]) > 1e-9:
                print(f'bad answer: {response.message}')
                return 1
        print(
            f'answered {len(resent)}, resent {sum(resent[1:])} after the first answer '
            f'(first request resent {resent[0]})'
        )
        return 0
    finally:
        executor.remove_node(node)
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
