"""`python -m iknet_train.flow_study`: would a normalizing flow sample IK solutions better than
the mixture model (`iknet-train --model mixture`)?

IKFlow, the best-known public generative IK tool, is a normalizing flow. This study trains one
from a well-kept library (zuko's neural spline flow over the joints, conditioned on the pose
features the networks use) with pytorch-pfn-extras on synthetic data of the arm, then samples
it on test poses (FK of joints uniform in the software limits) and prints the raw samples'
position and orientation errors and the time for 1,000 samples of one pose on one thread,
beside a trained mixture model's on the same poses (--mixture). The flow would earn a place as a
second model family only where it samples more accurately than the mixture in the same time.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib

matplotlib.use('Agg')  # files only; no display on robots and CI

import matplotlib.pyplot as plt
import numpy as np
import torch
from torch import nn

from iknet_core.checkpoint import Checkpoint, load_checkpoint
from iknet_core.entry import failed
from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.robots import named_chain
from iknet_core.metrics import pose_errors, summary
from iknet_core.networks import MixtureIKNet, pose_features
from iknet_core.output_paths import output_dir
from iknet_train.bench import machine, one_thread, write_report
from iknet_train.cli import HelpFormatter
from iknet_train.fit import fit
from iknet_train.plots import save_figure
from iknet_train.synthetic import default_ranges, limit_ranges, synthetic_samples

REPORT_NAMES = ('flow_study.json', 'flow_study.md', 'flow_study.png')
# (poses (B, 7), count) -> (B, count, n) rad: a flow's or a mixture model's raw samples.
Sampler = Callable[[torch.Tensor, int], torch.Tensor]
TEST_SEED = 12_345


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m iknet_train.flow_study',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument('--chain', default='omx', help='a named arm')
    parser.add_argument('--synthetic', type=int, default=200_000, help='training samples')
    parser.add_argument('--epochs', type=int, default=20, help='training epochs')
    parser.add_argument('--transforms', type=int, default=4, help='spline transforms')
    parser.add_argument('--hidden', type=int, default=128, help='hidden units per layer')
    parser.add_argument('--poses', type=int, default=1000, help='test poses')
    parser.add_argument('--samples-per-pose', type=int, default=64, help='samples per pose')
    parser.add_argument(
        '--mixture',
        type=Path,
        default=None,
        help='a mixture checkpoint of the same arm to compare',
    )
    parser.add_argument('--out', type=output_dir, default='flow_study', help='reports')
    return parser


@exits_on_interrupt('python -m iknet_train.flow_study')
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    counts = ('synthetic', 'epochs', 'transforms', 'hidden', 'poses', 'samples_per_pose')
    if any(getattr(args, name) < 1 for name in counts):
        flags = f'--{", --".join(counts)}'.replace('_', '-')
        print(f'python -m iknet_train.flow_study: error: {flags} must be >= 1', file=sys.stderr)
        return 1
    try:
        import zuko  # noqa: F401  (a test extra: the study only, not the package)
    except ImportError:
        print(
            'python -m iknet_train.flow_study: error: needs zuko (pip install zuko)',
            file=sys.stderr,
        )
        return 1
    try:  # the arm and the model checked before the flow trains
        chain = named_chain(args.chain)
        mixture = load_checkpoint(args.mixture) if args.mixture else None
        if mixture is not None and (
            not isinstance(mixture.model, MixtureIKNet)
            or mixture.chain != chain
            or mixture.model.config.position_only
        ):
            raise ValueError(f'{args.mixture} is not a mixture model of {chain.name} whole poses')
    except (ValueError, OSError) as error:  # OSError: a file that cannot be read
        return failed('python -m iknet_train.flow_study', error)
    one_thread()
    torch.manual_seed(0)
    ranges = training_ranges(chain, mixture)
    flow, seconds = train_flow(chain, args, ranges)
    poses, _ = synthetic_samples(chain, args.poses, TEST_SEED, limit_ranges(chain))
    samplers: dict[str, Sampler] = {
        f'zuko neural spline flow (latent scale {scale:g})': (
            lambda poses, count, scale=scale: flow.sample(poses, count, scale)
        )
        for scale in (1.0, 0.5)
    }
    if mixture is not None:
        model = mixture.model.eval()
        config = model.config
        samplers[
            f'mixture model (temperature {config.temperature:g}, component temperature '
            f'{config.component_temperature:g}: what it proposes)'
        ] = lambda poses, count: model.sample(
            poses,
            count,
            temperature=config.temperature,
            component_temperature=config.component_temperature,
        )
    report = {
        'chain': chain.name,
        'settings': vars(args) | {'out': str(args.out), 'mixture': str(args.mixture)},
        'flow_training_s': seconds,
        'flow_training_ranges': ranges.tolist(),
        'samplers': {
            name: judge(chain, sampler, poses, args.samples_per_pose)
            for name, sampler in samplers.items()
        },
        'machine': machine(),
    }
    write_report(
        args.out, REPORT_NAMES, report, format_markdown(report),
        lambda path: plot_flow_study(path, report),
    )  # fmt: skip
    return 0


class PoseConditionedFlow(nn.Module):
    """zuko's neural spline flow over normalized joints, conditioned on normalized pose
    features: sample(poses (B, 7), count) -> (B, count, n) rad, as MixtureIKNet.sample."""

    def __init__(
        self,
        chain: Chain,
        poses: torch.Tensor,
        joints: torch.Tensor,
        transforms: int,
        hidden: int,
    ) -> None:
        """Normalization from the training pairs poses (B, 7) and joints (B, n) rad."""
        import zuko

        super().__init__()
        features = pose_features(poses)
        self.register_buffer('feature_mean', features.mean(0))
        self.register_buffer('feature_std', features.std(0).clamp_min(1e-6))
        self.register_buffer('joint_mean', joints.mean(0))
        self.register_buffer('joint_std', joints.std(0).clamp_min(1e-6))
        self.flow = zuko.flows.NSF(
            chain.n_joints, features.shape[1], transforms=transforms,
            hidden_features=(hidden, hidden),
        )  # fmt: skip

    def context(self, poses: torch.Tensor) -> torch.Tensor:
        """What the flow is conditioned on: the networks' pose features, normalized."""
        return (pose_features(poses) - self.feature_mean) / self.feature_std

    def log_likelihood(self, poses: torch.Tensor, joints: torch.Tensor) -> torch.Tensor:
        """log p of the normalized joints (B,): what training raises."""
        return self.flow(self.context(poses)).log_prob((joints - self.joint_mean) / self.joint_std)

    def sample(self, poses: torch.Tensor, count: int, latent_scale: float = 1.0) -> torch.Tensor:
        """(B, 7) -> (B, count, n) rad; latent_scale < 1 draws the base normal narrower (IKFlow's
        knob), trading diversity for accuracy as the mixture's temperature does."""
        distribution = self.flow(self.context(poses))
        base = distribution.base
        noise = torch.randn((count, *base.mean.shape), device=poses.device)
        latent = base.mean + latent_scale * base.stddev * noise
        normalized = distribution.transform.inv(latent)  # (count, B, n)
        return normalized.transpose(0, 1) * self.joint_std + self.joint_mean


