"""`iknet-test` / `ros2 run iknet test`: how far from the target the arm ends up, in mm.

Runs a trained model (or another solver: --solver) on recorded poses, measures the end-effector
error of FK(prediction) against each recorded pose, and writes a table, a JSON report and plots.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import accuracy_report, pose_errors, wrapped_difference
from iknet_core.predict import DEVICES, IKPredictor
from iknet_core.resources import TEST_DATA
from iknet_core.solvers.factory import SOLVER_NAMES, build_solver
from iknet_core.solvers.network import NetworkProposer
from iknet_train.cli import add_model_argument, add_recording_arguments, recordings_from_args
from iknet_train.data import Recording
from iknet_train.plots import plot_error_histogram, plot_workspace_error, plot_worst_cases


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-test',
        description=__doc__,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_model_argument(parser)
    add_recording_arguments(parser, TEST_DATA)
    parser.add_argument(
        '--json', type=Path, default=Path('iknet_test.json'), help='JSON report to write'
    )
    parser.add_argument(
        '--plots',
        default='iknet_test_plots',
        help="directory for the plots; '' for none",
    )
    parser.add_argument(
        '--batch-size',
        type=int,
        default=10000,
        help='batch size of the reference IKNet loss figure (the reference test default)',
    )
    parser.add_argument(
        '--timing-queries', type=int, default=1000, help='single queries timed for time_per_query'
    )
    parser.add_argument('--device', choices=DEVICES, default='auto', help='where to run the model')
    parser.add_argument(
        '--solver',
        choices=SOLVER_NAMES,
        default='network',
        help='what answers: the trained network alone, refined, or the closed form (no model)',
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    args = build_parser().parse_args(argv)
    try:
        report = evaluate(args)
    except (ValueError, FileNotFoundError) as error:
        print(f'iknet-test: error: {error}', file=sys.stderr)
        return 1
    print(format_table(report))
    return 0


def test_recordings(args: argparse.Namespace, chain: Chain) -> list[Recording]:
    return recordings_from_args(args, chain, TEST_DATA)


def evaluate(args: argparse.Namespace) -> dict:
    """Accuracy and speed of the model on the test recordings; writes the JSON and plots."""
    about, chain, solve = method_under_test(args)
    recordings = test_recordings(args, chain)
    poses = np.concatenate([r.poses for r in recordings])
    joints = np.concatenate([r.joints for r in recordings])
    predicted = solve(poses)

    report = {
        **about,
        'data': {
            'recordings': [r.source for r in recordings],
            'dropped_poses': sum(r.dropped_poses for r in recordings),
            'dropped_joint_states': sum(r.dropped_joint_states for r in recordings),
        },
        **accuracy_report(chain, predicted, poses, joints),
        'reference_loss': reference_loss(predicted, joints, args.batch_size),
        **timing(solve, poses, args.timing_queries),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=2) + '\n')
    if args.plots:
        plots = Path(args.plots)
        position_error, _ = pose_errors(chain, predicted, poses)
        plots.mkdir(parents=True, exist_ok=True)
        plot_error_histogram(plots / 'error_histogram.png', position_error)
        plot_workspace_error(plots / 'workspace_error.png', poses, position_error)
        plot_worst_cases(
            plots / 'worst_cases.png', chain, poses, joints, predicted, position_error
        )
    return report


PoseSolver = Callable[[np.ndarray], np.ndarray]  # poses (B, 7) -> joints (B, n) rad


def loaded_model(loaded: IKPredictor | NetworkProposer | None) -> dict:
    """The report's model fields for a checkpoint loaded by the predictor or a solver; all None
    for a solver without a network (analytic, refine-from-zero)."""
    if loaded is None:
        return {'model': None, 'model_type': None, 'n_hypotheses': None, 'device': None}
    return {
        'model': str(loaded.model_path),
        'model_type': loaded.model_type,
        'n_hypotheses': int(loaded.model.n_hypotheses),
        'device': str(loaded.device),
    }


def method_under_test(args: argparse.Namespace) -> tuple[dict, Chain, PoseSolver]:
    """What --solver measures: its report header, its chain, and poses -> best joints.

    `network` is the model alone on --device, as training sees it; the other solvers are the
    server's backends, so their figures are what ik_server answers.
    """
    if args.solver == 'network':
        predictor = IKPredictor(args.model, device=args.device)
        return {'solver': args.solver, **loaded_model(predictor)}, predictor.chain, predictor.solve
    solver = build_solver(args.solver, args.model, args.device)
    proposer = getattr(solver, 'proposer', None)
    network = proposer if isinstance(proposer, NetworkProposer) else None
    about = {'solver': args.solver, **loaded_model(network)}

    def solve(poses: np.ndarray) -> np.ndarray:
        rotations = matrix_from_quaternion(poses[:, 3:])
        return solver.solve_batch(poses[:, :3], rotations)[0]

    return about, solver.chain, solve


def reference_loss(predicted: np.ndarray, joints: np.ndarray, batch_size: int) -> float:
    """The reference IKNet's test figure: mean over batches of ||joint error||_2 / batch size.

    Joint errors are wrapped to (-pi, pi], so q1 = 3.29 and -2.99 count as equal.
    """
    error = wrapped_difference(predicted, joints)
    losses = [
        np.linalg.norm(error[start : start + batch_size]) / len(error[start : start + batch_size])
        for start in range(0, len(error), batch_size)
    ]
    return float(np.mean(losses))


def timing(solve: PoseSolver, poses: np.ndarray, n_queries: int) -> dict[str, float]:
    """Median time of one single-pose query (us) and batched throughput (queries/s)."""
    single = poses[np.arange(max(1, n_queries)) % len(poses)]
    for pose in single[:20]:  # warm-up
        solve(pose[None])
    durations = []
    for pose in single:
        started = time.perf_counter()
        solve(pose[None])
        durations.append(time.perf_counter() - started)
    batch = np.resize(poses, (max(len(poses), 10000), 7))
    # torch's CPU kernels for a new batch shape take a while to come up to speed after single
    # queries: warm up for half a second before the clock runs.
    started = time.perf_counter()
    while time.perf_counter() - started < 0.5:
        solve(batch)
    runs, started = 0, time.perf_counter()
    while runs < 3 or time.perf_counter() - started < 1.0:
        solve(batch)
        runs += 1
    elapsed = time.perf_counter() - started
    return {
        'time_per_query_us': float(np.median(durations) * 1e6),
        'queries_per_s': float(runs * len(batch) / elapsed),
    }


def format_table(report: dict) -> str:
    """The report as a plain-text table for the terminal."""
    keys = ('mean', 'median', 'p95', 'p99', 'max')
    model = (
        f' with {report["model"]} ({report["model_type"]}, {report["n_hypotheses"]} hypotheses)'
        if report['model']
        else ''
    )
    lines = [
        f'solver {report["solver"]}{model} on {report["n_samples"]} samples',
        f'{"":24}' + ''.join(f'{k:>10}' for k in keys),
    ]
    for label, key in (
        ('position error (mm)', 'position_error_mm'),
        ('orientation error (deg)', 'orientation_error_deg'),
    ):
        lines.append(f'{label:24}' + ''.join(f'{report[key][k]:10.3f}' for k in keys))
    for name, values in report.get('joint_error_rad', {}).items():
        lines.append(f'{name + " error (rad)":24}' + ''.join(f'{values[k]:10.4f}' for k in keys))
    within = ', '.join(f'{100 * v:.1f} % within {k} mm' for k, v in report['within_mm'].items())
    lines += [
        within,
        f'single query {report["time_per_query_us"]:.0f} us, batched '
        f'{report["queries_per_s"]:.0f} queries/s',
        f'reference IKNet loss figure: {report["reference_loss"]:.6f}',
    ]
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
