"""`ros2 run iknet ik_client`: ask the IK server for a pose, print the solutions, optionally move.

The reference IKNet's inference script, done right: the server solves (and checks FK), the client
prints every solution with its error, and `--move` sends the arm through the server's
goal_task_space_path so the move is seeded with the arm's current joints. `--line A:B` or
`--circle C:r` asks for a path instead (the server's solve_path, from the solution of its first
waypoint nearest the arm's joints), `--move` then moves the arm along it and `--plot` draws it;
`--alternatives M` and `--tighten` ask for the best of more starts and for smaller joint steps.
Without --pitch or a quaternion the position alone is asked for. Exit code 0 on success.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from iknet_core.interrupts import signals_as_interrupt
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.transforms import quaternion_from_matrix
from iknet_core.output_paths import figure_file
from iknet_ros.arm_command import duration_s
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.requests import MAX_ALTERNATIVES
from iknet_ros.service_calls import call_with_resend, spin_until

# A joint this close (rad) to its goal has arrived (the simulator quantizes to 4096 ticks a turn).
ARRIVED_RAD = 0.01
# A path's first waypoint is solved seeded with the arm's /joint_states; where DDS shows no
# publisher of it within this many seconds (no arm running), without a seed rather than after
# --timeout. Discovery on one machine takes well under a second, several on a busy one.
JOINT_STATES_DISCOVERY_S = 5.0
# SolveIK's max_solutions is a uint32: a larger count would wrap round.
MAX_SOLUTIONS = 2**32 - 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='ik_client',
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    for axis in 'xyz':
        parser.add_argument(
            f'--{axis}',
            type=float,
            help=f'target {axis} (m); the position alone (SolveIK.position_only) unless '
            '--pitch or --qx --qy --qz --qw is given',
        )
    parser.add_argument(
        '--line',
        type=parse_line,
        help="instead of --x --y --z: a straight path x0,y0,z0:x1,y1,z1 (m) from the arm's "
        'current joints; positions only unless --pitch or a quaternion is given',
    )
    parser.add_argument(
        '--circle',
        type=parse_circle,
        help='instead of --x --y --z: a horizontal circle cx,cy,cz:r (m), one turn from '
        '(cx + r, cy, cz); positions only unless --pitch or a quaternion is given',
    )
    parser.add_argument('--steps', type=int, default=100, help='waypoints of --line or --circle')
    parser.add_argument(
        '--alternatives',
        type=int,
        default=0,
        help='with --line or --circle: also follow the path from up to this many other '
        'solutions of its first waypoint and take the best (SolvePath.alternatives, at most '
        f'{MAX_ALTERNATIVES})',
    )
    parser.add_argument(
        '--tighten',
        action='store_true',
        help='with --line or --circle: also search for a path with a smaller largest joint step, '
        'on an arm with joints to spare for it (SolvePath.tighten; 2 to 3 times the time)',
    )
    parser.add_argument(
        '--plot',
        type=figure_file,
        help='with --line or --circle: draw the path and joints in this figure (.png, .pdf, ...)',
    )
    for axis in ('qx', 'qy', 'qz', 'qw'):
        parser.add_argument(f'--{axis}', type=float, help='target orientation quaternion')
    parser.add_argument(
        '--pitch',
        type=float,
        help='instead of a quaternion: tool pitch (rad, positive points down), facing the target '
        "(the OM-X's tool frame: its x axis along the tool)",
    )
    parser.add_argument(
        '--frame', default='', help="frame of the target pose; '' = the server's base frame"
    )
    parser.add_argument(
        '--solutions', type=int, default=None, help='how many solutions to ask for (default: 4)'
    )
    parser.add_argument(
        '--refine',
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refine --solver network's answer numerically (network+refine; default: no); "
        "the server's default solver, refined unless --no-refine where it is network",
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
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The flags, with the combinations argparse cannot check refused by name."""
    parser = build_parser()
    args = parser.parse_args(argv)
    quaternion = [args.qx, args.qy, args.qz, args.qw]
    given = [q is not None for q in quaternion]
    if args.pitch is not None and any(given):
        parser.error('give either --pitch or --qx --qy --qz --qw, not both')
    if any(given) and not all(given):
        parser.error('give --qx --qy --qz --qw (all four) or --pitch')
    if args.line is not None and args.circle is not None:
        parser.error('give --line or --circle, not both')
    if is_path(args):  # asked of ~/solve_path, which takes none of them
        unused = {
            '--solutions': args.solutions is not None,
            '--solver': bool(args.solver),
            '--refine/--no-refine': args.refine is not None,
        }
        for flag in (flag for flag, given in unused.items() if given):
            parser.error(f'{flag} is for a single pose (--x --y --z), not --line or --circle')
    if args.solutions is None:
        args.solutions = 4
    if not 1 <= args.solutions <= MAX_SOLUTIONS:
        parser.error(f'--solutions must be 1 to {MAX_SOLUTIONS}, got {args.solutions}')
    if not args.path_time > 0.0:
        parser.error(f'--path-time must be > 0 s, got {args.path_time}')
    if not is_path(args):
        for flag in ('alternatives', 'tighten'):
            if getattr(args, flag):
                parser.error(f'--{flag} is for --line or --circle')
        if None in (args.x, args.y, args.z):
            parser.error('give --x --y --z, or --line or --circle')
        if args.move and args.pitch is None and not all(given):
            parser.error('--move needs --pitch or a quaternion: the arm is sent to a whole pose')
        if args.move and (args.solver or args.refine is False):
            parser.error(
                "--move sends the arm to the server's solver's refined answer: --solver and "
                '--no-refine do not apply to it'
            )
    elif args.steps < 2:
        parser.error(f'--steps must be at least 2, got {args.steps}')
    elif not 0 <= args.alternatives <= MAX_ALTERNATIVES:
        parser.error(f'--alternatives must be 0 to {MAX_ALTERNATIVES}, got {args.alternatives}')
    elif args.move and args.pitch is None and not all(given):  # its start is a whole pose
        parser.error(
            f'--{path_name(args)} --move needs --pitch or a quaternion, to send the arm to its '
            'start'
        )
    if args.refine is False and args.solver not in ('', 'network'):
        # `refine` turns the network into network+refine; the other solvers answer as they are.
        parser.error(
            f"--no-refine does not apply to --solver {args.solver}: for the network's own "
            'answer, ask --solver network'
        )
    if args.refine is None:
        args.refine = args.solver != 'network'
    args.moves_sent = []  # the arm commands sent (move and follow_shape): interrupted()
    return args


