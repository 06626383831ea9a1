"""`iknet-sample-bench`: how well a mixture model (`iknet-train --model mixture`) samples the
solutions of a pose: raw accuracy, exact share after refinement, distinct solutions, diversity
against a reference set, and speed.

Per test pose: --samples-per-pose raw samples (errors through FK), each refined by the
Levenberg-Marquardt of the solver stack, then de-duplicated by the branch policy. Diversity: the
MMD (Gaussian kernel on each joint's cos and sin) between the exact refined samples and a reference
set of random-restart solutions of the same pose, on --mmd-poses poses; for an arm with a closed
form (the OM-X), the share of poses whose every closed-form solution inside the limits is among the
samples. Speed: --samples-per-pose samples and refined solutions of one pose on one thread (the
samples drawn by torch and by the compiled sampler, and a single query's too), what
network+refine (SolveIK's max_solutions) returns when asked for as many, and the raw samples of
every pose drawn in batches on --device. Writes sample_bench.json, sample_bench.md
and sample_bench.png (a fan of sampled arms for one pose with its target, and each joint's sampled
density).
"""

from __future__ import annotations

import argparse
import logging
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots or CI
import matplotlib.pyplot as plt
import numpy as np
import torch

from iknet_core.checkpoint import load_checkpoint
from iknet_core.device import DEVICES, resolve_device, synchronize
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain, model_chain_for
from iknet_core.kinematics.fk import joint_frames
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.metrics import (
    SAME_SOLUTION_RAD,
    distinct_solutions,
    pose_errors,
    solution_diversity,
    summary,
)
from iknet_core.networks import MixtureIKNet, angle_features, check_oversampling
from iknet_core.output_paths import output_dir
from iknet_core.resources import TEST_DATA
from iknet_core.solvers.factory import available_solvers, build_solver
from iknet_core.solvers.mixture_kernel import CompiledMixture
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.policy import BranchPolicy, full_turn_joints, joint_bounds
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.result import Solutions, Tolerance
from iknet_core.solvers.settings import SolverSettings
from iknet_train.bench import machine, one_thread, write_report
from iknet_train.cli import (
    HelpFormatter,
    add_chain_arguments,
    add_position_only_argument,
    add_target_arguments,
    chain_from_args,
    target_poses,
)
from iknet_train.plots import save_figure

logger = logging.getLogger(__name__)
REPORT_NAMES = ('sample_bench.json', 'sample_bench.md', 'sample_bench.png')
# Gaussian kernel width of the MMD on (cos, sin) joint features.
MMD_BANDWIDTH = 1.0
# Raw samples drawn per sample() call: bounds the memory of a large --poses x --samples-per-pose.
BATCH_SAMPLES = 100_000
# Poses on which network+refine is asked for --samples-per-pose solutions, one at a time.
SOLVER_POSES = 10


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-sample-bench',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument('--model', type=Path, required=True, help='a mixture checkpoint')
    add_chain_arguments(parser)
    add_target_arguments(parser, TEST_DATA)
    add_position_only_argument(parser)
    parser.add_argument('--poses', type=int, default=1000, help='test poses used, evenly spaced')
    parser.add_argument('--samples-per-pose', type=int, default=1000, help='samples per pose')
    parser.add_argument(
        '--temperature',
        type=float,
        default=None,
        help="scale of the components' stds (default: the model's; lower: more accurate, less "
        'diverse)',
    )
    parser.add_argument(
        '--component-temperature',
        type=float,
        default=None,
        help='sharpens the choice of mixture component: weights ** (1 / it) (default: the '
        "model's; lower: more accurate, less diverse; 0: the heaviest component)",
    )
    parser.add_argument(
        '--oversampling',
        type=float,
        default=None,
        help='draws per sample kept: the likeliest under the model of oversampling times as many '
        "(default: the model's; higher: more accurate, less diverse, slower)",
    )
    parser.add_argument('--position-tolerance', type=float, default=1e-5, help='m')
    parser.add_argument('--orientation-tolerance', type=float, default=1e-4, help='rad')
    parser.add_argument('--mmd-poses', type=int, default=20, help='poses the MMD is measured on')
    parser.add_argument(
        '--reference-solutions', type=int, default=200, help='random-restart solutions per pose'
    )
    parser.add_argument(
        '--compare-model',
        type=Path,
        default=None,
        help='another checkpoint (e.g. a K-head network) whose refined hypotheses get the MMD too',
    )
    parser.add_argument('--seed', type=int, default=0, help='seed of poses and samples')
    parser.add_argument(
        '--device',
        choices=DEVICES,
        default='auto',
        help='where the raw samples of every pose are drawn (auto: CUDA when present); the '
        'one-pose speed is on one CPU thread',
    )
    parser.add_argument(
        '--out', type=output_dir, default='sample_bench', help=f'directory for {REPORT_NAMES}'
    )
    return parser


