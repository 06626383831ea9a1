"""The one timing method of iknet-test and iknet-bench."""

import numpy as np
import pytest

from iknet_train.timing import single_query_us, time_solver, timed_batches


def test_timing_helpers_count_their_calls() -> None:
    calls = []
    positions, rotations = np.zeros((5, 3)), np.zeros((5, 3, 3))
    median, count = single_query_us(lambda p, r: calls.append(1), positions, rotations, 10.0)
    assert count == 5 and len(calls) == 5 and median >= 0
    # Over budget after the first call: stops there.
    assert single_query_us(lambda p, r: None, positions, rotations, 0.0)[1] == 1
    joints, per_second, runs = timed_batches(
        lambda p, r: np.zeros((len(p), 4)), positions, rotations, 0.0
    )
    assert joints.shape == (5, 4) and per_second > 0 and runs == 1
    with pytest.raises(ValueError, match=r'returned \(4, 4\) for 5 poses'):
        timed_batches(lambda p, r: np.zeros((4, 4)), positions, rotations, 0.0)


def test_time_solver_returns_the_batch_answer_and_every_figure() -> None:
    positions, rotations = np.zeros((7, 3)), np.zeros((7, 3, 3))
    singles = []
    joints, figures = time_solver(
        lambda p, r: singles.append(1),
        lambda p, r: np.ones((len(p), 4)),
        positions,
        rotations,
        single_queries=3,
        batch_seconds=0.0,
    )
    assert joints.shape == (7, 4)
    assert figures['single_queries'] == 3
    assert figures['batch_solutions_per_s'] > 0 and figures['batch_runs'] == 1
    assert len(singles) == 7 + 3  # warm-up on every pose (fewer than 32), then the timed ones
