"""`iknet-path-bench`: follow random smooth paths on each arm, iknet's `follow_path` beside the
peer libraries warm-started from their previous answer. The paths are FK of smooth random joint
curves (`smooth_joint_paths`), so a jump-free exact answer exists for every waypoint. Figures:
waypoints reached within the tolerance, paths followed to the end, jumps (joint steps above
what follow_path would accept; a continuous joint's steps the short way round, as a controller
turns it), the largest joint step against the generating curve's,
waypoints per second on one thread. Writes path_bench.json, path_bench.md and path_bench.png.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import matplotlib.pyplot as plt
import numpy as np

from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.kinematics.robots import named_chain
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import pose_errors
from iknet_core.output_paths import output_dir
from iknet_core.solvers.path import (
    alternative_paths,
    default_max_step,
    follow_path,
    joint_steps,
    smooth_joint_paths,
    start_solutions,
)
from iknet_core.solvers.path_smoothing import SMOOTHING_PASSES
from iknet_core.solvers.policy import continuous_joints
from iknet_core.solvers.result import Tolerance
from iknet_core.solvers.settings import SolverSettings
from iknet_core.solvers.warm_up import exercise_path
from iknet_train.bench import machine, one_thread, write_report
from iknet_train.cli import HelpFormatter, add_urdf_arguments, urdf_chain_from_args
from iknet_train.peers import PEER_PACKAGES, build_peer, is_installed, offline
from iknet_train.plots import save_figure

REPORT_NAMES = ('path_bench.json', 'path_bench.md', 'path_bench.png')
PATH_PEERS = ('roboticstoolbox', 'ikpy')
# The arms benched unless --chains or --urdf says otherwise: the three.
ARMS = ('omx', 'panda', 'ur5')
# The bound on a followed path's largest joint step, over its generating curve's.
STEP_RATIO_TARGET = 1.5


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-path-bench',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        '--chains', nargs='+', default=None, help=f'arms by name (default: {" ".join(ARMS)})'
    )
    add_urdf_arguments(parser.add_argument_group('an arm from its URDF, in place of --chains'))
    parser.add_argument('--paths', type=int, default=200, help='random paths per arm')
    parser.add_argument('--waypoints', type=int, default=100, help='waypoints per path')
    parser.add_argument(
        '--peer-paths', type=int, default=20, help='of those, how many the (slower) peers run'
    )
    parser.add_argument('--peers', nargs='*', default=list(PATH_PEERS), help='peer libraries')
    parser.add_argument(
        '--alternatives',
        type=int,
        default=8,
        help="also follow each path from this many starts (the curve's own and random-restart "
        'solutions of its first waypoint, start_solutions) and keep the best, as '
        'alternative_paths ranks them (0: do not)',
    )
    parser.add_argument(
        '--tighten',
        action='store_true',
        help='also follow every path with follow_path(..., tighten=True), a row of its own on an '
        'arm with joints to spare',
    )
    parser.add_argument('--position-tolerance', type=float, default=1e-5, help='m')
    parser.add_argument('--orientation-tolerance', type=float, default=1e-4, help='rad')
    parser.add_argument('--seed', type=int, default=0, help='seed of the random paths')
    parser.add_argument('--out', type=output_dir, default='path_bench', help='report directory')
    return parser


@exits_on_interrupt('iknet-path-bench')
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    unknown = sorted(set(args.peers) - set(PATH_PEERS))
    problems = [
        *([f'--paths must be at least 1, got {args.paths}'] if args.paths < 1 else []),
        *([f'--waypoints must be at least 2, got {args.waypoints}'] if args.waypoints < 2 else []),
        *([f'--peer-paths must be >= 0, got {args.peer_paths}'] if args.peer_paths < 0 else []),
        *(
            [f'--alternatives must be >= 0, got {args.alternatives}']
            if args.alternatives < 0
            else []
        ),
        *([f'--peers must be of {PATH_PEERS}, got {unknown}'] if unknown else []),
    ]
    if problems:
        print(f'iknet-path-bench: error: {"; ".join(problems)}', file=sys.stderr)
        return 1
    one_thread()
    try:
        with offline():
            report = run(args)
    except ValueError as error:
        print(f'iknet-path-bench: error: {error}', file=sys.stderr)
        return 1
    write_report(
        args.out, REPORT_NAMES, report, format_markdown(report),
        lambda path: plot_path_bench(path, report),
    )  # fmt: skip
    return 0


def run(args: argparse.Namespace) -> dict:
    tolerance = Tolerance(args.position_tolerance, args.orientation_tolerance)
    settings = SolverSettings(tolerance=tolerance)
    report = {
        'paths': args.paths,
        'waypoints': args.waypoints,
        'seed': args.seed,
        'tolerance': {'position_m': tolerance.position, 'orientation_rad': tolerance.orientation},
        'arms': {},
        'skipped': {},
    }
    peers = [peer for peer in args.peers if is_installed(peer)]
    for peer in sorted(set(args.peers) - set(peers)):
        report['skipped'][peer] = f'{PEER_PACKAGES[peer][1]} is not installed'
    for name, chain in arms_from_args(args).items():
        curves = smooth_joint_paths(chain, args.paths, args.waypoints, args.seed)
        poses = pose_from_joints(chain, curves)
        joints, seconds = follow_with_iknet(chain, curves, poses, settings)
        rate = joints.shape[0] * joints.shape[1] / seconds
        peer_count = min(args.peer_paths, args.paths)
        results = {'iknet follow_path': (joints, rate)}
        if chain.n_joints > settings.task_dimensions:  # what smoothing and the searches change
            rough, seconds = follow_with_iknet(chain, curves, poses, settings, smoothing_passes=0)
            results['iknet follow_path, not smoothed'] = (rough, rough[..., 0].size / seconds)
            if args.tighten:
                tight, seconds = follow_with_iknet(chain, curves, poses, settings, tighten=True)
                results['iknet follow_path, tightened'] = (tight, tight[..., 0].size / seconds)
        elif args.tighten:
            report['skipped'][f'--tighten on {name}'] = (
                f'its {chain.n_joints} joints have none to spare, which tighten searches'
            )
        if args.alternatives:
            best, seconds = follow_alternatives(chain, curves, poses, settings, args.alternatives)
            label = f'iknet best of {args.alternatives} starts'
            results[label] = (best, best.shape[0] * best.shape[1] / seconds)
        if peers and peer_count and peer_count < args.paths:  # the same paths as the peers
            results[f'iknet follow_path, first {peer_count}'] = (joints[:peer_count], rate)
        for peer in peers if peer_count else []:
            contender = build_peer(peer, chain, tolerance)
            peer_joints, seconds = follow_with_peer(
                contender.solve_near, curves[:peer_count], poses[:peer_count]
            )
            results[f'{peer} warm start'] = (peer_joints, peer_joints[..., 0].size / seconds)
        report['arms'][name] = {
            solver: path_metrics(chain, curves, poses, joints, rate, settings)
            for solver, (joints, rate) in results.items()
        }
    report['machine'] = machine()
    return report


def arms_from_args(args: argparse.Namespace) -> dict[str, Chain]:
    """The arms to bench by report name: the --urdf arm (named after its robot, else its file),
    or the --chains (default ARMS)."""
    if args.urdf is not None and args.chains is not None:
        raise ValueError('give --chains or --urdf, not both')
    from_urdf = urdf_chain_from_args(args)
    if from_urdf is None:
        return {name: named_chain(name) for name in args.chains or ARMS}
    return {from_urdf.name or args.urdf.stem: from_urdf}


def follow_with_iknet(
    chain: Chain,
    curves: np.ndarray,
    poses: np.ndarray,
    settings: SolverSettings,
    smoothing_passes: int = SMOOTHING_PASSES,
    tighten: bool = False,
) -> tuple[np.ndarray, float]:
    """Every path through follow_path (smoothing_passes, tighten) from its curve's first
    joints: joints (P, T, n), NaN where a path stopped, and the seconds it took."""
    exercise_path(chain, settings)  # load the kernels first, the searches' too
    started = time.perf_counter()
    joints = np.stack(
        [
            follow_path(
                chain, path, curve[0], settings, smoothing_passes=smoothing_passes, tighten=tighten
            ).joints
            for curve, path in zip(curves, poses, strict=True)
        ]
    )
    return joints, time.perf_counter() - started


def follow_alternatives(
    chain: Chain, curves: np.ndarray, poses: np.ndarray, settings: SolverSettings, count: int
) -> tuple[np.ndarray, float]:
    """Every path from its curve's first joints and count - 1 random-restart solutions of its
    first waypoint, the best of them as alternative_paths ranks them from the curve's first
    joints (as the server does): joints (P, T, n), NaN where the best stopped, and the seconds
    it took (the starts' solutions included)."""
    start_solutions(chain, poses[0, 0], 1, settings)  # load the kernels first
    started = time.perf_counter()
    best = []
    for index, (curve, path) in enumerate(zip(curves, poses, strict=True)):
        others = np.zeros((0, chain.n_joints))
        if count > 1:
            others = start_solutions(
                chain, path[0], count - 1, settings, seed=index, avoid=curve[0]
            )
        starts = np.concatenate([curve[:1], others])
        ranked = alternative_paths(chain, path, starts, settings, origin=curve[0])
        best.append(ranked[0].joints)
    return np.stack(best), time.perf_counter() - started


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
    waypoints_per_s: float,
    settings: SolverSettings,
) -> dict:
    """What a path follower is judged by, over its first P paths: joints (P, T, n), NaN from
    where a path stopped (follow_path stops rather than jump; peers never stop)."""
    count = len(joints)
    curves, poses = curves[:count], poses[:count]
    position_error, orientation_error = pose_errors(chain, joints, poses)
    reached = settings.tolerance.met(position_error, orientation_error)
    stopped = np.isnan(joints).any(-1).any(-1)
    steps = joint_steps(np.nan_to_num(continuous_unwrapped(chain, joints), nan=0.0))  # (P, T - 1)
    tried = ~np.isnan(joints[:, 1:]).any(-1) & ~np.isnan(joints[:, :-1]).any(-1)
    rotations = matrix_from_quaternion(poses[..., 3:])
    bounds = [  # what follow_path would refuse on each path
        default_max_step(chain, positions, turns, settings)
        for positions, turns in zip(poses[..., :3], rotations, strict=True)
    ]
    jumps = (steps > np.array(bounds)[:, None]) & tried
    followed = reached.all(-1) & ~jumps.any(-1)
    generating = joint_steps(curves).max(-1)
    ratios = steps[followed].max(-1) / generating[followed]
    return {
        'paths': count,
        'waypoints_reached': float(reached.mean()),
        'paths_followed': float(followed.mean()),
        'paths_stopped': int(stopped.sum()),
        'jumps': int(jumps.sum()),
        # The bar for a path: followed, with no step above 1.5x its curve's.
        'paths_within_step_target': float((ratios <= STEP_RATIO_TARGET).sum() / count),
        'step_ratio_median': float(np.median(ratios)) if len(ratios) else None,
        'step_ratio_max': float(ratios.max()) if len(ratios) else None,
        'waypoints_per_s': float(waypoints_per_s),
    }