@exits_on_interrupt('iknet-sample-bench')
def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format='%(message)s')
    args = build_parser().parse_args(argv)
    try:
        report, figure = run(args)
        write_report(args.out, REPORT_NAMES, report, format_markdown(report), figure)
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read or written
        return failed('iknet-sample-bench', error)
    return 0


def run(args: argparse.Namespace) -> tuple[dict, object]:
    """The report, and a function drawing its figure into a path."""
    for flag in ('poses', 'samples_per_pose', 'mmd_poses', 'reference_solutions'):
        if getattr(args, flag) < 1:
            raise ValueError(f'--{flag.replace("_", "-")} must be >= 1')
    resolve_device(args.device)  # a device there is not: refused before the model and data load
    checkpoint = load_checkpoint(args.model)
    model = checkpoint.model
    if not isinstance(model, MixtureIKNet):
        raise ValueError(
            f'{args.model} is a model of type {checkpoint.model_type!r}; sampling needs a mixture '
            'model (iknet-train --model mixture)'
        )
    chain = model_chain_for(chain_from_args(args), checkpoint.chain, args.model)
    compared = None  # loaded now: a model that cannot be compared is refused before the work
    if args.compare_model is not None:
        compared = NetworkProposer(args.compare_model)
        model_chain_for(chain, compared.chain, args.compare_model)
    # sample()'s knobs: the model's own unless a flag sets one.
    draws = {
        knob: getattr(model.config, knob) if getattr(args, knob) is None else getattr(args, knob)
        for knob in ('temperature', 'component_temperature', 'oversampling')
    }
    check_oversampling(draws['oversampling'])
    # A model of positions is judged on positions, whatever the flag says.
    args.position_only = args.position_only or model.config.position_only
    settings = SolverSettings(Tolerance(args.position_tolerance, args.orientation_tolerance))
    if args.position_only:
        settings = settings.position_only()
    one_thread()
    torch.manual_seed(args.seed)
    poses, _, source = target_poses(args, chain, TEST_DATA)
    keep = np.linspace(0, len(poses) - 1, min(args.poses, len(poses))).round().astype(int)
    poses = poses[keep]
    logger.info('measured on %d of them, evenly spaced (--poses)', len(poses))
    count = args.samples_per_pose
    raw, batched = batched_samples(model, poses, count, draws, args)
    targets = np.repeat(poses[:, None], count, 1)
    raw_position, raw_angle = pose_errors(chain, raw, targets)
    refiner = Refiner(chain, settings)
    policy = BranchPolicy(chain, settings)
    joints, exact = refined_solutions(
        refiner, policy, targets.reshape(-1, 7), raw.reshape(-1, chain.n_joints)
    )
    exact = exact.reshape(len(poses), count)
    joints = joints.reshape(len(poses), count, chain.n_joints)
    many = continuum(chain, settings)  # no count of solutions, and de-duplicating is slow
    wraps = full_turn_joints(chain)  # a whole-turn twin is the same arm
    distinct = np.array(
        [
            exact[b].sum() if many else len(distinct_solutions(joints[b][exact[b]], wraps))
            for b in range(len(poses))
        ]
    )
    report = {
        'chain': chain.name,
        'model': str(args.model),
        'position_only': args.position_only,
        **draws,
        'samples_per_pose': count,
        'data': {**source, 'n_poses': len(poses)},
        'tolerance': {
            'position_m': args.position_tolerance,
            'orientation_rad': None if args.position_only else args.orientation_tolerance,
        },
        'machine': machine(),
        'raw_position_error_mm': summary(raw_position * 1000.0),
        # Position-only samples are not asked for an orientation.
        'raw_orientation_error_deg': (
            None if args.position_only else summary(np.degrees(raw_angle))
        ),
        'refined_exact': float(exact.mean()),
        # A continuum (positions, or a redundant arm) has no count of solutions.
        'distinct_solutions_per_pose': None if many else summary(distinct),
        'closed_form_coverage': closed_form_coverage(chain, poses, joints, exact, settings),
        'mmd': mmd_figures(chain, poses, joints, exact, refiner, policy, args, compared),
        'speed': speed(model, Refiner(chain, replace(settings, batch_threads=1)), poses[0],
                       count, draws),
        'solver': solver_figures(args.model, chain, replace(settings, batch_threads=1),
                                 poses[:SOLVER_POSES], count, draws),
        'batched': batched,
    }  # fmt: skip
    fan_pose = int(np.argmax(distinct))  # the most distinct solutions (exact samples)

    def figure(path: Path) -> None:
        found = joints[fan_pose][exact[fan_pose]]
        solutions = found[:64] if many else distinct_solutions(found, wraps)
        plot_fan(path, chain, poses[fan_pose], raw[fan_pose], solutions)

    return report, figure


