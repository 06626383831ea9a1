"""`python -m iknet_train.tracking_study`: does a tracking network seed path following better
than the previous waypoint does?

A tracking network takes the next target pose and the current joints and answers the joint
step to the next waypoint (the "network conditioned on the current joints" of the work this
project builds on). follow_path seeds each waypoint's Levenberg-Marquardt with the previous
waypoint (and that carried on at its last velocity). This study trains a small tracking network
per arm with pytorch-pfn-extras on consecutive waypoints of smooth random joint curves, then, on
the path benchmark's test paths (other curves), seeds every waypoint from the true previous
joints three ways and prints, per seed: the share refined to the tolerance, mean iterations,
microseconds of refinement per waypoint (batched, one thread), the seed's own cost (the network's
forward pass compiled with numba, one waypoint at a time as a path needs it), and their sum.
The network would earn a place in follow_path only where that sum beats the previous waypoint's.
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
import numba
import numpy as np
import torch
from torch import nn

from iknet_core.interrupts import exits_on_interrupt
from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.robots import named_chain
from iknet_core.output_paths import output_dir
from iknet_core.solvers.network_kernel import linear, silu_inplace
from iknet_core.solvers.path import smooth_joint_paths
from iknet_core.solvers.policy import joint_bounds
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.result import Tolerance
from iknet_core.solvers.settings import SolverSettings
from iknet_train.bench import machine, one_thread, write_report
from iknet_train.cli import HelpFormatter
from iknet_train.fit import fit
from iknet_train.plots import save_figure

REPORT_NAMES = ('tracking_study.json', 'tracking_study.md', 'tracking_study.png')
TEST_SEED = 0  # iknet-path-bench's paths
TRAIN_SEED = 1_000
# The seed follow_path refines each waypoint from, the one the network must beat to be used.
FOLLOW_PATH_SEED = 'carried on at its velocity'
# Refinements timed per seed; the fastest counts.
TIMED_RUNS = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog='python -m iknet_train.tracking_study',
        description=__doc__,
        formatter_class=HelpFormatter,
    )
    parser.add_argument('--chains', nargs='+', default=['omx', 'ur5', 'panda'], help='arms')
    parser.add_argument(
        '--train-paths', type=int, default=3000, help='random joint curves to train on, per arm'
    )
    parser.add_argument('--test-paths', type=int, default=200, help='test paths per arm')
    parser.add_argument('--waypoints', type=int, default=100, help='waypoints per path')
    parser.add_argument('--width', type=int, default=64, help='hidden units per layer')
    parser.add_argument('--epochs', type=int, default=20, help='training epochs')
    parser.add_argument('--position-tolerance', type=float, default=1e-5, help='m')
    parser.add_argument('--orientation-tolerance', type=float, default=1e-4, help='rad')
    parser.add_argument('--out', type=output_dir, default='tracking_study', help='reports')
    return parser


@exits_on_interrupt('python -m iknet_train.tracking_study')
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    small = [
        name
        for name in ('train_paths', 'test_paths', 'width', 'epochs')
        if getattr(args, name) < 1
    ]
    if small or args.waypoints < 3:
        print(
            'python -m iknet_train.tracking_study: error: --train-paths, --test-paths, --width '
            'and --epochs must be at least 1 and --waypoints at least 3',
            file=sys.stderr,
        )
        return 1
    try:  # every arm and tolerance checked before the first trains
        chains = {name: named_chain(name) for name in args.chains}
        settings = SolverSettings(
            tolerance=Tolerance(args.position_tolerance, args.orientation_tolerance), restarts=0
        )
    except ValueError as error:
        print(f'python -m iknet_train.tracking_study: error: {error}', file=sys.stderr)
        return 1
    one_thread()
    torch.manual_seed(0)
    report = {'settings': vars(args) | {'out': str(args.out)}, 'arms': {}}
    for name, chain in chains.items():
        model, seconds = train_tracking_network(chain, args)
        report['arms'][name] = {
            'training_s': seconds,
            **compare_seeds(chain, model, args, settings),
        }
    report['machine'] = machine()
    write_report(
        args.out, REPORT_NAMES, report, format_markdown(report),
        lambda path: plot_tracking_study(path, report),
    )  # fmt: skip
    return 0


class TrackingNetwork(nn.Module):
    """(target pose features, current joints) -> joint step, all normalized by the training
    data's spread: an MLP with SiLU, the shape numba runs below."""

    def __init__(self, n_inputs: int, n_joints: int, width: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(n_inputs, width), nn.SiLU(),
            nn.Linear(width, width), nn.SiLU(),
            nn.Linear(width, width), nn.SiLU(),
            nn.Linear(width, n_joints),
        )  # fmt: skip
        self.register_buffer('input_mean', torch.zeros(n_inputs))
        self.register_buffer('input_std', torch.ones(n_inputs))
        self.register_buffer('step_scale', torch.ones(n_joints))

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        """(B, n_inputs) raw -> (B, n) rad."""
        return self.layers((inputs - self.input_mean) / self.input_std) * self.step_scale