def is_path(args: argparse.Namespace) -> bool:
    return args.line is not None or args.circle is not None


def path_name(args: argparse.Namespace) -> str:
    return 'line' if args.line is not None else 'circle'


def parse_circle(text: str) -> np.ndarray:
    """'cx,cy,cz:r' -> (4,) = centre (m), radius (m)."""
    try:
        centre, radius = text.split(':')
        values = np.array([*(float(v) for v in centre.split(',')), float(radius)])
    except ValueError:
        values = np.zeros(0)
    if values.shape != (4,) or not np.isfinite(values).all() or not values[3] > 0.0:
        raise argparse.ArgumentTypeError(f'expected cx,cy,cz:r in metres (r > 0), got {text!r}')
    return values


def parse_line(text: str) -> np.ndarray:
    """'x0,y0,z0:x1,y1,z1' -> (2, 3) m."""
    try:
        ends = np.array([[float(v) for v in end.split(',')] for end in text.split(':')])
    except ValueError:
        ends = np.zeros(0)
    if ends.shape != (2, 3) or not np.isfinite(ends).all():
        raise argparse.ArgumentTypeError(f'expected x0,y0,z0:x1,y1,z1 in metres, got {text!r}')
    return ends


def target_quaternion(args: argparse.Namespace) -> list[float] | None:
    """The target orientation as a quaternion, or None for a position alone."""
    if args.pitch is None:
        given = [args.qx, args.qy, args.qz, args.qw]
        return None if None in given else given
    rotation = OmxAnalyticIK(OMX_CHAIN).pointing_rotation(
        np.array([args.x, args.y, args.z]), args.pitch
    )
    return [float(v) for v in quaternion_from_matrix(rotation)]


