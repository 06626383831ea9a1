"""`iknet-bench` / `ros2 run iknet bench`: every IK solver side by side on the same poses.

The poses are recorded ones (the shipped test recording for the OM-X), or for an arm without
recordings FK of joints uniform in its limits (--samples, --seed). Errors are FK(solution)
against each target pose (mm, degrees); "solved" means within the
tolerance with joints the arm can take. Timings run on one thread: the median of single `solve()`
calls, and solutions per second of whole-dataset `solve_batch()` calls. Peer libraries
(`pip install '.[peers]'`) join when installed. Writes bench.json, bench.md and bench.png.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import matplotlib.pyplot as plt
import numpy as np

from iknet_core.device import DEVICES
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import OMX_CHAIN, Chain, model_chain_for
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import (
    SAME_SOLUTION_RAD,
    pose_errors,
    solution_diversity,
    summary,
    within_mm,
)
from iknet_core.output_paths import output_dir, written_together
from iknet_core.resources import TEST_DATA
from iknet_core.solvers.factory import (
    NETWORK_SOLVERS,
    SOLVER_NAMES,
    available_solvers,
    build_solver,
)
from iknet_core.solvers.network import BACKENDS, NetworkProposer, load_networks
from iknet_core.solvers.parallel import available_cores
from iknet_core.solvers.policy import BranchPolicy, full_turn_joints
from iknet_core.solvers.result import DEFAULT_TOLERANCE, Tolerance
from iknet_core.solvers.settings import SolverSettings
from iknet_train.cli import (
    HelpFormatter,
    add_chain_arguments,
    add_model_argument,
    add_position_only_argument,
    add_solutions_arguments,
    add_target_arguments,
    arm_from_args,
    solutions_subset,
    target_poses,
)
from iknet_train.peers import PEER_NAMES, PEER_PACKAGES, Contender, build_peer, offline
from iknet_train.plots import save_figure
from iknet_train.timing import time_solver

ALL_SOLVERS = SOLVER_NAMES + PEER_NAMES
DESCRIPTIONS = {
    'analytic': 'OM-X closed form, every branch ranked by the branch policy',
    'refine-from-zero': 'Levenberg-Marquardt from zero joints (no learned seed), restarting '
    'from joints spread over the range where it stalls',
}
REPORT_NAMES = ('bench.json', 'bench.md', 'bench.png')
ERROR_FLOOR_MM = 1e-14  # float64 FK of the OM-X resolves about 1e-13 mm


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-bench',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        '--solvers',
        nargs='+',
        choices=ALL_SOLVERS,
        default=list(ALL_SOLVERS),
        metavar='NAME',
        help=f'solvers to run, of {", ".join(ALL_SOLVERS)}; peer libraries that are not '
        'installed are skipped with a note',
    )
    add_chain_arguments(parser)
    add_target_arguments(parser, TEST_DATA)
    add_position_only_argument(parser)
    add_model_argument(parser)
    add_solutions_arguments(parser)
    parser.add_argument('--device', choices=DEVICES, default='auto', help='where the network runs')
    parser.add_argument(
        '--backend', choices=BACKENDS, default='compiled', help='how the network runs'
    )
    parser.add_argument(
        '--position-tolerance',
        type=float,
        default=DEFAULT_TOLERANCE.position,
        help='m; a solution within it (and the orientation tolerance) solves the pose',
    )
    parser.add_argument(
        '--orientation-tolerance',
        type=float,
        default=DEFAULT_TOLERANCE.orientation,
        help='rad; a solution within it (and the position tolerance) solves the pose',
    )
    parser.add_argument(
        '--max-poses', type=int, default=None, help='use this many poses, evenly spaced in time'
    )
    parser.add_argument(
        '--single-queries', type=int, default=1000, help='single solve() calls timed per solver'
    )
    parser.add_argument(
        '--time-budget',
        type=float,
        default=10.0,
        help='s; a solver slower than this over --single-queries times fewer (reported)',
    )
    parser.add_argument(
        '--batch-seconds',
        type=float,
        default=1.0,
        help='s; solve_batch over every pose is repeated for this long and the best run kept',
    )
    parser.add_argument(
        '--batch-threads',
        type=int,
        default=1,
        help="threads of iknet's batched solving, network and refinement (0: every core); the "
        'peers and single queries always run on one',
    )
    parser.add_argument(
        '--seed',
        type=int,
        default=0,
        help='seed of sampled poses and of the random retries of pytorch-kinematics '
        '(roboticstoolbox draws its own)',
    )
    parser.add_argument(
        '--out', type=output_dir, default='bench_result', help=f'directory for {REPORT_NAMES}'
    )
    return parser


@exits_on_interrupt('iknet-bench')
def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    args = build_parser().parse_args(argv)
    try:
        # No benchmark sends anything off this machine (ikpy would, on import).
        with offline():
            report, errors = run(args)
        write_report(
            args.out, REPORT_NAMES, report, format_markdown(report),
            lambda path: plot_bench(path, report, errors),
        )  # fmt: skip
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
        return failed('iknet-bench', error)
    return 0


def write_report(
    out: Path, names: tuple[str, str, str], report: dict, markdown: str, plot
) -> None:
    """A benchmark's report as names = (json, markdown, plot) files in out, the markdown also
    printed; plot(path) draws the figure."""
    print(markdown)  # first: the figures are seen even where a file then cannot be written
    json_name, markdown_name, plot_name = names
    with written_together(out) as staging:  # an interrupted bench has written none of them
        (staging / json_name).write_text(json.dumps(report, indent=2) + '\n')
        (staging / markdown_name).write_text(markdown)
        plot(staging / plot_name)
    print(f'wrote {", ".join(str(out / name) for name in names)}')


def one_thread() -> None:
    """Time every solver on one thread, as a single robot process would run it (iknet's batched
    solving alone takes --batch-threads: torch_threads)."""
    import numba
    import torch

    # numba first: launching its OpenMP threading layer resets torch's thread count (seen: 1
    # back to 2 on a 2-core machine), so torch's setting must come after.
    numba.set_num_threads(1)
    torch.set_num_threads(1)


def run(args: argparse.Namespace) -> tuple[dict, dict[str, np.ndarray]]:
    """The report, and each solver's position errors (m) for the plot."""
    if args.max_poses is not None and args.max_poses < 1:
        raise ValueError(f'--max-poses must be >= 1, got {args.max_poses}')
    if args.batch_threads < 0:
        raise ValueError(f'--batch-threads must be >= 0, got {args.batch_threads}')
    if args.single_queries < 1:
        raise ValueError(f'--single-queries must be >= 1, got {args.single_queries}')
    settings = SolverSettings(
        Tolerance(args.position_tolerance, args.orientation_tolerance),
        batch_threads=args.batch_threads or available_cores(),
    )
    one_thread()
    if args.position_only:
        settings = settings.position_only()
    tolerance = settings.tolerance
    names = list(dict.fromkeys(args.solvers))
    asked = arm_from_args(args)
    # Another arm than the OM-X's network solvers need its --model.
    networks = load_networks(args.model, names, args.device, args.backend, arm=asked)
    chain = asked or OMX_CHAIN
    for network in networks.values():
        chain = model_chain_for(asked, network.chain, network.model_path)

    poses, recorded, source = target_poses(args, chain, TEST_DATA)
    if args.max_poses is not None and args.max_poses < len(poses):
        keep = np.linspace(0, len(poses) - 1, args.max_poses).round().astype(int)
        poses, recorded = poses[keep], recorded[keep]
    # Before any solver runs, so bad --solutions values fail first; one subset for every solver.
    diverse_poses = poses[solutions_subset(args, len(poses))]
    diverse_targets = (
        np.ascontiguousarray(diverse_poses[:, :3]),
        matrix_from_quaternion(diverse_poses[:, 3:]),
    )
    policy = BranchPolicy(chain, settings)
    recorded_error, recorded_angle = pose_errors(chain, recorded, poses)
    reachable = tolerance.met(recorded_error, recorded_angle) & policy.within_reach(recorded)

    report = {
        'chain': chain.name,
        'position_only': args.position_only,
        'seed': args.seed,
        'data': {
            **source,
            'n_poses': len(poses),
            'reachable': float(reachable.mean()),
            'recorded_joints_within_limits': float(policy.within_limits(recorded).mean()),
            'recorded_joints_position_error_mm': summary(recorded_error * 1000.0),
        },
        'models': {name: str(network.model_path) for name, network in networks.items()},
        'tolerance': {
            'position_m': tolerance.position,
            # None: any orientation (--position-only); JSON has no infinity.
            'orientation_rad': None if settings.is_position_only else tolerance.orientation,
        },
        'machine': {**machine(), 'batch_threads': settings.batch_threads},
        'solvers': {},
        'skipped': {},
    }
    errors = {}
    for name in names:
        contender = make_contender(name, args, chain, settings, networks.get(name))
        if isinstance(contender, str):
            report['skipped'][name] = contender
            print(f'{name}: skipped, {contender}')
            continue
        print(f'{name}: {contender.description}')
        result, errors[name] = measure(contender, chain, policy, tolerance, poses, reachable, args)
        if args.solutions and name in SOLVER_NAMES:  # the peers give one solution
            result['diversity'] = solution_diversity(
                contender.solve_one, *diverse_targets, args.solutions, full_turn_joints(chain)
            )
        report['solvers'][name] = result
    if not report['solvers']:
        reasons = '; '.join(f'{name}: {why}' for name, why in report['skipped'].items())
        raise ValueError(f'no solver ran ({reasons})')
    return report, errors