def tracking_inputs(chain: Chain, targets: np.ndarray, current: np.ndarray) -> np.ndarray:
    """(..., n) target joints (their FK is the target pose) and current joints -> (..., 12 + n):
    the target position, its rotation's first two columns, and the current joints."""
    position, rotation = forward_kinematics(chain, targets)
    columns = rotation[..., :, :2].reshape(*rotation.shape[:-2], 6)
    return np.concatenate([position, columns, current], -1).astype(np.float32)


def consecutive_pairs(curves: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P, T, n) curves -> (P (T - 1), n) current joints and the next waypoint's joints."""
    n = curves.shape[-1]
    return curves[:, :-1].reshape(-1, n), curves[:, 1:].reshape(-1, n)


def train_tracking_network(
    chain: Chain, args: argparse.Namespace
) -> tuple[TrackingNetwork, float]:
    """A TrackingNetwork trained with MSE on the joint step, on curves other than the test's."""
    started = time.perf_counter()
    curves = smooth_joint_paths(chain, args.train_paths, args.waypoints, TRAIN_SEED)
    current, following = consecutive_pairs(curves)
    inputs = torch.from_numpy(tracking_inputs(chain, following, current))
    steps = torch.from_numpy((following - current).astype(np.float32))
    model = TrackingNetwork(inputs.shape[1], chain.n_joints, args.width)
    model.input_mean.copy_(inputs.mean(0))
    model.input_std.copy_(inputs.std(0).clamp_min(1e-6))
    model.step_scale.copy_(steps.std(0).clamp_min(1e-6))
    fit(
        model,
        lambda batch: (((model(inputs[batch]) - steps[batch]) / model.step_scale) ** 2).mean(),
        len(inputs),
        args.epochs,
        lr=3e-3,
        out_dir=args.out,
    )
    return model.eval(), time.perf_counter() - started


def compare_seeds(
    chain: Chain, model: TrackingNetwork, args: argparse.Namespace, settings: SolverSettings
) -> dict:
    """Each test waypoint t >= 2 refined from seeds made of the true joints before it."""
    curves = smooth_joint_paths(chain, args.test_paths, args.waypoints, TEST_SEED)
    previous, before = curves[:, 1:-1], curves[:, :-2]
    truth = curves[:, 2:]
    n = chain.n_joints
    with torch.no_grad():
        learned = model(torch.from_numpy(tracking_inputs(chain, truth, previous))).numpy()
    low, high = joint_bounds(chain, 'limits')
    seeds = {
        'previous waypoint': previous,
        FOLLOW_PATH_SEED: 2.0 * previous - before,
        'tracking network': previous + learned,
    }
    positions, rotations = forward_kinematics(chain, truth.reshape(-1, n))
    refiner = Refiner(chain, settings, bounds='limits')
    steps = np.abs(truth - previous).max(-1).reshape(-1)
    figures = {}
    for name, seed in seeds.items():
        seed = np.clip(seed.reshape(-1, n), low, high)
        refiner.refine(positions[:2], rotations[:2], seed[:2])  # kernels loaded
        # The fastest of a few runs: one run timed alone put the first seed at 2-4 times its
        # time (caches and the clock still warming up), whichever seed came first.
        seconds = np.inf
        for _ in range(TIMED_RUNS):
            started = time.perf_counter()
            refined = refiner.refine(positions, rotations, seed)
            seconds = min(seconds, time.perf_counter() - started)
        # On the curve: refined within twice the curve's own step of the previous joints.
        moved = np.abs(refined.joints - previous.reshape(-1, n)).max(-1)
        figures[name] = {
            'refined': float(refined.converged.mean()),
            'on_the_curve': float((refined.converged & (moved <= 2.0 * steps + 1e-9)).mean()),
            'iterations_mean': float(refined.iterations.mean()),
            'refine_us': 1e6 * seconds / len(seed),
            'seed_us': 0.0,
        }
    figures['tracking network']['seed_us'] = forward_microseconds(
        chain, model, previous[0, 0], truth[0, 0]
    )
    for values in figures.values():
        values['total_us'] = values['refine_us'] + values['seed_us']
    return {'waypoints': len(positions), 'seeds': figures}