def call(
    node: Node,
    client,
    request,
    timeout_s: float,
    resend_after_s: float,
    max_resends: int | None = None,
):
    """The service's response, or None after printing why there was none."""
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        answer = call_with_resend(
            executor, client, request, timeout_s, resend_after_s, max_resends
        )
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


def solve(node: Node, args: argparse.Namespace, quaternion: list[float] | None) -> bool:
    """Ask ~/solve_ik for the target (the position alone where quaternion is None)."""
    from iknet.srv import SolveIK

    request = SolveIK.Request(
        max_solutions=args.solutions, refine=args.refine, solver=args.solver,
        position_only=quaternion is None,
    )  # fmt: skip
    request.target.header.frame_id = args.frame
    position = request.target.pose.position
    position.x, position.y, position.z = args.x, args.y, args.z
    orientation = request.target.pose.orientation
    if quaternion is not None:
        orientation.x, orientation.y, orientation.z, orientation.w = quaternion
    if args.move:  # the solution the server moves the arm to, seeded with the arm's joints
        present = joint_state(node, args.timeout, no_publisher_after_s=JOINT_STATES_DISCOVERY_S)
        if present is not None:
            request.seed = present
    client = node.create_client(SolveIK, f'{args.server}/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    response = ask_seeded(node, client, request, args.timeout)
    if response is None:
        return False
    aim = 'any orientation' if quaternion is None else f'quaternion {np.round(quaternion, 6)}'
    print(f'target: position {[args.x, args.y, args.z]} m, {aim}')
    print(f'{"success" if response.success else "FAILED"}: {response.message}')
    if response.solutions:
        print('joint positions in rad (m for a prismatic joint), as in sensor_msgs/JointState:')
    for rank, solution in enumerate(response.solutions):
        joints = ', '.join(
            f'{n}={p:+.6f}' for n, p in zip(solution.name, solution.position, strict=True)
        )
        print(
            f'  #{rank + 1} {joints} | position error '
            f'{response.position_errors[rank] * 1e3:.4f} mm, orientation error '
            f'{np.degrees(response.orientation_errors[rank]):.4f} deg'
            f'{"" if response.within_limits[rank] else " (outside software limits)"}'
        )
    names = list(response.solutions[0].name) if response.solutions else []
    if args.pitch is not None and names and names != list(OMX_CHAIN.joint_names):
        print(
            "note: --pitch builds the OM-X's tool orientation (its x axis along the tool, facing "
            "the target); this arm's tool frame may differ: give its --qx --qy --qz --qw instead"
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
    args.moves_sent.append('goal_task_space_path')  # sent from here on: Ctrl-C says so
    response = call(node, client, request, args.timeout + args.path_time, resend_after_s=5.0)
    if response is None:
        return False
    # SetKinematicsPose carries no reason; the server logs it.
    outcome = 'planned' if response.is_planned else "REFUSED (the IK server's log says why)"
    print(f'move: {outcome} (path_time {args.path_time} s)')
    return bool(response.is_planned)


def shape_waypoints(args: argparse.Namespace) -> np.ndarray:
    """--line or --circle as (steps, 7) poses, or (steps, 3) positions when no orientation was
    given."""
    fractions = np.linspace(0.0, 1.0, args.steps)
    if args.line is not None:
        positions = args.line[0] + fractions[:, None] * np.diff(args.line, axis=0)
    else:
        angles = 2.0 * np.pi * fractions
        centre, radius = args.circle[:3], args.circle[3]
        positions = centre + radius * np.stack(
            [np.cos(angles), np.sin(angles), np.zeros_like(angles)], -1
        )
    if args.pitch is not None:
        solver = OmxAnalyticIK(OMX_CHAIN)
        rotations = np.stack([solver.pointing_rotation(p, args.pitch) for p in positions])
        return np.concatenate([positions, quaternion_from_matrix(rotations)], -1)
    if args.qw is not None:
        quaternion = np.array([args.qx, args.qy, args.qz, args.qw])
        return np.concatenate([positions, np.broadcast_to(quaternion, (args.steps, 4))], -1)
    return positions


def follow_shape(node: Node, args: argparse.Namespace) -> bool:
    """--line or --circle from the solution of its first waypoint nearest the arm's joints: the
    arm goes there first (--move), then along the path."""
    from iknet.srv import SolveIK, SolvePath

    path = shape_waypoints(args)
    first = waypoint_pose(path[0])
    request = SolveIK.Request(max_solutions=1, refine=True, position_only=path.shape[1] == 3)
    request.target.header.frame_id = args.frame
    request.target.pose = first
    client = node.create_client(SolveIK, f'{args.server}/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    # The server first: with none running, the wait for the arm's joint states is not spent.
    if not client.wait_for_service(timeout_sec=args.timeout):
        print(f'error: service {client.srv_name} is not available', file=sys.stderr)
        return False
    # The seed, so the first waypoint is on the arm's branch; a move waits for it whatever.
    discovery_s = None if args.move else JOINT_STATES_DISCOVERY_S
    present = joint_state(node, args.timeout, no_publisher_after_s=discovery_s)
    if present is not None:
        request.seed = present
    else:
        why = (
            'no publisher of /joint_states'
            if node.count_publishers('/joint_states') == 0
            else f'no /joint_states within {args.timeout} s'
        )
        print(f"note: {why}: the first waypoint is solved without the arm's joints")
    answer = ask_seeded(node, client, request, args.timeout)
    if answer is None or not answer.success:
        reason = answer.message if answer else 'no answer'
        print(f"FAILED: the {path_name(args)}'s first waypoint: {reason}")
        return False
    start = answer.solutions[0]
    request = SolvePath.Request(position_only=path.shape[1] == 3, start=start)
    request.alternatives, request.tighten = args.alternatives, args.tighten
    request.path.header.frame_id = args.frame
    request.path.poses = [waypoint_pose(waypoint) for waypoint in path]
    client = node.create_client(
        SolvePath, f'{args.server}/solve_path', qos_profile=SERVICE_QUEUE_QOS
    )
    # One resend, for a request lost while the new client and the server discover each other
    # (the server answers a resend of the path it just answered from that answer; a long path
    # with alternatives takes seconds to follow).
    timeout_s = args.timeout + (60.0 if args.move else 0.0)
    if args.move:
        # The whole path first, not executed: the arm is not moved to the start of a path that
        # is then refused (a waypoint out of reach). Solved again to execute it (the same
        # request, start and settings: the same path).
        checked = call(node, client, request, timeout_s, 1.0, 1)
        if checked is None or not checked.success:
            return checked is not None and report_path(args, path, checked, ' (the arm not moved)')
        if not move_to(node, args, first, start):
            return False
        request.execute = True
        args.moves_sent.append('solve_path')
    # The server answers a move once the controller has taken it (a legacy arm its first goal),
    # after trying twice, command_timeout each: allow a minute more. A move must not be sent
    # twice, so no resend then.
    response = call(node, client, request, timeout_s, timeout_s if args.move else 1.0, 1)
    if response is None:
        if args.move:
            print('  the arm may still be moving along the path', file=sys.stderr)
        return False
    return report_path(args, path, response)


def report_path(args: argparse.Namespace, path: np.ndarray, response, note: str = '') -> bool:
    """Print a SolvePath answer (and plot it with --plot); whether it succeeded, and was
    executed where --move asked."""
    outcome = 'success' if response.success else 'FAILED'
    print(f'{path_name(args)} of {args.steps} waypoints: {outcome}{note}: {response.message}')
    reached = np.array(response.position_errors)[: len(response.trajectory.points)]
    if len(reached):
        print(f'  {len(reached)} points, largest position error {reached.max() * 1e3:.4f} mm')
    if args.plot is not None and response.trajectory.points:
        plot_path(args.plot, path, response)
        print(f'  wrote {args.plot}')
    return bool(response.success and (response.executed or not args.move))


def ask_seeded(node: Node, client, request, timeout_s: float):
    """SolveIK's answer to request, seeded with the arm's joint states where it has a seed.
    Where the states so far were another publisher's on /joint_states (a gripper's, without the
    arm's joints: requests.check_seed's refusal), asked without a seed for the arm's joint names,
    then again with the states once they hold them all (up to JOINT_STATES_DISCOVERY_S)."""
    answer = call(node, client, request, timeout_s, resend_after_s=1.0)
    refused = answer is not None and not answer.success and answer.message.startswith('seed ')
    if not (refused and len(request.seed.name)):
        return answer
    request.seed = type(request.seed)()
    answer = call(node, client, request, timeout_s, resend_after_s=1.0)
    names = list(answer.solutions[0].name) if answer and answer.solutions else []
    has_arm = lambda state: set(names) <= set(state.name)  # noqa: E731
    wait_s = min(timeout_s, JOINT_STATES_DISCOVERY_S)
    present = joint_state(node, wait_s, has_arm)
    if names and present is not None:
        request.seed = present
        answer = call(node, client, request, timeout_s, resend_after_s=1.0)
    elif names:
        print(
            f"note: /joint_states did not name all of the arm's joints {names} within "
            f"{wait_s:g} s: solved without the arm's joints"
        )
    return answer


def joint_state(
    node: Node,
    timeout_s: float,
    until=lambda state: True,
    no_publisher_after_s: float | None = None,
):
    """The arm's latest joint states, merged by name from every /joint_states publisher (a
    gripper's driver beside the arm's), as one JointState once until(it) holds; None when that
    does not happen within timeout_s, or when no_publisher_after_s pass with no publisher of the
    topic discovered (one subscription for the whole wait)."""
    from sensor_msgs.msg import JointState

    merged: dict[str, float] = {}

    def take(message: JointState) -> None:
        if len(message.name) == len(message.position):
            merged.update(zip(message.name, message.position, strict=True))

    def state() -> JointState:
        return JointState(name=list(merged), position=[float(v) for v in merged.values()])

    subscription = node.create_subscription(JointState, '/joint_states', take, 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    started = time.monotonic()

    def ended() -> bool:
        if merged and until(state()):
            return True
        return (
            no_publisher_after_s is not None
            and time.monotonic() - started > no_publisher_after_s
            and node.count_publishers('/joint_states') == 0
        )

    try:
        done = spin_until(executor, ended, timeout_s) and bool(merged) and until(state())
    finally:
        executor.remove_node(node)
        executor.shutdown()
        node.destroy_subscription(subscription)
    return state() if done else None


def waypoint_pose(waypoint: np.ndarray):
    from geometry_msgs.msg import Pose

    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in waypoint[:3])
    if len(waypoint) == 7:
        o = pose.orientation
        o.x, o.y, o.z, o.w = (float(v) for v in waypoint[3:])
    else:
        pose.orientation.w = 1.0  # unused: the line is positions only
    return pose


def move_to(node: Node, args: argparse.Namespace, pose, joints) -> bool:
    """Move the arm to a pose (goal_task_space_path, seeded by the server with the arm's joints,
    as the solution `joints` was) and wait until its joint states are there."""
    quaternion = [pose.orientation.x, pose.orientation.y, pose.orientation.z, pose.orientation.w]
    p = pose.position
    if not move(
        node, argparse.Namespace(**{**vars(args), 'x': p.x, 'y': p.y, 'z': p.z}), quaternion
    ):
        return False
    goal = dict(zip(joints.name, joints.position, strict=True))

    def arrived(state) -> bool:
        present = dict(zip(state.name, state.position, strict=False))
        return all(abs(present.get(name, np.inf) - v) < ARRIVED_RAD for name, v in goal.items())

    if joint_state(node, args.path_time + args.timeout, arrived) is None:
        print("error: the arm did not reach the path's first waypoint", file=sys.stderr)
        return False
    return True


def plot_path(path_file: Path, path: np.ndarray, response) -> None:
    """The target path's x, y, z against FK of the answer (drawn for the OM-X, whose chain the
    client knows), each waypoint's position error, and the joint curves in time."""
    import matplotlib

    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from iknet_core.kinematics.fk import forward_kinematics

    points = response.trajectory.points
    joints = np.array([point.positions for point in points])
    stamps = [duration_s(point.time_from_start) for point in points]
    figure, (positions, errors, curves) = plt.subplots(1, 3, figsize=(16, 4.5))
    reached = None
    if list(response.trajectory.joint_names) == OMX_CHAIN.joint_names:
        reached, _ = forward_kinematics(OMX_CHAIN, joints)
    for index, (axis_name, color) in enumerate(
        zip('xyz', ('tab:red', 'tab:green', 'tab:blue'), strict=True)
    ):
        positions.plot(
            path[:, index], 'o', ms=4, mfc='none', color=color, label=f'{axis_name} target'
        )
        if reached is not None:
            positions.plot(reached[:, index], '-', color=color, label=f'{axis_name} of FK(answer)')
    positions.set(xlabel='waypoint', ylabel='tip position (m)')
    positions.legend(fontsize=8)
    errors.semilogy(np.maximum(np.array(response.position_errors) * 1e3, 1e-9), '.')
    errors.set(xlabel='waypoint', ylabel='position error (mm; NaN: not reached)')
    for index, name in enumerate(response.trajectory.joint_names):
        curves.plot(stamps, joints[:, index], label=name)
    curves.set(xlabel='time from start (s)', ylabel='joint (rad; m if prismatic)')
    curves.legend(fontsize=8)
    figure.tight_layout()
    path_file.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path_file, dpi=100)
    plt.close(figure)


def interrupted(args: argparse.Namespace, signal_number: int) -> int:
    """The shell's status for a stop by signal_number; once a move was sent, a line saying
    that the arm may go on with it (the client's end stops nothing), and how to hold it."""
    if args.moves_sent:
        print(
            f'ik_client: interrupted; the arm may still be moving: {args.server}/stop holds it',
            file=sys.stderr,
        )
    return 128 + signal_number


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(rclpy.utilities.remove_ros_args(['ik_client', *argv])[1:])
    # Installed before rclpy.init: rclpy's handler calls this one after its own.
    with signals_as_interrupt() as stopped_by:
        node = None
        try:
            rclpy.init()
            # Inside: the node shows in the graph before its constructor returns, and a signal
            # sent then raised out of it as a traceback.
            node = rclpy.create_node('ik_client')
            if is_path(args):
                return 0 if follow_shape(node, args) else 1
            quaternion = target_quaternion(args)
            ok = solve(node, args, quaternion)
            if ok and args.move:
                ok = move(node, args, quaternion)
            return 0 if ok else 1
        except KeyboardInterrupt:
            return interrupted(args, stopped_by[-1])
        except Exception:
            # A signal shuts rclpy down in rclpy's own handler, before Python runs the one that
            # records it: an error from a shut-down rclpy is taken for that signal. Not where
            # rclpy.init or create_node failed with no signal recorded (a bad setting).
            if rclpy.ok() or (node is None and len(stopped_by) == 1):
                raise
            return interrupted(args, stopped_by[-1])
        finally:
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()


if __name__ == '__main__':
    sys.exit(main())
