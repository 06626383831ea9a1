"""`iknet-path-bench`: follow random smooth paths on each arm, iknet's `follow_path` beside the
peer libraries warm-started from their previous answer. The paths are FK of smooth random joint
curves (`smooth_joint_paths`), so a jump-free exact answer exists for every waypoint. Figures:
waypoints reached within the tolerance, paths followed to the end, jumps (joint steps above
MIN_MAX_STEP), the largest joint step against the generating curve's, waypoints per second on
one thread. Writes path_bench.json and path_bench.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.kinematics.robots import named_chain
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import pose_errors
from iknet_core.solvers.path import MIN_MAX_STEP, follow_path, smooth_joint_paths
from iknet_core.solvers.result import Tolerance
from iknet_core.solvers.settings import SolverSettings
from iknet_train.bench import machine, one_thread
from iknet_train.peers import PEER_PACKAGES, build_peer, is_installed, offline

REPORT_NAMES = ('path_bench.json', 'path_bench.md')
PATH_PEERS = ('roboticstoolbox', 'ikpy')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-path-bench',
        description=__doc__.splitlines()[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        '--chains', nargs='+', default=['omx', 'panda', 'ur5'], help='arms by name'
    )
    parser.add_argument('--paths', type=int, default=200, help='random paths per arm')
    parser.add_argument('--waypoints', type=int, default=100, help='waypoints per path')
    parser.add_argument(
        '--peer-paths', type=int, default=20, help='of those, how many the (slower) peers run'
    )
    parser.add_argument('--peers', nargs='*', default=list(PATH_PEERS), help='peer libraries')
    parser.add_argument('--position-tolerance', type=float, default=1e-5, help='m')
    parser.add_argument('--orientation-tolerance', type=float, default=1e-4, help='rad')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random paths')
    parser.add_argument('--out', type=Path, default=Path('path_bench'), help='report directory')
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ('paths', 'waypoints'):
        if getattr(args, name) < 1:
            print(f'iknet-path-bench: error: --{name} must be at least 1', file=sys.stderr)
            return 1
    unknown = sorted(set(args.peers) - set(PATH_PEERS))
    if unknown:
        print(f'iknet-path-bench: error: peers must be of {PATH_PEERS}, got {unknown}')
        return 1
    one_thread()
    try:
        with offline():
            report = run(args)
    except ValueError as error:
        print(f'iknet-path-bench: error: {error}', file=sys.stderr)
        return 1
    markdown = format_markdown(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / 'path_bench.json').write_text(json.dumps(report, indent=2) + '\n')
    (args.out / 'path_bench.md').write_text(markdown)
    print(markdown)
    print(f'wrote {", ".join(str(args.out / name) for name in REPORT_NAMES)}')
    return 0


def run(args: argparse.Namespace) -> dict:
    tolerance = Tolerance(args.position_tolerance, args.orientation_tolerance)
    settings = SolverSettings(tolerance=tolerance)
    report = {'paths': args.paths, 'waypoints': args.waypoints, 'seed': args.seed}
    report |= {
        'tolerance': {'position_m': tolerance.position, 'orientation_rad': tolerance.orientation}
    }
    report['arms'], report['skipped'] = {}, {}
    peers = [peer for peer in args.peers if is_installed(peer)]
    for peer in sorted(set(args.peers) - set(peers)):
        report['skipped'][peer] = f'{PEER_PACKAGES[peer][1]} is not installed'
    for name in args.chains:
        chain = named_chain(name)
        curves = smooth_joint_paths(chain, args.paths, args.waypoints, args.seed)
        poses = pose_from_joints(chain, curves)
        results = {'iknet follow_path': follow_with_iknet(chain, curves, poses, settings)}
        peer_count = min(args.peer_paths, args.paths)
        for peer in peers:
            contender = build_peer(peer, chain, tolerance)
            results[f'{peer} warm start'] = follow_with_peer(
                contender.solve_near, curves[:peer_count], poses[:peer_count]
            )
        report['arms'][name] = {
            solver: path_metrics(chain, curves[: len(joints)], poses, joints, seconds, tolerance)
            for solver, (joints, seconds) in results.items()
        }
    report['machine'] = machine()
    return report


def follow_with_iknet(
    chain: Chain, curves: np.ndarray, poses: np.ndarray, settings: SolverSettings
) -> tuple[np.ndarray, float]:
    """Every path through follow_path from its curve's first joints: joints (P, T, n), NaN
    where a path stopped, and the seconds it took."""
    follow_path(chain, poses[0], curves[0, 0], settings)  # load the kernels first
    started = time.perf_counter()
    joints = np.stack(
        [
            follow_path(chain, path, curve[0], settings).joints
            for curve, path in zip(curves, poses, strict=True)
        ]
    )
    return joints, time.perf_counter() - started


def follow_with_peer(
    solve_near, curves: np.ndarray, poses: np.ndarray
) -> tuple[np.ndarray, float]:
    """Each waypoint solved from the previous answer (the first from the curve's start)."""
    positions, rotations = poses[..., :3], matrix_from_quaternion(poses[..., 3:])
    joints = np.empty(curves.shape)
    started = time.perf_counter()
    for p, curve in enumerate(curves):
        previous = curve[0]
        for t in range(curve.shape[0]):
            previous = joints[p, t] = solve_near(positions[p, t], rotations[p, t], previous)
    return joints, time.perf_counter() - started


def path_metrics(
    chain: Chain,
    curves: np.ndarray,
    poses: np.ndarray,
    joints: np.ndarray,
    seconds: float,
    tolerance: Tolerance,
) -> dict:
    """What a path follower is judged by, over paths (P, T, n) with NaN where it stopped."""
    count = len(joints)
    position_error, orientation_error = pose_errors(chain, joints, poses[:count])
    reached = tolerance.met(position_error, orientation_error)
    steps = np.abs(np.diff(joints, axis=1)).max(-1)  # (P, T - 1), NaN after a stop
    jumps = np.nan_to_num(steps, nan=0.0) > MIN_MAX_STEP
    followed = reached.all(-1) & ~jumps.any(-1)
    generating = np.abs(np.diff(curves, axis=1)).max(-1).max(-1)
    ratios = np.nanmax(steps, -1)[followed] / generating[followed]
    return {
        'paths': count,
        'waypoints_reached': float(reached.mean()),
        'paths_followed': float(followed.mean()),
        'jumps': int(jumps.sum()),
        'step_ratio_median': float(np.median(ratios)) if len(ratios) else None,
        'step_ratio_max': float(ratios.max()) if len(ratios) else None,
        'waypoints_per_s': joints.shape[0] * joints.shape[1] / seconds,
    }


def format_markdown(report: dict) -> str:
    tolerance = report['tolerance']
    lines = [
        '# iknet-path-bench',
        '',
        f'{report["paths"]} random smooth paths of {report["waypoints"]} waypoints per arm '
        f'(seed {report["seed"]}); reached: within {tolerance["position_m"]:g} m and '
        f'{tolerance["orientation_rad"]:g} rad; a jump: a joint step above {MIN_MAX_STEP} rad; '
        "step ratio: the largest joint step of a followed path over its generating curve's. "
        f'One thread; load {report["machine"]["load_average_1min"]} at the end.',
        '',
        '| arm | solver | paths | waypoints reached | paths followed | jumps | step ratio '
        'median | max | waypoints/s |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for arm, solvers in report['arms'].items():
        for solver, m in solvers.items():
            median, largest = m['step_ratio_median'], m['step_ratio_max']
            lines.append(
                f'| {arm} | {solver} | {m["paths"]} | {m["waypoints_reached"]:.2%} | '
                f'{m["paths_followed"]:.1%} | {m["jumps"]} | '
                f'{"-" if median is None else f"{median:.3f}"} | '
                f'{"-" if largest is None else f"{largest:.3f}"} | {m["waypoints_per_s"]:,.0f} |'
            )
    lines += [''] + [f'- skipped {peer}: {why}' for peer, why in report['skipped'].items()]
    return '\n'.join(lines) + '\n'


if __name__ == '__main__':
    sys.exit(main())
