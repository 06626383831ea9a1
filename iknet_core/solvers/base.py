"""The interface every IK backend offers, so the server and benchmark can swap them by name."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.solvers.result import Solutions

# Seeds for refinement: positions (B, 3) m, rotations (B, 3, 3) -> K hypotheses (B, K, n) rad.
# One that is a compiled network also offers `compiled_network` (NetworkProposer), which
# RefinedSolver runs inside its single-query kernel; one that samples (a mixture model) offers
# `samples` (True), `n_hypotheses` and a third argument, the count of samples to draw per pose.
Proposer = Callable[[np.ndarray, np.ndarray], np.ndarray]


class Solver(Protocol):
    """An IK backend: one pose with every detail, or many poses for throughput.

    Safe to call from two threads at once (the server answers IK while a path is solved on its
    worker thread): no state changes after construction, buffers allocated per call."""

    chain: Chain

    def solve(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None = None,
        max_solutions: int = 1,
    ) -> Solutions:
        """Solutions of one pose (3,) m, (3, 3), best first; nearest to seed (n,) when given.
        ValueError for a target that is not finite (check_pose)."""
        ...

    def solve_batch(
        self, positions: np.ndarray, rotations: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best solution per pose: (B, 3), (B, 3, 3) -> joints (B, n), errors (B,) m, (B,) rad.
        A pose that is not finite gets a NaN position error, never within a tolerance, rather
        than failing the whole batch."""
        ...


_WHOLE_NUMBERS = (int, np.integer)
_FLOAT64 = np.dtype(np.float64)


def kernel_ready(values: np.ndarray) -> np.ndarray:
    """values as the compiled kernels take them: C-contiguous, writable float64 (copied where
    not). numba compiles a kernel again for a read-only array (np.broadcast_to's, a frozen
    buffer's), so one would compile in a request after the server's warm-up said ready."""
    return np.require(values, np.float64, ('C_CONTIGUOUS', 'WRITEABLE'))


def check_pose(position: np.ndarray, rotation: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One finite target as kernel_ready float64 (3,), (3, 3); ValueError naming the shape or
    the values otherwise."""
    # One already so (a server's checked request) is taken as it is: attribute reads cost a
    # third of what two np.ascontiguousarray calls do on the cold cache a request wakes to.
    if not (
        type(position) is np.ndarray
        and type(rotation) is np.ndarray
        and position.dtype is _FLOAT64
        and rotation.dtype is _FLOAT64
        and position.shape == (3,)
        and position.strides == (8,)
        and rotation.shape == (3, 3)
        and rotation.strides == (24, 8)
        and position.flags.writeable
        and rotation.flags.writeable
    ):
        position, rotation = kernel_ready(position), kernel_ready(rotation)
        if position.shape != (3,) or rotation.shape != (3, 3):
            raise ValueError(
                f'expected a position (3,) and rotation (3, 3), got {position.shape} and '
                f'{rotation.shape}'
            )
    # A NaN or inf in any entry makes the sum so: summed as Python floats, the cheapest test of
    # twelve numbers (0.5 us, a sixth of np.isfinite's), confirmed entry by entry only where it
    # fails (huge finite values can add up to inf).
    if not math.isfinite(sum(position.tolist()) + sum(rotation.ravel().tolist())) and not (
        np.isfinite(position).all() and np.isfinite(rotation).all()
    ):
        raise ValueError(f'target {position.tolist()}, {rotation.tolist()} is not finite')
    return position, rotation


def check_max_solutions(max_solutions: int) -> int:
    """How many solutions solve() may return: a whole number >= 1; ValueError naming it."""
    if type(max_solutions) is int and max_solutions >= 1:  # the usual case, at once
        return max_solutions
    if isinstance(max_solutions, bool) or not isinstance(max_solutions, _WHOLE_NUMBERS):
        raise ValueError(f'max_solutions must be a whole number, got {max_solutions!r}')
    if max_solutions < 1:
        raise ValueError(f'max_solutions must be at least 1, got {max_solutions}')
    return int(max_solutions)


def check_poses(positions: np.ndarray, rotations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """B targets as kernel_ready float64 (B, 3), (B, 3, 3); ValueError naming the shapes."""
    positions, rotations = kernel_ready(positions), kernel_ready(rotations)
    if (
        positions.ndim != 2
        or positions.shape[1:] != (3,)
        or rotations.shape != (len(positions), 3, 3)
    ):
        raise ValueError(
            f'expected positions (B, 3) and rotations (B, 3, 3), got {positions.shape} and '
            f'{rotations.shape}'
        )
    return positions, rotations


def check_seed(seed: np.ndarray, chain: Chain, name: str = 'seed') -> np.ndarray:
    """A finite joint vector (n,) rad for the chain (a seed, or the argument name says);
    ValueError naming it otherwise."""
    seed = np.asarray(seed, dtype=np.float64)
    if seed.shape != (chain.n_joints,):
        raise ValueError(
            f'expected {name} of shape ({chain.n_joints},), got {seed.shape} (joints '
            f'{chain.joint_names})'
        )
    if not np.all(np.isfinite(seed)):
        raise ValueError(f'{name} {seed} is not finite')
    return seed