def continuum(chain: Chain, settings: SolverSettings) -> bool:
    """The solutions of a target form a continuum: more joints than the task constrains."""
    return chain.n_joints > settings.task_dimensions


def refined_solutions(
    refiner: Refiner, policy: BranchPolicy, poses: np.ndarray, seeds: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """seeds (k, n) refined towards poses (k, 7): the joints (k, n), and whether each is exact
    (within the tolerance and the limits). A result past a limit whose whole-turn twin is
    inside is that twin, as the solver stack answers it."""
    refined = refiner.refine(poses[:, :3], matrix_from_quaternion(poses[:, 3:]), seeds)
    joints, _, _ = policy.best_per_pose(
        refined.joints[:, None],
        refined.position_errors[:, None],
        refined.orientation_errors[:, None],
    )
    return joints, refined.converged & policy.within_limits(joints)


def closed_form_coverage(
    chain: Chain, poses: np.ndarray, joints: np.ndarray, exact: np.ndarray, settings
) -> dict | None:
    """For an arm with a closed form, on whole poses: the share of the poses with a closed-form
    solution inside the limits whose every such solution is among the exact samples; None
    otherwise (a position has a continuum of solutions)."""
    if settings.is_position_only or 'analytic' not in available_solvers(chain, None):
        return None
    analytic = build_solver('analytic', chain, settings=settings)
    rotations = matrix_from_quaternion(poses[:, 3:])
    covered = []
    for b in range(len(poses)):
        solutions = analytic.solve(poses[b, :3], rotations[b], max_solutions=16)
        branches = solutions.joints[solutions.meets_tolerance & solutions.within_limits]
        found = joints[b][exact[b]]
        if not len(branches):
            continue  # nothing inside the limits to find
        covered.append(
            all(
                len(found) and (np.abs(found - branch).max(1) < SAME_SOLUTION_RAD).any()
                for branch in branches
            )
        )
    return {
        'poses': len(covered),
        'every_branch_found': float(np.mean(covered)) if covered else None,
    }


def mmd_figures(
    chain: Chain,
    poses: np.ndarray,
    joints: np.ndarray,
    exact: np.ndarray,
    refiner: Refiner,
    policy: BranchPolicy,
    args: argparse.Namespace,
    proposer: NetworkProposer | None,
) -> dict:
    """Mean MMD^2 to random-restart solutions of the exact samples, of the --compare-model's
    (proposer's) refined hypotheses, and of a second random-restart set (the floor a perfect
    sampler would reach)."""
    rng = np.random.default_rng(args.seed)
    low, high = joint_bounds(chain, 'limits')
    picks = np.linspace(0, len(poses) - 1, min(args.mmd_poses, len(poses))).round().astype(int)
    compared = None
    if proposer is not None:
        hypotheses = proposer(poses[picks, :3], matrix_from_quaternion(poses[picks, 3:]))
        per_pose = hypotheses.shape[1]
        compared = refined_solutions(
            refiner,
            policy,
            np.repeat(poses[picks], per_pose, 0),
            hypotheses.reshape(-1, chain.n_joints),
        )
        compared = tuple(a.reshape(len(picks), per_pose, *a.shape[1:]) for a in compared)
    figures: dict[str, list[float]] = {'samples': [], 'compare_model': [], 'reference': []}
    for index, b in enumerate(picks):
        references = []
        for _ in range(2):
            seeds = rng.uniform(low, high, (args.reference_solutions, chain.n_joints))
            solutions, solved = refined_solutions(
                refiner, policy, np.repeat(poses[b : b + 1], len(seeds), 0), seeds
            )
            references.append(solutions[solved])
        samples = joints[b][exact[b]]
        others = None if compared is None else compared[0][index][compared[1][index]]
        # Every figure on the same poses: those where each set has what its estimate needs.
        if min(len(samples), *(len(r) for r in references)) < 2 or (
            others is not None and not len(others)
        ):
            continue
        figures['samples'].append(mmd_squared(samples, references[0]))
        figures['reference'].append(mmd_squared(references[1], references[0]))
        if others is not None:
            figures['compare_model'].append(mmd_squared(others, references[0], a_is_a_set=True))

    def mean(values: list[float]) -> float | None:
        return float(np.mean(values)) if values else None

    return {
        'poses': len(figures['samples']),
        'reference_solutions': args.reference_solutions,
        'kernel': f'Gaussian on (cos, sin) of each joint, bandwidth {MMD_BANDWIDTH}',
        'samples_to_reference': mean(figures['samples']),
        'compare_model': None if compared is None else str(args.compare_model),
        'compare_model_to_reference': mean(figures['compare_model']),
        'reference_to_reference': mean(figures['reference']),
    }


def mmd_squared(a: np.ndarray, b: np.ndarray, a_is_a_set: bool = False) -> float:
    """MMD^2 between joint sets a (k, n) and b (m, n) (rad), unbiased for draws of two
    distributions; a_is_a_set: a is a fixed set (a K-head network's hypotheses), not draws,
    so its own term keeps the diagonal."""
    x, y = (angle_features(torch.as_tensor(s)).numpy() for s in (a, b))

    def kernel(p: np.ndarray, q: np.ndarray) -> np.ndarray:
        squared = (p * p).sum(1)[:, None] + (q * q).sum(1)[None] - 2.0 * p @ q.T
        return np.exp(-squared / (2.0 * MMD_BANDWIDTH**2))

    def within(p: np.ndarray, whole: bool) -> float:
        k = kernel(p, p)
        if whole:
            return float(k.mean())
        return float((k.sum() - np.trace(k)) / (len(p) * (len(p) - 1)))

    return within(x, a_is_a_set) + within(y, False) - 2.0 * float(kernel(x, y).mean())


def batched_samples(
    model: MixtureIKNet,
    poses: np.ndarray,
    count: int,
    draws: dict[str, float],
    args: argparse.Namespace,
) -> tuple[np.ndarray, dict]:
    """count raw samples of each pose (B, count, n) rad, drawn on --device in blocks of about
    BATCH_SAMPLES, and how fast: samples per second over all blocks, transfers included. The
    model is back on the CPU afterwards."""
    device = resolve_device(args.device)
    generator = torch.Generator(device=device).manual_seed(args.seed)
    drawn = math.ceil(draws['oversampling'] * count)  # per pose and sample() call
    blocks = np.array_split(poses, max(1, len(poses) * drawn // BATCH_SAMPLES))
    model.to(device)
    try:
        with torch.inference_mode():
            # Once first: a device's first call loads its kernels and libraries.
            model.sample(
                torch.as_tensor(poses[:1], dtype=torch.float32, device=device), 1, **draws
            )
            synchronize(device)
            started = time.perf_counter()
            raw = np.concatenate(
                [
                    model.sample(torch.as_tensor(block, dtype=torch.float32, device=device),
                                 count, generator=generator, **draws)
                    .double().cpu().numpy()
                    for block in blocks
                ]
            )  # fmt: skip
            elapsed = time.perf_counter() - started
    finally:
        model.to('cpu')
    figures = {
        'device': str(device),
        'threads': torch.get_num_threads() if device.type == 'cpu' else None,
        'samples': raw.shape[0] * count,
        'block_samples': max(len(block) for block in blocks) * count,
        'seconds': elapsed,
        'samples_per_s': raw.shape[0] * count / elapsed,
    }
    return raw, figures


def speed(
    model: MixtureIKNet,
    refiner: Refiner,
    pose: np.ndarray,
    count: int,
    draws: dict[str, float],
) -> dict:
    """Median ms for count samples of one pose in torch, and for count refined ones, on one
    thread; and for count and for a single query's n_hypotheses drawn by the compiled sampler
    (what network+refine draws on the compiled backend up to COMPILED_MAX_SAMPLES) and by torch.
    draws: sample()'s temperatures and oversampling."""
    tensor = torch.as_tensor(pose[None], dtype=torch.float32)
    position = np.repeat(pose[None, :3], count, 0)
    rotation = np.repeat(matrix_from_quaternion(pose[None, 3:]), count, 0)
    compiled = CompiledMixture(model)
    few = model.n_hypotheses
    timers = {
        'sample_ms': lambda: model.sample(tensor, count, **draws)[0].double().numpy(),
        'compiled_sample_ms': lambda: compiled(position[:1], rotation[:1], count, **draws)[0],
        'single_query_sample_ms': lambda: model.sample(tensor, few, **draws),
        'single_query_compiled_sample_ms': lambda: compiled(
            position[:1], rotation[:1], few, **draws
        ),
    }
    times: dict[str, list[float]] = {name: [] for name in (*timers, 'sample_and_refine_ms')}
    with torch.inference_mode():
        for _ in range(7):
            for name, draw in timers.items():
                started = time.perf_counter()
                samples = draw()
                times[name].append(time.perf_counter() - started)
                if name == 'sample_ms':
                    refiner.refine(position, rotation, samples)
                    times['sample_and_refine_ms'].append(time.perf_counter() - started)
    return {
        'samples': count,
        'single_query_samples': few,
        **{name: float(np.median(seconds[1:]) * 1e3) for name, seconds in times.items()},
        'threads': 1,
    }


def solver_figures(
    model_path: Path,
    chain: Chain,
    settings: SolverSettings,
    poses: np.ndarray,
    count: int,
    draws: dict[str, float],
) -> dict:
    """What `max_solutions: count` gets from network+refine with this model (SolveIK,
    iknet-bench --solutions) proposing with draws (sample()'s knobs), one pose at a time on one
    thread: the exact solutions it returns (no two within its duplicate tolerance), those of
    them 0.02 rad apart (metrics.solution_diversity, iknet-bench's figure: a continuum's
    solutions are a curve or a surface, so this saturates), and the median time of a call (each
    pose asked twice, the first call warming up)."""
    proposer = NetworkProposer(model_path, device='cpu')
    proposer.model.config = replace(proposer.model.config, **draws)
    solver = build_solver('network+refine', chain, proposer, settings)
    seconds, returned = [], []

    def solve_timed(position: np.ndarray, rotation: np.ndarray, max_solutions: int) -> Solutions:
        for _ in range(2):
            started = time.perf_counter()
            solutions = solver.solve(position, rotation, max_solutions=max_solutions)
            elapsed = time.perf_counter() - started
        seconds.append(elapsed)
        returned.append(int((solutions.meets_tolerance & solutions.within_limits).sum()))
        return solutions

    rotations = matrix_from_quaternion(poses[:, 3:])
    diversity = solution_diversity(
        solve_timed, poses[:, :3], rotations, count, full_turn_joints(chain)
    )
    return {
        **diversity,
        'returned_exact': summary(np.array(returned)),
        'all_returned': float(np.mean(np.array(returned) == count)),
        'ms_median': float(np.median(seconds) * 1e3),
        'threads': 1,
    }


def format_markdown(report: dict) -> str:
    raw, angle = report['raw_position_error_mm'], report['raw_orientation_error_deg']
    distinct = report['distinct_solutions_per_pose']
    coverage, mmd, speed_ = report['closed_form_coverage'], report['mmd'], report['speed']
    batched, solver = report['batched'], report['solver']
    threads = {None: '', 1: ', one thread'}.get(
        batched['threads'], f', {batched["threads"]} threads'
    )
    tolerance = report['tolerance']['orientation_rad']
    orientation = '' if tolerance is None else f' and {tolerance:g} rad'
    lines = [
        f'# iknet-sample-bench: {report["chain"]}',
        '',
        f'{report["data"]["n_poses"]} poses, {report["samples_per_pose"]} samples each at '
        f'temperature {report["temperature"]:g}, component temperature '
        f'{report["component_temperature"]:g}, oversampling {report["oversampling"]:g} '
        f'({report["model"]}); refined by '
        'Levenberg-Marquardt; exact: within '
        f'{report["tolerance"]["position_m"]:g} m{orientation} inside the limits.',
        '',
        '| figure | value |',
        '|---|---|',
        f'| raw position error mm: mean / median / p95 | {raw["mean"]:.3g} / {raw["median"]:.3g} '
        f'/ {raw["p95"]:.3g} |',
        '| raw orientation error deg: mean / median / p95 | '
        + ('(position only)' if angle is None else
           f'{angle["mean"]:.3g} / {angle["median"]:.3g} / {angle["p95"]:.3g}')
        + ' |',
        f'| refined samples exact | {100 * report["refined_exact"]:.2f} % |',
        '| distinct solutions per pose: median / max | '
        + (
            'a continuum'
            if distinct is None
            else f'{distinct["median"]:g} / {distinct["max"]:g}'
        )
        + ' |',
    ]  # fmt: skip
    if coverage is not None and coverage['every_branch_found'] is not None:
        lines.append(
            f'| every closed-form solution inside the limits found | '
            f'{100 * coverage["every_branch_found"]:.2f} % of {coverage["poses"]} poses |'
        )
    if mmd['samples_to_reference'] is not None:
        lines.append(
            f'| MMD^2 to random-restart solutions ({mmd["poses"]} poses) | '
            f'{mmd["samples_to_reference"]:.3g} (two random-restart sets: '
            f'{mmd["reference_to_reference"]:.3g}) |'
        )
    if mmd['compare_model_to_reference'] is not None:
        lines.append(
            f'| MMD^2 to the same, {mmd["compare_model"]} refined | '
            f'{mmd["compare_model_to_reference"]:.3g} |'
        )
    lines += [
        f'| {speed_["samples"]} samples of one pose, one thread | {speed_["sample_ms"]:.1f} ms '
        f'(compiled: {speed_["compiled_sample_ms"]:.1f} ms) |',
        f'| {speed_["single_query_samples"]} samples of one pose (a single query), one thread | '
        f'{speed_["single_query_sample_ms"]:.2f} ms (compiled: '
        f'{speed_["single_query_compiled_sample_ms"]:.2f} ms) |',
        f'| {speed_["samples"]} refined samples of one pose, one thread | '
        f'{speed_["sample_and_refine_ms"]:.1f} ms |',
        f'| network+refine asked for {solver["asked"]} solutions of one pose, one thread '
        f'({solver["n_poses"]} poses) | {solver["returned_exact"]["mean"]:.1f} exact on '
        f'average (all {solver["asked"]} for {100 * solver["all_returned"]:.0f} % of the poses), '
        f'{solver["distinct_exact"]["mean"]:.1f} of them 0.02 rad apart; '
        f'{solver["ms_median"]:.1f} ms |',
        f'| all {batched["samples"]} raw samples, blocks of {batched["block_samples"]}, on '
        f'{batched["device"]}{threads} | {batched["seconds"] * 1e3:.1f} ms, '
        f'{batched["samples_per_s"]:,.0f} samples/s |',
        '',
    ]
    return '\n'.join(lines)


def plot_fan(
    path: Path, chain: Chain, pose: np.ndarray, raw: np.ndarray, solutions: np.ndarray
) -> None:
    """Left: raw samples (grey) and the distinct exact solutions (blue) of one pose drawn over
    each other, target marked; right: each joint's raw sampled density."""
    figure = plt.figure(figsize=(12, 5))
    arms = figure.add_subplot(1, 2, 1, projection='3d')
    for joints, style in (
        (raw[:64], {'color': 'grey', 'alpha': 0.2}),
        (solutions, {'color': 'tab:blue', 'alpha': 0.8}),
    ):
        if len(joints):
            _, origins, tip, _ = joint_frames(chain, joints)
            for arm in np.stack([*origins, tip], 1):  # (n + 1, 3) points per arm
                arms.plot(*arm.T, linewidth=1.0, **style)
    arms.scatter(*pose[:3], color='tab:red', s=40, label='target')
    arms.set_title(f'{len(solutions)} distinct exact solutions; {min(64, len(raw))} raw samples')
    arms.legend()
    densities = figure.add_subplot(1, 2, 2)
    for j in range(raw.shape[1]):
        densities.hist(
            raw[:, j], bins=80, histtype='step', density=True, label=chain.joint_names[j]
        )
    densities.set_xlabel('joint value (rad; m for a prismatic joint), raw samples')
    densities.set_ylabel('density')
    densities.legend(fontsize='small')
    save_figure(figure, path)


if __name__ == '__main__':
    sys.exit(main())