def machine() -> dict:
    """Where the figures come from: the load shows when other work shared the cores."""
    return {
        'cpu_count': os.cpu_count(),
        'processor': platform.processor() or platform.machine(),
        'python': platform.python_version(),
        'threads': 1,
        'load_average_1min': os.getloadavg()[0] if hasattr(os, 'getloadavg') else None,
    }


def make_contender(
    name: str,
    args: argparse.Namespace,
    chain: Chain,
    settings: SolverSettings,
    proposer: NetworkProposer | None,
) -> Contender | str:
    """The named solver, or why it is skipped (a peer not installed or failing to build)."""
    tolerance = settings.tolerance
    if name == 'analytic' and name not in available_solvers(chain, proposer):
        return f'not available for chain {chain.name!r}'  # before --position-only's reason
    if settings.is_position_only and name in (*PEER_NAMES, 'analytic'):
        return 'solves whole poses only here (--position-only)'
    if name in PEER_NAMES:
        try:
            return build_peer(name, chain, tolerance, args.seed)
        except ImportError as error:
            return f'not installed ({error}; in the iknet checkout: pip install ".[peers]")'
        except Exception as error:  # a peer that fails to build is reported, not fatal
            return f'{PEER_PACKAGES[name][1]} failed to build: {type(error).__name__}: {error}'
    if name not in available_solvers(chain, proposer):
        if name in NETWORK_SOLVERS:
            return f'no model for chain {chain.name!r} (give --model)'
        return f'not available for chain {chain.name!r}'
    solver = build_solver(name, chain, proposer, settings)
    description = proposer.describe() if name.startswith('network') else DESCRIPTIONS[name]
    if name == 'network+refine':
        description += ', refined by Levenberg-Marquardt'

    def solve_many(positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        with torch_threads(settings.batch_threads):  # the network's batched forward too
            return solver.solve_batch(positions, rotations)[0]

    return Contender(name, description, solver.solve, solve_many)


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch on count threads inside, back to one outside (the peers, single queries)."""
    import torch

    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(1)


def measure(
    contender: Contender,
    chain: Chain,
    policy: BranchPolicy,
    tolerance: Tolerance,
    poses: np.ndarray,
    reachable: np.ndarray,
    args: argparse.Namespace,
) -> tuple[dict, np.ndarray]:
    """Accuracy, success and speed of one solver on every pose; also its position errors (m)."""
    positions = np.ascontiguousarray(poses[:, :3])
    rotations = np.ascontiguousarray(matrix_from_quaternion(poses[:, 3:]))
    joints, timing = time_solver(
        contender.solve_one,
        contender.solve_many,
        positions,
        rotations,
        args.single_queries,
        args.batch_seconds,
        args.time_budget,
    )
    position_error, orientation_error = pose_errors(chain, joints, poses)
    solved = tolerance.met(position_error, orientation_error) & policy.within_reach(joints)
    result = {
        'description': contender.description,
        'position_error_mm': summary(position_error * 1000.0),
        'orientation_error_deg': summary(np.degrees(orientation_error)),
        'within_mm': within_mm(position_error, (1.0, 5.0)),
        'within_limits': float(policy.within_limits(joints).mean()),
        'solved': float(solved.mean()),
        'solved_of_reachable': float(solved[reachable].mean()) if reachable.any() else None,
        **timing,
    }
    return result, position_error


def _number(value: float | None) -> str:
    """Compact text for values from 1e-14 (errors in mm) to 1e7 (solutions/s)."""
    if value is None:
        return '-'
    return f'{value:.3g}' if abs(value) < 1e3 else f'{value:,.0f}'


def _percent(value: float | None) -> str:
    """Two decimals, and 100.00 % only for all: 99.996 % is 99.99 % (the any-arm target is
    99.95 %)."""
    if value is None:
        return '-'
    return f'{100.0 * value if value >= 1.0 else min(100.0 * value, 99.99):.2f} %'


def format_markdown(report: dict) -> str:
    """The report as Markdown: settings, accuracy table, success and speed table, notes."""
    data, tolerance, host = report['data'], report['tolerance'], report['machine']
    origin = (
        f'from {", ".join(data["recordings"])}'
        if data['recordings']
        else f'of joints uniform in the limits (seed {report.get("seed", 0)})'
    )
    lines = [
        f'# iknet-bench: {report["chain"]}',
        '',
        f'{data["n_poses"]} poses {origin}; errors are FK(solution) '
        'against the target pose. Solved: within '
        f'{tolerance["position_m"] * 1e3:g} mm and '
        + (
            'any orientation'
            if tolerance['orientation_rad'] is None
            else f'{tolerance["orientation_rad"]:g} rad'
        )
        + ' with '
        f'joints the arm can take; {_percent(data["reachable"])} of the poses are reachable '
        '(their recorded joints meet that tolerance); the recorded joints are inside the '
        f'software limits for {_percent(data["recorded_joints_within_limits"])}. One thread on a '
        f'{host["cpu_count"]}-core {host["processor"]} machine, load '
        f'{_number(host["load_average_1min"])} at the end of the run'
        + (
            f"; iknet's batched solving on {host['batch_threads']} threads."
            if host.get('batch_threads', 1) > 1
            else '.'
        ),
        '',
        '| solver | position error mm: mean | median | p95 | p99 | max '
        '| orientation error deg: median | p99 | max |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for name, result in report['solvers'].items():
        position, orientation = result['position_error_mm'], result['orientation_error_deg']
        cells = [position[k] for k in ('mean', 'median', 'p95', 'p99', 'max')]
        cells += [orientation[k] for k in ('median', 'p99', 'max')]
        lines.append(f'| {name} | ' + ' | '.join(map(_number, cells)) + ' |')
    lines += [
        '',
        '| solver | within 1 mm | within 5 mm | inside software limits | solved '
        '| solved of reachable | single query median us | batch solutions/s |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for name, result in report['solvers'].items():
        cells = [
            _percent(result['within_mm']['1']),
            _percent(result['within_mm']['5']),
            _percent(result['within_limits']),
            _percent(result['solved']),
            _percent(result['solved_of_reachable']),
            _number(result['single_query_median_us'])
            + ('' if result['single_queries'] > 1 else ' (1 call)'),
            _number(result['batch_solutions_per_s']),
        ]
        lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    diverse = {k: v['diversity'] for k, v in report['solvers'].items() if 'diversity' in v}
    if diverse:
        first = next(iter(diverse.values()))
        lines += [
            '',
            f'Distinct exact solutions per pose, {first["asked"]} asked for, on '
            f'{first["n_poses"]} of the poses (distinct: {SAME_SOLUTION_RAD} rad apart in '
            'some joint):',
            '',
            '| solver | mean | median | max | poses with 2 or more | with none |',
            '|---|---|---|---|---|---|',
        ]
        for name, diversity in diverse.items():
            counts = diversity['distinct_exact']
            cells = [_number(counts['mean']), _number(counts['median']), _number(counts['max'])]
            cells += [_percent(diversity['several']), _percent(diversity['none'])]
            lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
    lines += ['', 'Solvers:', '']
    lines += [f'- {name}: {result["description"]}' for name, result in report['solvers'].items()]
    lines += [f'- {name}: skipped, {reason}' for name, reason in report['skipped'].items()]
    return '\n'.join(lines) + '\n'


def plot_bench(path: Path, report: dict, errors: dict[str, np.ndarray]) -> None:
    """Position error CDF per solver (log mm), single-query median and batched throughput."""
    names = list(report['solvers'])
    figure, (cdf, single, batch) = plt.subplots(
        1, 3, figsize=(16, 4.5), gridspec_kw={'width_ratios': [2, 1, 1]}
    )
    for name in names:
        error_mm = np.sort(np.maximum(errors[name] * 1000.0, ERROR_FLOOR_MM))
        cdf.plot(error_mm, np.arange(1, len(error_mm) + 1) / len(error_mm), label=name)
    cdf.axvline(
        report['tolerance']['position_m'] * 1000.0, color='grey', ls=':', label='tolerance'
    )
    cdf.set(
        xscale='log',
        xlabel=f'position error (mm; below {ERROR_FLOOR_MM:g} drawn at it)',
        ylabel='fraction of poses',
        ylim=(0, 1.01),
    )
    cdf.set_title('Error CDF, FK(solution) vs recorded pose')
    cdf.legend(fontsize=8)
    rows = np.arange(len(names))
    for axis, key, label in (
        (single, 'single_query_median_us', 'single query median (us)'),
        (batch, 'batch_solutions_per_s', 'batched solutions per second'),
    ):
        values = [report['solvers'][name][key] for name in names]
        axis.barh(rows, values, color='tab:blue')
        axis.set(xscale='log', xlabel=label, yticks=rows, yticklabels=names)
        axis.set_xlim(right=max(values) * 30)  # room for the labels
        axis.invert_yaxis()
        for row, value in zip(rows, values, strict=True):
            axis.text(value, row, f' {_number(value)}', va='center', fontsize=8)
    single.set_title('one thread')
    save_figure(figure, path)


if __name__ == '__main__':
    sys.exit(main())
