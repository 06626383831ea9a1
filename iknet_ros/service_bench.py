"""`ros2 run iknet service_bench`: SolveIK round trips through the real server, beside a trivial
service of the same message size, and the IK compute time inside the server.

Starts both servers as processes on this machine (loopback discovery), interleaves the calls so
both see the same machine load, prints medians and p95, and ends every process it started. The
requests are the shipped OM-X test recording's poses for an OM-X model, and for another arm's
model FK poses of random joints inside its limits, in its base frame.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import rclpy
from domain_coordinator import domain_id
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from iknet.srv import SolveIK
from iknet_core.checkpoint import load_checkpoint
from iknet_core.csv_schema import KINEMATICS_POSE_FILE, POSE_COLUMNS
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics import OMX_CHAIN, Chain, pose_from_joints
from iknet_core.resources import TEST_DATA, installed_executable, shipped
from iknet_core.solvers.policy import joint_bounds
from iknet_ros.node_runtime import run_node
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.server_processes import ProcessGroup, Server, wait_until_up
from iknet_ros.service_calls import READY_TIMEOUT_S, call_with_resend

COMPUTE_TIME = re.compile(r'in (\d+) us')
# Once a server is up, how long one of its answers may take (s): the first pass's calls resend.
ANSWER_TIMEOUT_S = 60
# Median IK compute inside the server the issues ask for (us): the closed form's, any other's.
COMPUTE_TARGET_US = {'analytic': 20}
DEFAULT_COMPUTE_TARGET_US = 150


class TrivialSolveIK(Node):
    """Answers SolveIK with a fixed one-solution response: the transport cost and nothing else."""

    def __init__(self) -> None:
        super().__init__('trivial_solve_ik')
        self.create_service(SolveIK, '~/solve_ik', self.answer, qos_profile=SERVICE_QUEUE_QOS)

    def answer(self, request: SolveIK.Request, response: SolveIK.Response) -> SolveIK.Response:
        response.success = True
        response.message = 'network: 1 solution, best 0.000 mm in 0 us'
        response.solutions = [
            JointState(name=['joint1', 'joint2', 'joint3', 'joint4'], position=[0.0] * 4)
        ]
        response.solutions[0].header.frame_id = 'world'
        response.position_errors = [0.0]
        response.orientation_errors = [0.0]
        response.within_limits = [True]
        return response


def serve_trivial() -> int:
    run_node(TrivialSolveIK)
    return 0


@contextlib.contextmanager
def running(commands: dict[str, list[str]]) -> Iterator[list[Server]]:
    """The servers by name, each in a session of its own, ended with the block (SIGINT, then
    SIGKILL); their output goes to files removed after."""
    with tempfile.TemporaryDirectory(prefix='service_bench-') as logs, ProcessGroup() as group:
        servers = []
        for name, command in commands.items():
            log = Path(logs) / f'{name}.log'
            servers.append(Server(name, group.start(*command, log=log), log))
        yield servers


def bench_requests(model: str, count: int) -> list[SolveIK.Request]:
    """count requests for the arm the server serves: recorded OM-X poses for the shipped models
    or an OM-X model, FK of random joints inside the limits for another arm's; position only
    for a position-only model. ValueError or OSError where the model cannot be read."""
    checkpoint = load_checkpoint(model) if model else None
    chain = checkpoint.chain if checkpoint else OMX_CHAIN
    config = checkpoint.model.config if checkpoint else None
    position_only = bool(getattr(config, 'position_only', False))
    if chain.name == OMX_CHAIN.name:
        import pandas as pd

        recorded = pd.read_csv(shipped(TEST_DATA) / KINEMATICS_POSE_FILE)[list(POSE_COLUMNS)]
        poses = recorded.to_numpy()[np.linspace(0, len(recorded) - 1, count).astype(int)]
    else:
        poses = random_reachable_poses(chain, count)
    return [pose_request(pose, chain.base_frame, position_only) for pose in poses]


def random_reachable_poses(chain: Chain, count: int, seed: int = 0) -> np.ndarray:
    """(count, 7) tip poses of joints drawn uniformly inside the software limits."""
    low, high = joint_bounds(chain, 'limits')
    joints = np.random.default_rng(seed).uniform(low, high, (count, chain.n_joints))
    return pose_from_joints(chain, joints)


def pose_request(pose: np.ndarray, frame: str, position_only: bool) -> SolveIK.Request:
    """One unrefined solution (the server's solver) for pose (x, y, z, qx, qy, qz, qw)."""
    request = SolveIK.Request(max_solutions=1, refine=False, position_only=position_only)
    request.target.header.frame_id = frame
    p, o = request.target.pose.position, request.target.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pose[:3])
    o.x, o.y, o.z, o.w = (float(v) for v in pose[3:])
    return request


