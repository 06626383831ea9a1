"""How iknet-test and iknet-bench time a solver, one method for both: the median of single
`solve()` calls, each timed alone, and solutions per second of whole-batch `solve_batch()`
calls."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

# Over the compiled network's single-pose batch limit, so every code path is warm.
WARM_UP_POSES = 32
SolveOne = Callable[[np.ndarray, np.ndarray], object]  # (3,) m, (3, 3) -> anything
SolveMany = Callable[[np.ndarray, np.ndarray], np.ndarray]  # (B, 3), (B, 3, 3) -> (B, n) rad


def time_solver(
    solve_one: SolveOne,
    solve_many: SolveMany,
    positions: np.ndarray,
    rotations: np.ndarray,
    single_queries: int = 1000,
    batch_seconds: float = 1.0,
    budget_s: float = 10.0,
) -> tuple[np.ndarray, dict]:
    """Joints (B, n) of a whole-batch call on every pose, and the timing figures.

    Warms up first; then whole-batch calls repeat for batch_seconds (best run kept), and up to
    single_queries poses spread over the set are solved one call at a time (fewer once
    budget_s is spent).
    """
    positions = np.ascontiguousarray(positions, dtype=np.float64)
    rotations = np.ascontiguousarray(rotations, dtype=np.float64)
    solve_many(positions[:WARM_UP_POSES], rotations[:WARM_UP_POSES])
    for index in range(min(WARM_UP_POSES, len(positions))):
        solve_one(positions[index], rotations[index])
    joints, per_second, batch_runs = timed_batches(solve_many, positions, rotations, batch_seconds)
    count = max(1, min(single_queries, len(positions)))
    picked = np.linspace(0, len(positions) - 1, count).astype(int)
    single_us, single_count = single_query_us(
        solve_one, positions[picked], rotations[picked], budget_s
    )
    return joints, {
        'single_query_median_us': single_us,
        'single_queries': single_count,
        'batch_solutions_per_s': per_second,
        'batch_runs': batch_runs,
    }


def timed_batches(
    solve_many: SolveMany,
    positions: np.ndarray,
    rotations: np.ndarray,
    min_seconds: float,
) -> tuple[np.ndarray, float, int]:
    """Joints (B, n) of one whole-batch call, and solutions/s of the best of repeated calls.

    Calls repeat until min_seconds have passed (once when one call takes longer).
    """
    best_ns, spent_ns, runs = math.inf, 0, 0
    while runs == 0 or spent_ns < min_seconds * 1e9:
        start = time.perf_counter_ns()
        joints = solve_many(positions, rotations)
        elapsed = time.perf_counter_ns() - start
        best_ns, spent_ns, runs = min(best_ns, elapsed), spent_ns + elapsed, runs + 1
    joints = np.asarray(joints, dtype=np.float64)
    if joints.shape != (len(positions), joints.shape[-1]):
        raise ValueError(f'solve_many returned {joints.shape} for {len(positions)} poses')
    return joints, len(positions) / max(best_ns, 1) * 1e9, runs


def single_query_us(
    solve_one: SolveOne,
    positions: np.ndarray,
    rotations: np.ndarray,
    budget_s: float,
) -> tuple[float, int]:
    """Median time (us) of one solve_one call, each timed alone, and how many were timed.

    Stops early, after at least one call, once budget_s is spent.
    """
    durations = []
    deadline = time.perf_counter_ns() + budget_s * 1e9
    for position, rotation in zip(positions, rotations, strict=True):
        start = time.perf_counter_ns()
        solve_one(position, rotation)
        end = time.perf_counter_ns()
        durations.append(end - start)
        if end > deadline:
            break
    return float(np.median(durations) / 1e3), len(durations)
