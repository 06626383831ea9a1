"""Time the solver library on one thread: single-query median (us), batched solutions per second.

Poses are FK of random joints in the observed hand-guided ranges; "good seed" = those joints plus
Gaussian noise. Run: `. ./env.sh && python tools/bench_refine.py`. Figures are wall-clock on a
machine that may be busy: read them as measured, and rerun for stable ones.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import numpy as np

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.solvers import AnalyticSolver, Refiner, Tolerance, constant_proposer, refined

OBSERVED_LOW = np.array([-2.83, -1.48, -1.80, -1.79])  # rad, as in tests/golden.py
OBSERVED_HIGH = np.array([3.29, 0.76, 1.48, 2.11])


class GoodSeeds:
    """Stands in for the network: the noisy true joints of the timed query or batch."""

    def __init__(self, seeds: np.ndarray) -> None:
        self.seeds = seeds
        self.index = 0

    def __call__(self, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        if len(positions) == len(self.seeds):
            return self.seeds[:, None]
        return self.seeds[self.index : self.index + 1, None]


def median_us(call: Callable[[int], object], count: int) -> float:
    """Median wall time (us) of call(i) over i < count, each timed alone."""
    times = np.empty(count)
    for index in range(count):
        start = time.perf_counter()
        call(index)
        times[index] = time.perf_counter() - start
    return float(np.median(times) * 1e6)


def per_second(call: Callable[[], object], count: int, repeats: int = 5) -> float:
    """Best-of-repeats throughput of one batched call over count poses."""
    best = min(_timed(call) for _ in range(repeats))
    return count / best


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    parser.add_argument('--poses', type=int, default=20_000, help='poses per batched run')
    parser.add_argument('--queries', type=int, default=2_000, help='single queries timed')
    parser.add_argument('--noise', type=float, default=0.05, help='good-seed joint noise (rad)')
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    joints = rng.uniform(OBSERVED_LOW, OBSERVED_HIGH, (args.poses, 4))
    positions, rotations = forward_kinematics(OMX_CHAIN, joints)
    seeds = joints + rng.normal(0.0, args.noise, joints.shape)
    zeros = np.zeros_like(joints)

    tolerance = Tolerance(position=1e-9, orientation=1e-9)
    refiner = Refiner(OMX_CHAIN, tolerance=tolerance)
    analytic = AnalyticSolver(OMX_CHAIN, tolerance=tolerance)
    from_zero = refined(constant_proposer(np.zeros(4)), refiner)
    good_seeds = GoodSeeds(seeds)
    noisy = refined(good_seeds, refiner)

    def refined_single(index: int):
        good_seeds.index = index
        return noisy.solve(positions[index], rotations[index])

    singles = {
        'Refiner.refine, good seed (B=1)': lambda i: refiner.refine(
            positions[i : i + 1], rotations[i : i + 1], seeds[i : i + 1]
        ),
        'Refiner.refine, zero seed (B=1)': lambda i: refiner.refine(
            positions[i : i + 1], rotations[i : i + 1], zeros[i : i + 1]
        ),
        'refined(good seed).solve -> Solutions': refined_single,
        'refined(zero seed).solve -> Solutions': lambda i: from_zero.solve(
            positions[i], rotations[i]
        ),
        'analytic.solve -> Solutions': lambda i: analytic.solve(positions[i], rotations[i]),
    }
    batches = {
        'Refiner.refine, good seed': lambda: refiner.refine(positions, rotations, seeds),
        'Refiner.refine, zero seed': lambda: refiner.refine(positions, rotations, zeros),
        'refined(good seed).solve_batch': lambda: noisy.solve_batch(positions, rotations),
        'analytic.solve_batch': lambda: analytic.solve_batch(positions, rotations),
    }
    queries = min(args.queries, args.poses)
    print(f'one thread of {os.cpu_count()} cores; {args.poses} poses; tolerance 1e-9 m, 1e-9 rad')
    print(f'{"single query":45s} median us')
    for name, call in singles.items():
        print(f'{name:45s} {median_us(call, queries):9.1f}')
    print(f'{"batched":45s} solutions/s')
    for name, call in batches.items():
        print(f'{name:45s} {per_second(call, args.poses):11,.0f}')
    good = refiner.refine(positions, rotations, seeds)
    zero = refiner.refine(positions, rotations, zeros)
    for name, result in (('good seed', good), ('zero seed', zero)):
        print(
            f'{name}: {result.converged.mean():.1%} within tolerance, iterations median '
            f'{np.median(result.iterations):.0f}, p99 {np.quantile(result.iterations, 0.99):.0f}'
        )


if __name__ == '__main__':
    main()