def continuous_unwrapped(chain: Chain, joints: np.ndarray) -> np.ndarray:
    """joints (P, T, n) with each continuous joint unwrapped along its path: a peer's answer
    wrapped into +-pi is the same arm, which a controller turns the short way, not a jump."""
    continuous = continuous_joints(chain)
    if not continuous.any():
        return joints
    joints = joints.copy()
    joints[..., continuous] = np.unwrap(joints[..., continuous], axis=-2)
    return joints


def format_markdown(report: dict) -> str:
    tolerance = report['tolerance']
    lines = [
        '# iknet-path-bench',
        '',
        f'{report["paths"]} random smooth paths of {report["waypoints"]} waypoints per arm '
        f'(seed {report["seed"]}); reached: within {tolerance["position_m"]:g} m and '
        f'{tolerance["orientation_rad"]:g} rad; stopped: paths follow_path ended early rather '
        "than jump (it says where and why); a jump: a joint step above follow_path's default "
        'bound for the path (a continuous joint stepping the short way round); step ratio: '
        'the largest joint step of a followed path over its '
        f"generating curve's; within {STEP_RATIO_TARGET:g}x: followed with a step ratio of at "
        f'most {STEP_RATIO_TARGET:g}. '
        f'One thread; load {report["machine"]["load_average_1min"]:.2f} at the end.',
        '',
        '| arm | solver | paths | waypoints reached | paths followed | stopped | jumps | '
        f'step ratio median | max | within {STEP_RATIO_TARGET:g}x | waypoints/s |',
        '|---|---|---|---|---|---|---|---|---|---|---|',
    ]
    for arm, solvers in report['arms'].items():
        for solver, m in solvers.items():
            median, largest = m['step_ratio_median'], m['step_ratio_max']
            lines.append(
                f'| {arm} | {solver} | {m["paths"]} | {m["waypoints_reached"]:.2%} | '
                f'{m["paths_followed"]:.1%} | {m["paths_stopped"]} | {m["jumps"]} | '
                f'{"-" if median is None else f"{median:.3f}"} | '
                f'{"-" if largest is None else f"{largest:.3f}"} | '
                f'{m["paths_within_step_target"]:.1%} | {m["waypoints_per_s"]:,.0f} |'
            )
    lines += [''] + [f'- skipped {peer}: {why}' for peer, why in report['skipped'].items()]
    return '\n'.join(lines) + '\n'


def plot_path_bench(path: Path, report: dict) -> None:
    """Per arm and solver: share of paths followed, and waypoints per second (log)."""
    labels = [f'{arm}: {solver}' for arm, solvers in report['arms'].items() for solver in solvers]
    metrics = [m for solvers in report['arms'].values() for m in solvers.values()]
    rows = np.arange(len(labels))
    figure, (followed, speed) = plt.subplots(1, 2, figsize=(12, 0.5 * len(labels) + 1.5))
    followed.barh(rows, [100.0 * m['paths_followed'] for m in metrics], color='tab:green')
    followed.set(xlabel='paths followed (%)', xlim=(0, 100), yticks=rows, yticklabels=labels)
    speed.barh(rows, [m['waypoints_per_s'] for m in metrics], color='tab:blue')
    speed.set(xscale='log', xlabel='waypoints per second, one thread', yticks=rows)
    speed.set_yticklabels([])
    for axis in (followed, speed):
        axis.invert_yaxis()
    save_figure(figure, path)


if __name__ == '__main__':
    sys.exit(main())
