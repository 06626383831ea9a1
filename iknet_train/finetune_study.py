"""`iknet-finetune-study`: does a model of arm A, fine-tuned on a few samples of an arm B whose
links differ by up to --scale, come near a model trained on many samples of B?

The "Neural Inverse Kinematics" paper's experiment: B's link lengths are A's scaled by factors
uniform in [1 - scale, 1 + scale]. Every model is trained by iknet-train (B as a URDF written by
the project's own chain tool) and judged by the network alone (its best hypothesis, no
refinement) on B's test poses: position error in mm through B's FK.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import matplotlib.pyplot as plt
import numpy as np

from iknet_core.checkpoint import load_checkpoint
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain, model_chain_for
from iknet_core.kinematics.transforms import matrix_from_quaternion
from iknet_core.kinematics.urdf import chain_to_urdf
from iknet_core.metrics import pose_errors, summary
from iknet_core.output_paths import output_dir, written_together
from iknet_core.solvers.network import NetworkProposer
from iknet_train.cli import HelpFormatter, add_chain_arguments, chain_from_args
from iknet_train.plots import save_figure
from iknet_train.synthetic import default_ranges, synthetic_samples
from iknet_train.train import main as train_main
from iknet_train.train import overridden_flags

logger = logging.getLogger(__name__)
TEST_SEED = 12_345


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='iknet-finetune-study',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument('--base-model', type=Path, required=True, help="arm A's model")
    add_chain_arguments(parser)
    parser.add_argument('--scale', type=float, default=0.2, help='largest link length change')
    parser.add_argument(
        '--counts', type=int, nargs='+', default=[100, 300, 1000, 3000, 10000],
        help="B's samples for the fine-tuned and from-scratch models",
    )  # fmt: skip
    parser.add_argument(
        '--compare-at', type=int, default=1000, help='the count the four headline figures use'
    )
    parser.add_argument(
        '--reference', type=int, default=100_000, help="samples of B's reference model"
    )
    parser.add_argument('--test-poses', type=int, default=2000, help="B's test poses")
    parser.add_argument('--seed', type=int, default=0, help="seeds B's links and the samples")
    parser.add_argument(
        '--train-flags', default='', help='extra iknet-train flags for every run (e.g. --epochs 5)'
    )
    parser.add_argument('--out', type=output_dir, default='finetune_study', help='output folder')
    return parser


def perturbed_chain(chain: Chain, scale: float, seed: int) -> Chain:
    """chain with every link (joint origin and tip offset) scaled by a factor in [1 +- scale]."""
    rng = np.random.default_rng(seed)

    def scaled(xyz: tuple[float, float, float]) -> tuple[float, float, float]:
        x, y, z = np.asarray(xyz) * rng.uniform(1.0 - scale, 1.0 + scale)
        return float(x), float(y), float(z)

    joints = tuple(replace(joint, origin_xyz=scaled(joint.origin_xyz)) for joint in chain.joints)
    return replace(
        chain, name=f'{chain.name}_perturbed', joints=joints, tip_xyz=scaled(chain.tip_xyz)
    )


def network_error_mm(model: Path, chain: Chain, poses: np.ndarray) -> dict[str, float]:
    """The network's best hypothesis per pose, through chain's FK: position error summary mm."""
    proposer = NetworkProposer(model, 'cpu', 'torch')
    hypotheses = proposer(poses[:, :3], matrix_from_quaternion(poses[:, 3:]))  # (B, K, n)
    repeated = np.repeat(poses[:, None], hypotheses.shape[1], 1)
    position_error, _ = pose_errors(chain, hypotheses, repeated)
    return summary(position_error.min(1) * 1000.0)


# What the study sets in each iknet-train run (argparse's names): --train-flags may not set
# them, or every run would train on what they say while the report says otherwise.
STUDY_SETS = (
    'urdf', 'base', 'tip', 'chain', 'data', 'synthetic', 'synthetic_ranges', 'seed',
    'save_model', 'out', 'batch_size', 'init_from',
)  # fmt: skip


def check_train_flags(train_flags: list[str], study_argv: list[str]) -> None:
    """ValueError naming the flags of train_flags that set what the study sets (study_argv, a
    run's own flags): argparse resolves them, abbreviations included."""
    clash, _ = overridden_flags(study_argv, train_flags, STUDY_SETS)
    if clash:
        raise ValueError(
            f'--train-flags sets {", ".join(clash)}, which the study sets for each run (its arm, '
            'samples, seeds and outputs): leave it out'
        )


def run(args: argparse.Namespace) -> dict:
    base = load_checkpoint(args.base_model)
    # A's model must be of the arm asked for: B is A with its links changed.
    arm_a = model_chain_for(chain_from_args(args), base.chain, args.base_model)
    arm_b = perturbed_chain(arm_a, args.scale, args.seed)
    urdf = args.out / 'arm_b.urdf'
    ranges = default_ranges(arm_a)
    pairs = zip(arm_b.joint_names, ranges.tolist(), strict=True)
    range_text = ','.join(f'{name}={low!r}:{high!r}' for name, (low, high) in pairs)
    # Another stream than every training run's --seed: test poses are never training samples.
    test_poses, _ = synthetic_samples(arm_b, args.test_poses, args.seed + TEST_SEED, ranges)

    def run_argv(name: str, samples: int, *flags: str) -> list[str]:
        return [
            '--urdf', str(urdf), '--base', arm_b.base_frame, '--tip', arm_b.tip_frame,
            '--data', '--synthetic', str(samples), '--synthetic-ranges', range_text,
            '--seed', str(args.seed), '--save-model', str(args.out / f'{name}.pt'),
            '--out', str(args.out / name), '--no-progress', *flags,
        ]  # fmt: skip

    train_flags = shlex.split(args.train_flags)
    check_train_flags(
        train_flags, run_argv('check', 1, '--batch-size', '1', '--init-from', str(args.base_model))
    )
    args.out.mkdir(parents=True, exist_ok=True)
    urdf.write_text(chain_to_urdf(arm_b))

    def trained(name: str, samples: int, *flags: str) -> dict[str, float]:
        model = args.out / f'{name}.pt'
        argv = [*run_argv(name, samples, *flags), *train_flags]
        status = train_main(argv)
        if status > 128:  # a signal ended it: the study ends too, with its status
            raise SystemExit(status)
        if status != 0:
            raise RuntimeError(f'iknet-train failed for {name}: {" ".join(argv)}')
        return network_error_mm(model, arm_b, test_poses)

    counts = sorted(set(args.counts) | {args.compare_at})
    results = {
        'arm_a': arm_a.name,
        'scale': args.scale,
        'test_poses': args.test_poses,
        'a_unchanged': network_error_mm(args.base_model, arm_b, test_poses),
        'fine_tuned': {},
        'from_scratch': {},
    }
    for count in counts:
        # Small sets need small batches for enough steps; the fine-tune defaults already have them.
        batch = str(min(2048, max(32, count // 8)))
        results['from_scratch'][count] = trained(f'scratch_{count}', count, '--batch-size', batch)
        results['fine_tuned'][count] = trained(
            f'fine_tuned_{count}', count, '--init-from', str(args.base_model)
        )
    results['reference'] = {'samples': args.reference, **trained('reference', args.reference)}
    return results


def headline(results: dict, count: int) -> list[tuple[str, float]]:
    """The paper's four figures (median position error, mm)."""
    return [
        ("A's model unchanged", results['a_unchanged']['median']),
        (f'B from scratch on {count:,} samples', results['from_scratch'][count]['median']),
        (f"A's model fine-tuned on {count:,} samples", results['fine_tuned'][count]['median']),
        (
            f'B on {results["reference"]["samples"]:,} samples',
            results['reference']['median'],
        ),
    ]


def plot(path: Path, results: dict) -> None:
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for key, label in (('fine_tuned', "A's model fine-tuned"), ('from_scratch', 'from scratch')):
        counts = sorted(results[key])
        axes.plot(counts, [results[key][c]['median'] for c in counts], 'o-', label=label)
    axes.axhline(results['a_unchanged']['median'], color='grey', ls=':', label="A's unchanged")
    reference = results['reference']
    axes.axhline(
        reference['median'], color='black', ls='--', label=f'B on {reference["samples"]:,}'
    )
    axes.set(xscale='log', yscale='log', xlabel='samples of B', ylabel='median position error mm')
    axes.set_title(f'{results["arm_a"]}: links changed by up to {results["scale"]:.0%}')
    axes.legend()
    save_figure(figure, path, dpi=120)


@exits_on_interrupt('iknet-finetune-study', 'the runs that finished are in --out')
def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format='%(message)s')
    args = build_parser().parse_args(argv)
    try:
        if not 0.0 < args.scale < 1.0:
            raise ValueError(f'--scale must be in (0, 1), got {args.scale}')
        results = run(args)
    except (ValueError, OSError, RuntimeError) as error:
        return failed('iknet-finetune-study', error)
    count = args.compare_at
    rows = headline(results, count)
    width = max(len(label) for label, _ in rows)
    print(f'{results["arm_a"]} -> links changed by up to {args.scale:.0%}; network alone, '
          f'median position error on {args.test_poses} poses of B:')  # fmt: skip
    for label, value in rows:
        print(f'  {label:<{width}}  {value:8.2f} mm')
    ratio = results['fine_tuned'][count]['median'] / results['reference']['median']
    print(f'  fine-tuned / reference: {ratio:.2f} (target <= 1.10)')
    with written_together(args.out) as staging:  # an interrupted study writes neither
        (staging / 'study.json').write_text(json.dumps(results, indent=2) + '\n')
        plot(staging / 'study.png', results)
    print(f'wrote {args.out / "study.json"} and {args.out / "study.png"}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
