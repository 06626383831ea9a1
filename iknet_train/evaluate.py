"""`iknet-test` / `ros2 run iknet test`: how far from the target the arm ends up, in mm.

Runs a trained model (or another solver: --solver) on recorded poses (for an arm without
recordings: poses of joints drawn uniformly in its limits), measures the end-effector error of
FK(prediction) against each target pose, and writes a table, a JSON report and plots.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Sequence

import numpy as np

from iknet_core.device import DEVICES
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import OMX_CHAIN, model_chain_for
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import (
    accuracy_report,
    pose_errors,
    solution_diversity,
    wrapped_difference,
)
from iknet_core.output_paths import optional_output_dir, output_file, written_together
from iknet_core.resources import TEST_DATA
from iknet_core.solvers.base import Solver
from iknet_core.solvers.factory import SOLVER_NAMES, build_solver
from iknet_core.solvers.network import NetworkProposer, load_networks
from iknet_core.solvers.policy import full_turn_joints
from iknet_core.solvers.settings import DEFAULT_SETTINGS
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
from iknet_train.plots import plot_error_histogram, plot_workspace_error, plot_worst_cases
from iknet_train.timing import time_solver


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-test',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    add_model_argument(parser)
    add_chain_arguments(parser)
    add_target_arguments(parser, TEST_DATA)
    add_position_only_argument(parser)
    add_solutions_arguments(parser)
    parser.add_argument('--seed', type=int, default=0, help='seed of the sampled poses')
    parser.add_argument(
        '--json', type=output_file, default='iknet_test.json', help='JSON report to write'
    )
    parser.add_argument(
        '--plots',
        type=optional_output_dir,
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


@exits_on_interrupt('iknet-test')
def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    args = build_parser().parse_args(argv)
    try:
        report = evaluate(args)
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
        return failed('iknet-test', error)
    print(format_table(report))
    plots = '' if args.plots is None else f' and the plots in {args.plots}'
    print(f'wrote {args.json}{plots}')
    return 0


def evaluate(args: argparse.Namespace) -> dict:
    """Accuracy and speed of the model on the test poses; writes the JSON and plots."""
    for flag in ('timing_queries', 'batch_size'):
        if getattr(args, flag) < 1:
            raise ValueError(f'--{flag.replace("_", "-")} must be >= 1, got {getattr(args, flag)}')
    about, solver = method_under_test(args)
    chain = solver.chain
    poses, joints, source = target_poses(args, chain, TEST_DATA)
    diverse = solutions_subset(args, len(poses))  # bad --solutions values fail before solving
    positions, rotations = poses[:, :3], matrix_from_quaternion(poses[:, 3:])
    _, timing = time_solver(
        solver.solve,
        lambda positions, rotations: solver.solve_batch(positions, rotations)[0],
        positions,
        rotations,
        single_queries=args.timing_queries,
    )
    # Answers one pose at a time, as ik_server gives them (the batch path may keep another
    # solution of equal error where several meet the tolerance).
    predicted = np.array(
        [solver.solve(p, r).joints[0] for p, r in zip(positions, rotations, strict=True)]
    )

    report = {
        **about,
        'chain': chain.name,
        'joint_names': list(chain.joint_names),
        'data': source,
        **accuracy_report(chain, predicted, poses, joints),
        'reference_loss': reference_loss(predicted, joints, args.batch_size),
        'time_per_query_us': timing['single_query_median_us'],
        'queries_per_s': timing['batch_solutions_per_s'],
    }
    if args.solutions:
        report['diversity'] = solution_diversity(
            solver.solve,
            positions[diverse],
            rotations[diverse],
            args.solutions,
            full_turn_joints(chain),
        )
    # The report and the plots all together, or (interrupted) none of them.
    with contextlib.ExitStack() as outputs:
        report_folder = outputs.enter_context(written_together(args.json.parent))
        (report_folder / args.json.name).write_text(json.dumps(report, indent=2) + '\n')
        if args.plots is not None:  # optional_output_dir: None for ''
            plots = outputs.enter_context(written_together(args.plots))
            position_error, _ = pose_errors(chain, predicted, poses)
            plot_error_histogram(plots / 'error_histogram.png', position_error)
            plot_workspace_error(plots / 'workspace_error.png', poses, position_error)
            plot_worst_cases(
                plots / 'worst_cases.png', chain, poses, joints, predicted, position_error
            )
    return report


def loaded_model(network: NetworkProposer | None) -> dict:
    """The report's model fields; all None for a solver without a network (analytic,
    refine-from-zero)."""
    if network is None:
        return {'model': None, 'model_type': None, 'n_hypotheses': None, 'device': None}
    return {
        'model': str(network.model_path),
        'model_type': network.model_type,
        'n_hypotheses': int(network.model.n_hypotheses),
        'device': str(network.device),
    }


def method_under_test(args: argparse.Namespace) -> tuple[dict, Solver]:
    """What --solver measures, built as ik_server builds it (`build_solver`), and its report
    header: its figures are what the server answers."""
    asked = arm_from_args(args)
    network = load_networks(args.model, [args.solver], args.device).get(args.solver)
    if network is not None:
        try:
            chain = model_chain_for(asked, network.chain, network.model_path)
        except ValueError as error:
            if args.model is not None:
                raise
            raise ValueError(
                f'{error}; for another arm give its --model, or --solver refine-from-zero'
            ) from None
    else:
        chain = asked or OMX_CHAIN
    settings = DEFAULT_SETTINGS.position_only() if args.position_only else DEFAULT_SETTINGS
    solver = build_solver(args.solver, chain, network, settings)
    about = {'solver': args.solver, 'position_only': args.position_only}
    return {**about, **loaded_model(network)}, solver


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


def format_table(report: dict) -> str:
    """The report as a plain-text table for the terminal."""
    keys = ('mean', 'median', 'p95', 'p99', 'max')
    model = (
        f' with {report["model"]} ({report["model_type"]}, {report["n_hypotheses"]} hypotheses)'
        if report['model']
        else ''
    )
    rows = [
        (label, report[key], 3)
        for label, key in (
            ('position error (mm)', 'position_error_mm'),
            ('orientation error (deg)', 'orientation_error_deg'),
        )
    ]
    # Each joint in the chain's order (the JSON keeps turns in rad and slides in m apart).
    joints = {
        name: (f'{name} error ({unit})', values)
        for key, unit in (('joint_error_rad', 'rad'), ('joint_error_m', 'm'))
        for name, values in report.get(key, {}).items()
    }
    rows += [(*joints[name], 4) for name in report.get('joint_names', joints) if name in joints]
    width = max(24, *(len(label) + 2 for label, _, _ in rows))
    # Wide enough for the widest figure, so a wild one (data in mm, not m) stays apart.
    column = max(10, *(len(f'{values[k]:.{d}f}') + 2 for _, values, d in rows for k in keys))
    lines = [
        f'solver {report["solver"]}{model} on {report["n_samples"]} samples',
        f'{"":{width}}' + ''.join(f'{k:>{column}}' for k in keys),
    ]
    for label, values, digits in rows:
        lines.append(f'{label:{width}}' + ''.join(f'{values[k]:{column}.{digits}f}' for k in keys))
    within = ', '.join(f'{100 * v:.1f} % within {k} mm' for k, v in report['within_mm'].items())
    lines += [
        within,
        f'single query {report["time_per_query_us"]:.0f} us, batched '
        f'{report["queries_per_s"]:.0f} queries/s',
        f'reference IKNet loss figure: {report["reference_loss"]:.6f}',
    ]
    if 'diversity' in report:
        diversity = report['diversity']
        counts = diversity['distinct_exact']
        lines.append(
            f'distinct exact solutions per pose ({diversity["asked"]} asked for, '
            f'{diversity["n_poses"]} poses): mean {counts["mean"]:.2f}, median '
            f'{counts["median"]:g}, max {counts["max"]:g}; {100 * diversity["several"]:.1f} % '
            'of poses have 2 or more'
        )
    return '\n'.join(lines)


if __name__ == '__main__':
    sys.exit(main())