def forward_microseconds(
    chain: Chain, model: TrackingNetwork, current: np.ndarray, target: np.ndarray
) -> float:
    """The network on one waypoint at a time, compiled: what a path follower would pay. Checks
    the compiled network against torch's first."""
    linear = [layer for layer in model.layers if isinstance(layer, nn.Linear)]

    def array(tensor: torch.Tensor) -> np.ndarray:
        return np.ascontiguousarray(tensor.detach().numpy())

    weights = (
        array(model.input_mean), array(model.input_std),
        array(linear[0].weight), array(linear[0].bias),
        np.stack([array(layer.weight) for layer in linear[1:-1]]),
        np.stack([array(layer.bias) for layer in linear[1:-1]]),
        array(linear[-1].weight), array(linear[-1].bias), array(model.step_scale),
    )  # fmt: skip
    inputs = tracking_inputs(chain, target, current)
    with torch.no_grad():
        expected = model(torch.from_numpy(inputs[None]))[0].numpy()
    out = np.empty(chain.n_joints, dtype=np.float32)
    _forward(inputs, *weights, out)
    if not np.allclose(out, expected, rtol=1e-3, atol=1e-6):
        raise RuntimeError(f'the compiled tracking network gives {out}, torch {expected}')
    repeats = 20_000
    _repeat_forward(inputs, weights, out, 1)
    started = time.perf_counter()
    _repeat_forward(inputs, weights, out, repeats)
    return 1e6 * (time.perf_counter() - started) / repeats


# Compiled in memory: the study runs once, and its kernels call network_kernel's.
@numba.njit
def _forward(
    inputs, mean, std, first_w, first_b, hidden_w, hidden_b, last_w, last_b, scale, out
):  # fmt: skip
    """TrackingNetwork.forward for one input (float32 arrays as the torch model's)."""
    x = np.empty(inputs.shape[0], dtype=np.float32)
    for i in range(x.shape[0]):
        x[i] = (inputs[i] - mean[i]) / std[i]
    h = np.empty(first_b.shape[0], dtype=np.float32)
    g = np.empty(first_b.shape[0], dtype=np.float32)
    linear(first_w, first_b, x, h)
    silu_inplace(h)
    for layer in range(hidden_w.shape[0]):
        linear(hidden_w[layer], hidden_b[layer], h, g)
        silu_inplace(g)
        h, g = g, h
    linear(last_w, last_b, h, out)
    for j in range(out.shape[0]):
        out[j] *= scale[j]


@numba.njit
def _repeat_forward(inputs, weights, out, repeats):
    for _ in range(repeats):
        _forward(inputs, *weights, out)


def format_markdown(report: dict) -> str:
    lines = [
        '# Tracking network as the seed of path following',
        '',
        f'{report["settings"]["test_paths"]} test paths of {report["settings"]["waypoints"]} '
        "waypoints per arm (iknet-path-bench's), every waypoint from the true joints before it; "
        "refined: to the tolerance; on the curve: refined within twice the curve's own step of "
        'the previous joints. One thread; microseconds per waypoint.',
        '',
        '| arm | seed | refined | on the curve | iterations | refine us | seed us | total us |',
        '|---|---|---|---|---|---|---|---|',
    ]
    for arm, figures in report['arms'].items():
        for seed, f in figures['seeds'].items():
            lines.append(
                f'| {arm} | {seed} | {f["refined"]:.2%} | {f["on_the_curve"]:.2%} | '
                f'{f["iterations_mean"]:.2f} | {f["refine_us"]:.2f} | {f["seed_us"]:.2f} | '
                f'{f["total_us"]:.2f} |'
            )
    lines.append('')
    for arm, figures in report['arms'].items():
        network, carried = (figures['seeds'][k] for k in ('tracking network', FOLLOW_PATH_SEED))
        beats = (
            network['total_us'] < carried['total_us']
            and network['on_the_curve'] >= carried['on_the_curve']
        )
        lines.append(
            f'- {arm}: the tracking network (trained in {figures["training_s"]:.0f} s) '
            f"{'beats' if beats else 'does not beat'} follow_path's seed, the previous waypoint "
            f'{FOLLOW_PATH_SEED}: {network["total_us"]:.2f} against {carried["total_us"]:.2f} us '
            f'a waypoint, on the curve {network["on_the_curve"]:.2%} against '
            f'{carried["on_the_curve"]:.2%}'
        )
    return '\n'.join(lines) + '\n'


def plot_tracking_study(path: Path, report: dict) -> None:
    """Per arm and seed: microseconds per waypoint, refinement and the seed's own cost."""
    labels = [f'{arm}: {seed}' for arm, f in report['arms'].items() for seed in f['seeds']]
    figures = [f for arm in report['arms'].values() for f in arm['seeds'].values()]
    rows = np.arange(len(labels))
    refine = [f['refine_us'] for f in figures]
    figure, axis = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.5))
    axis.barh(rows, refine, color='tab:blue', label='refinement')
    axis.barh(rows, [f['seed_us'] for f in figures], left=refine, color='tab:orange',
              label="the seed's forward pass")  # fmt: skip
    axis.set(xlabel='us per waypoint, one thread', yticks=rows, yticklabels=labels)
    axis.invert_yaxis()
    axis.legend()
    save_figure(figure, path)


if __name__ == '__main__':
    sys.exit(main())