def training_ranges(chain: Chain, mixture: Checkpoint | None) -> np.ndarray:
    """(n, 2) where the flow's synthetic joints are drawn: where the compared mixture model's
    were (its checkpoint records them), else where a mixture model trains by default."""
    recorded = mixture.training.get('data', {}).get('synthetic_ranges') if mixture else None
    return np.array(recorded) if recorded else default_ranges(chain, whole_reach=True)


def train_flow(
    chain: Chain, args: argparse.Namespace, ranges: np.ndarray
) -> tuple[PoseConditionedFlow, float]:
    """The flow trained by likelihood on synthetic (pose, joints) pairs of the arm, joints drawn
    in ranges (n, 2)."""
    started = time.perf_counter()
    poses, joints = (
        torch.as_tensor(a, dtype=torch.float32)
        for a in synthetic_samples(chain, args.synthetic, ranges=ranges)
    )
    model = PoseConditionedFlow(chain, poses, joints, args.transforms, args.hidden)
    fit(
        model,
        lambda batch: -model.log_likelihood(poses[batch], joints[batch]).mean(),
        len(poses),
        args.epochs,
        lr=1e-3,
        out_dir=args.out,
    )
    return model.eval(), time.perf_counter() - started


def judge(chain: Chain, sample: Sampler, poses: np.ndarray, count: int) -> dict:
    """Raw samples' errors (mm, deg) on poses (B, 7), and ms for 1,000 samples of one pose."""
    tensor = torch.as_tensor(poses, dtype=torch.float32)
    with torch.inference_mode():
        samples = sample(tensor, count).double().numpy()
        one = tensor[:1]
        sample(one, 1000)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            sample(one, 1000)
            times.append(time.perf_counter() - started)
    position, angle = pose_errors(chain, samples, np.repeat(poses[:, None], count, 1))
    return {
        'position_error_mm': summary(position * 1e3),
        'orientation_error_deg': summary(np.degrees(angle)),
        'ms_per_1000_samples': float(np.median(times) * 1e3),
    }


def format_markdown(report: dict) -> str:
    settings = report['settings']
    lines = [
        f'# Normalizing flow against the mixture model: {report["chain"]}',
        '',
        f'{settings["poses"]} test poses (FK of joints uniform in the limits), '
        f'{settings["samples_per_pose"]} raw samples each; the flow trained on '
        f'{settings["synthetic"]:,} synthetic pairs for {settings["epochs"]} epochs in '
        f'{report["flow_training_s"]:.0f} s. One thread.',
        '',
        '| sampler | position mm: mean / median / p95 | orientation deg: mean / median / p95 | '
        '1,000 samples of one pose |',
        '|---|---|---|---|',
    ]
    for name, f in report['samplers'].items():
        p, a = f['position_error_mm'], f['orientation_error_deg']
        lines.append(
            f'| {name} | {p["mean"]:.3g} / {p["median"]:.3g} / {p["p95"]:.3g} | '
            f'{a["mean"]:.3g} / {a["median"]:.3g} / {a["p95"]:.3g} | '
            f'{f["ms_per_1000_samples"]:.1f} ms |'
        )
    return '\n'.join(lines) + '\n'


def plot_flow_study(path: Path, report: dict) -> None:
    """Mean and median raw position error per sampler."""
    names = list(report['samplers'])
    rows = np.arange(len(names))
    figure, axis = plt.subplots(figsize=(8, 0.6 * len(names) + 1.5))
    for offset, key in ((-0.2, 'mean'), (0.2, 'median')):
        values = [report['samplers'][n]['position_error_mm'][key] for n in names]
        axis.barh(rows + offset, values, height=0.4, label=key)
    axis.set(xlabel='raw sample position error (mm)', yticks=rows, yticklabels=names)
    axis.invert_yaxis()
    axis.legend()
    save_figure(figure, path)


if __name__ == '__main__':
    sys.exit(main())
