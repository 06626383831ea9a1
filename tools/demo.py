"""The main job, end to end: the model, its test in millimetres, then IK through the real service
moving the simulated OM-X, printing for each target the joints and where the arm ended up."""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import rclpy
from domain_coordinator import domain_id
from open_manipulator_msgs.msg import KinematicsPose
from open_manipulator_msgs.srv import SetKinematicsPose
from rclpy.executors import SingleThreadedExecutor

from iknet.srv import SolveIK
from iknet_core.csv_schema import KINEMATICS_POSE_FILE, POSE_COLUMNS
from iknet_core.resources import DEFAULT_MODEL, TEST_DATA, installed_executable, shipped
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.server_processes import ProcessGroup, Server, wait_until_up
from iknet_ros.service_calls import READY_TIMEOUT_S, call_with_resend, spin_until

ROOT = Path(__file__).resolve().parent.parent


def step(text: str) -> None:
    print(f'\n=== {text}', flush=True)


def run(command: list[str]) -> None:
    print('$', ' '.join(command), flush=True)
    subprocess.run(command, check=True)


def demo_targets(count: int) -> np.ndarray:
    """Poses spread over the shipped test recording: (count, 7)."""
    import pandas as pd

    poses = pd.read_csv(shipped(TEST_DATA) / KINEMATICS_POSE_FILE)[list(POSE_COLUMNS)]
    return poses.to_numpy()[np.linspace(0, len(poses) - 1, count + 2).astype(int)[1:-1]]


def call(executor, client, request, resend_after_s: float, timeout_s: float = 20.0):
    answer = call_with_resend(executor, client, request, timeout_s, resend_after_s)
    if not answer.found:
        raise SystemExit(f'{client.srv_name} did not come up; see the logs in runs/demo')
    if answer.response is None:
        raise SystemExit(f'{client.srv_name} did not answer')
    return answer.response


def drive_arm(targets: np.ndarray, path_time: float, servers: list[Server]) -> None:
    rclpy.init()
    node = rclpy.create_node('iknet_demo')
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    latest: list[KinematicsPose] = []
    node.create_subscription(KinematicsPose, '/kinematics_pose', latest.append, 10)
    solve = node.create_client(SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS)
    move = node.create_client(SetKinematicsPose, '/ik_server/goal_task_space_path')
    # A first start after an install compiles the solver kernels: wait on readiness, not a clock.
    print(
        f'waiting for the simulator and /ik_server (at most {READY_TIMEOUT_S:.0f} s)', flush=True
    )
    # Ends at once, with its last lines, where the simulator or the server exits first.
    wait_until_up(
        executor,
        lambda: bool(latest) and solve.service_is_ready(),
        servers,
        READY_TIMEOUT_S,
        "the simulator's /kinematics_pose and /ik_server/solve_ik (logs in runs/demo)",
    )
    header = (
        f'{"target x, y, z (mm)":>24} | {"joints (rad)":>34} | {"arm reached (mm)":>24} | err mm'
    )
    print(header)
    try:
        for pose in targets:
            request = SolveIK.Request(max_solutions=1, refine=True)
            p, o = request.target.pose.position, request.target.pose.orientation
            p.x, p.y, p.z = pose[:3]
            o.x, o.y, o.z, o.w = pose[3:]
            answer = call(executor, solve, request, resend_after_s=1.0)
            goal = SetKinematicsPose.Request(path_time=path_time)
            goal.kinematics_pose.pose = request.target.pose
            # Resent only after the server's own two controller attempts (2 s each).
            planned = call(executor, move, goal, resend_after_s=5.0).is_planned
            spin_until(executor, lambda: False, path_time + 0.5)  # let the arm arrive
            reached = latest[-1].pose.position
            reached = np.array([reached.x, reached.y, reached.z])
            joints = answer.solutions[0].position if answer.solutions else []
            print(
                f'{np.array2string(pose[:3] * 1e3, precision=1):>24} | '
                f'{np.array2string(np.asarray(joints), precision=3):>34} | '
                f'{np.array2string(reached * 1e3, precision=1):>24} | '
                f'{np.linalg.norm(reached - pose[:3]) * 1e3:.3f}'
                f'{"" if planned else "  (move refused)"}',
                flush=True,
            )
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--train', action='store_true', help='train a model first (minutes)')
    parser.add_argument('--poses', type=int, default=5, help='how many targets to drive to')
    parser.add_argument('--path-time', type=float, default=1.5, help='seconds per move')
    args = parser.parse_args()
    out = ROOT / 'runs' / 'demo'
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as domain:
        if 'ROS_DOMAIN_ID' not in os.environ:
            os.environ['ROS_DOMAIN_ID'] = str(domain.enter_context(domain_id()))
        return run_demo(args, out)


def run_demo(args: argparse.Namespace, out: Path) -> int:
    step('1/4 model')
    model = shipped(DEFAULT_MODEL)
    if args.train:
        model = out / 'model.pt'
        run(
            [
                'iknet-train',
                '--out',
                str(out / 'train'),
                '--save-model',
                str(model),
                '--no-progress',
            ]
        )
    print(f'model: {model}')

    step('2/4 test on the shipped test recording (FK of the prediction against the pose)')
    run(['iknet-test', '--model', str(model), '--json', str(out / 'test.json'),
         '--plots', str(out / 'plots')])  # fmt: skip

    step('3/4 simulated OM-X controller + IK server (real processes over DDS)')
    with ProcessGroup() as nodes:
        # Without --train the server loads the shipped models (a small one seeds refinement).
        server = ('ik_server', '-p', f'model_path:={model}') if args.train else ('ik_server',)
        servers = []
        for name, *ros_args in (('omx_sim',), server):
            command = [installed_executable(name), '--ros-args', *ros_args]
            log = out / f'{name}.log'
            print('$', *command, f'> {log}', flush=True)
            servers.append(Server(name, nodes.start(*command, log=log), log))
        step(f'4/4 {args.poses} poses from the test recording through /ik_server')
        drive_arm(demo_targets(args.poses), args.path_time, servers)
    return 0


if __name__ == '__main__':
    sys.exit(main())
