"""One IK client process: N test poses, one request at a time, each answer checked against FK.

Prints 'answered K, resent R' and exits 0 when every answer was successful and matched FK. A
request with no answer after 5 s is sent again (at most 3 times) and counted in R, so that a lost
answer shows as a count rather than a hang."""

import sys

import numpy as np
import rclpy

from iknet.srv import SolveIK
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_ros.qos import SERVICE_QUEUE_QOS


def main() -> int:
    poses = np.loadtxt(sys.argv[1], delimiter=',', ndmin=2)
    rclpy.init()
    node = rclpy.create_node('solve_client')
    client = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    answered = 0
    resent = 0
    try:
        if not client.wait_for_service(timeout_sec=60.0):
            print('no service')
            return 1
        for pose in poses:
            request = SolveIK.Request(max_solutions=1, refine=True)
            p, o = request.target.pose.position, request.target.pose.orientation
            p.x, p.y, p.z = (float(v) for v in pose[:3])
            o.x, o.y, o.z, o.w = (float(v) for v in pose[3:])
            for _attempt in range(3):
                future = client.call_async(request)
                rclpy.spin_until_future_complete(node, future, timeout_sec=5.0)
                if future.done():
                    break
                client.remove_pending_request(future)
                resent += 1
            else:
                print(f'request lost after {answered} answers')
                return 1
            response = future.result()
            position, _ = forward_kinematics(OMX_CHAIN, np.array(response.solutions[0].position))
            error = np.linalg.norm(position - pose[:3])
            if not response.success or abs(error - response.position_errors[0]) > 1e-9:
                print(f'bad answer: {response.message}')
                return 1
            answered += 1
        print(f'answered {answered}, resent {resent}')
        return 0
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