def round_trip(
    executor: SingleThreadedExecutor, client, request, timeout_s: float = 10.0
) -> tuple[float, object]:
    """One timed call, no resend: the warm-up pass has already ended discovery."""
    started = time.perf_counter()
    future = client.call_async(request)
    while not future.done():
        executor.spin_once(timeout_sec=1.0)
        if time.perf_counter() - started > timeout_s:
            raise SystemExit(f'{client.srv_name} did not answer within {timeout_s} s')
    return time.perf_counter() - started, future.result()


def measure(requests: list[SolveIK.Request], servers: list[Server]) -> dict[str, np.ndarray]:
    node = executor = None
    try:
        rclpy.init()
        node = rclpy.create_node('service_bench')
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        clients = {
            'trivial': node.create_client(
                SolveIK, '/trivial_solve_ik/solve_ik', qos_profile=SERVICE_QUEUE_QOS
            ),
            'ik_server': node.create_client(
                SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS
            ),
        }
        wait_until_up(
            executor,
            lambda: all(client.service_is_ready() for client in clients.values()),
            servers,
            READY_TIMEOUT_S,
            'the two SolveIK services',
        )
        # An untimed pass warms caches and JITs, and resends what discovery loses.
        for request in requests:
            for name, client in clients.items():
                answer = call_with_resend(executor, client, request, timeout_s=ANSWER_TIMEOUT_S)
                if answer.response is None:
                    gone = [reason for server in servers if (reason := server.exited())]
                    raise SystemExit(
                        gone[0] if gone else f'{name} did not answer within {ANSWER_TIMEOUT_S} s'
                    )
                if COMPUTE_TIME.search(answer.response.message) is None:
                    raise SystemExit(f'{name} refused the request: {answer.response.message}')
        times = {name: [] for name in clients}
        compute = []
        unsolved = []
        for request in requests:
            for name, client in clients.items():
                seconds, response = round_trip(executor, client, request)
                times[name].append(seconds)
                if name == 'ik_server':
                    if not response.success:
                        unsolved.append(response.message)
                    compute.append(float(COMPUTE_TIME.search(response.message).group(1)))
        if unsolved:
            print(
                f"{len(unsolved)} of {len(requests)} requests unsolved within the server's "
                f'tolerance (the network alone answers to its own accuracy; a recorded pose '
                f"may lie just off the arm's reach), e.g. {unsolved[0]}"
            )
        return {**{k: np.array(v) * 1e6 for k, v in times.items()}, 'compute': np.array(compute)}
    except Exception:
        if rclpy.ok() or node is None:  # an error, not a signal
            raise
        raise KeyboardInterrupt from None  # a signal shut rclpy down before its handler ran
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='service_bench',
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument('--requests', type=int, default=1000, help='timed requests per server')
    parser.add_argument('--solver', default='network', help='ik_server solver parameter')
    parser.add_argument('--model', default='', help="checkpoint; '' = the shipped models")
    parser.add_argument('--trivial-server', action='store_true', help=argparse.SUPPRESS)
    return parser


@exits_on_interrupt('service_bench', 'the servers it started are ended')
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.trivial_server:
        return serve_trivial()
    os.environ.setdefault('ROS_AUTOMATIC_DISCOVERY_RANGE', 'LOCALHOST')
    with contextlib.ExitStack() as domain:
        if 'ROS_DOMAIN_ID' not in os.environ:
            os.environ['ROS_DOMAIN_ID'] = str(domain.enter_context(domain_id()))
        return bench(args)


def bench(args: argparse.Namespace) -> int:
    commands = {
        'trivial service': [sys.executable, '-m', 'iknet_ros.service_bench', '--trivial-server'],
        'ik_server': [
            str(installed_executable('ik_server')),
            '--ros-args',
            '-p', f'solver:={args.solver}',
            '-p', 'command_interface:=none',
            '-p', 'device:=cpu',
            *(['-p', f'model_path:={args.model}'] if args.model else []),
        ],
    }  # fmt: skip
    try:
        requests = bench_requests(args.model, args.requests)
    except (ValueError, OSError) as error:  # a model it cannot read: before any server starts
        return failed('service_bench', error)
    with running(commands) as servers:
        result = measure(requests, servers)
    trivial, served, compute = result['trivial'], result['ik_server'], result['compute']
    print(f'SolveIK round trips, {len(served)} requests each, solver {args.solver}:')
    for name, values in (('trivial service', trivial), ('ik_server', served)):
        median, p95 = np.median(values), np.percentile(values, 95)
        print(f'  {name:<16} median {median:7.0f} us   p95 {p95:7.0f} us')
    print(f'  ratio of medians   {np.median(served) / np.median(trivial):.2f} (target <= 1.5)')
    print(
        f'  IK compute inside ik_server: median {np.median(compute):.0f} us, '
        f'p95 {np.percentile(compute, 95):.0f} us (target median <= '
        f'{COMPUTE_TARGET_US.get(args.solver, DEFAULT_COMPUTE_TARGET_US)} us)'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
