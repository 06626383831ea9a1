"""`ros2 run iknet ik_client`: ask the IK server for a pose, print the solutions, optionally move.

The reference IKNet's inference script, done right: the server solves (and checks FK), the client
prints every solution with its error, and `--move` sends the arm through the server's
goal_task_space_path so the move is seeded with the arm's current joints. Exit code 0 on success.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.transforms import quaternion_from_matrix
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.service_calls import call_with_resend


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog='ik_client',
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for axis in 'xyz':
        parser.add_argument(f'--{axis}', type=float, required=True, help=f'target {axis} (m)')
    for axis in ('qx', 'qy', 'qz', 'qw'):
        parser.add_argument(f'--{axis}', type=float, help='target orientation quaternion')
    parser.add_argument(
        '--pitch',
        type=float,
        help='instead of a quaternion: tool pitch (rad, positive points down), facing the target',
    )
    parser.add_argument('--frame', default='world', help='frame of the target pose')
    parser.add_argument('--solutions', type=int, default=4, help='how many solutions to ask for')
    parser.add_argument(
        '--refine',
        action=argparse.BooleanOptionalAction,
        default=True,
        help='refine the network guess numerically',
    )
    parser.add_argument(
        '--solver',
        default='',
        help="analytic | network | network+refine | refine-from-zero; '' = the server's default",
    )
    parser.add_argument('--move', action='store_true', help='send the arm to the best solution')
    parser.add_argument('--path-time', type=float, default=4.0, help='duration of the move (s)')
    parser.add_argument('--server', default='/ik_server', help='name of the IK server node')
    parser.add_argument('--timeout', type=float, default=10.0, help='seconds to wait for answers')
    args = parser.parse_args(argv)
    quaternion = [args.qx, args.qy, args.qz, args.qw]
    given = [q is not None for q in quaternion]
    if args.pitch is not None and any(given):
        parser.error('give either --pitch or --qx --qy --qz --qw, not both')
    if args.pitch is None and not all(given):
        parser.error('give --qx --qy --qz --qw (all four) or --pitch')
    return args


def target_quaternion(args: argparse.Namespace) -> list[float]:
    if args.pitch is None:
        return [args.qx, args.qy, args.qz, args.qw]
    rotation = OmxAnalyticIK(OMX_CHAIN).pointing_rotation(
        np.array([args.x, args.y, args.z]), args.pitch
    )
    return [float(v) for v in quaternion_from_matrix(rotation)]


def call(node: Node, client, request, timeout_s: float, resend_after_s: float):
    """The service's response, or None after printing why there was none."""
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        answer = call_with_resend(executor, client, request, timeout_s, resend_after_s)
    finally:
        # Shut down here, while the context lives: an executor collected after rclpy's
        # shutdown prints an InvalidHandle error from its __del__.
        executor.remove_node(node)
        executor.shutdown()
    if not answer.found:
        print(f'error: service {client.srv_name} is not available', file=sys.stderr)
    elif answer.response is None:
        print(f'error: {client.srv_name} did not answer within {timeout_s} s', file=sys.stderr)
    return answer.response


def solve(node: Node, args: argparse.Namespace, quaternion: list[float]) -> bool:
    from iknet.srv import SolveIK

    request = SolveIK.Request(max_solutions=args.solutions, refine=args.refine, solver=args.solver)
    request.target.header.frame_id = args.frame
    position = request.target.pose.position
    position.x, position.y, position.z = args.x, args.y, args.z
    orientation = request.target.pose.orientation
    orientation.x, orientation.y, orientation.z, orientation.w = quaternion
    client = node.create_client(SolveIK, f'{args.server}/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    response = call(node, client, request, args.timeout, resend_after_s=1.0)
    if response is None:
        return False
    print(f'target: position {[args.x, args.y, args.z]} m, quaternion {np.round(quaternion, 6)}')
    print(f'{"success" if response.success else "FAILED"}: {response.message}')
    for rank, solution in enumerate(response.solutions):
        joints = ', '.join(
            f'{n}={p:+.6f}' for n, p in zip(solution.name, solution.position, strict=True)
        )
        print(
            f'  #{rank + 1} {joints} rad | position error '
            f'{response.position_errors[rank] * 1e3:.4f} mm, orientation error '
            f'{np.degrees(response.orientation_errors[rank]):.4f} deg'
            f'{"" if response.within_limits[rank] else " (outside software limits)"}'
        )
    return bool(response.success)


def move(node: Node, args: argparse.Namespace, quaternion: list[float]) -> bool:
    from open_manipulator_msgs.srv import SetKinematicsPose

    request = SetKinematicsPose.Request(
        planning_group='arm', end_effector_name='gripper', path_time=args.path_time
    )
    pose = request.kinematics_pose.pose
    pose.position.x, pose.position.y, pose.position.z = args.x, args.y, args.z
    pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w = quaternion
    if hasattr(request.kinematics_pose, 'header'):
        request.kinematics_pose.header.frame_id = args.frame
    client = node.create_client(SetKinematicsPose, f'{args.server}/goal_task_space_path')
    # The server answers a move once the controller has taken the goal (the server itself tries
    # twice, command_timeout 2 s each), well before the move ends: resend only after that.
    response = call(node, client, request, args.timeout + args.path_time, resend_after_s=5.0)
    if response is None:
        return False
    print(
        f'move: {"planned" if response.is_planned else "REFUSED"} (path_time {args.path_time} s)'
    )
    return bool(response.is_planned)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(rclpy.utilities.remove_ros_args(['ik_client', *argv])[1:])
    quaternion = target_quaternion(args)
    rclpy.init()
    node = rclpy.create_node('ik_client')
    try:
        ok = solve(node, args, quaternion)
        if ok and args.move:
            ok = move(node, args, quaternion)
        return 0 if ok else 1
    except KeyboardInterrupt:
        return 130
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
