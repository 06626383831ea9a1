"""Smoothing a followed path in the null space, for arms with joints to spare.

follow_path solves waypoint after waypoint, so a spare joint's motion is greedy: it drifts with
the null-space pull and through regions where the tool's motion needs large joint steps. Given
the whole path, the joint motion that reproduces the same poses with the least squared joint
travel is a block-tridiagonal least-squares problem in the null space of each waypoint's
Jacobian; each pass solves it once (block Thomas) and re-solves every waypoint exactly with
Levenberg-Marquardt from the moved joints. On 200 random Panda paths the largest joint step of a
followed path went from 1.28 to 1.08 times its generating curve's (median); no library solves
this sparse, per-waypoint-constrained problem in microseconds, hence the hand-written kernel.
The unknowns are coordinates in an orthonormal null-space basis per waypoint
(kernels.null_space_basis), so the blocks are (n - task rows) square: scalars for a 7-joint arm
on poses: a pass over those 200 paths takes 51 ms instead of the 108 ms it took with n x n
projectors. With weights that make large joint changes dearer (peak_power), a pass lowers the
largest steps that least travel leaves.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from iknet_core.metrics import SAME_SOLUTION_RAD
from iknet_core.solvers import kernels
from iknet_core.solvers.settings import named

# Passes of smoothing per path: the squared travel changes little after the third.
SMOOTHING_PASSES = 3
# Ridge (per rad^2 of offset) on the offsets: keeps each block positive definite where two
# waypoints' null spaces barely overlap, and each pass's move small enough for the linearization.
_RIDGE = 1e-2


@njit(cache=True, nogil=True)
def smooth_path(
    path, positions, rotations, joints, tip, bounds, setting_values, max_step, passes,
    pinned_end, errors, peak_power=0.0,
):  # fmt: skip
    """Move the waypoints path (T, n) rad in place, the first kept (and the last where
    pinned_end), to reproduce the targets with less squared joint travel; a pass is kept only
    when every waypoint still meets the tolerance, no step exceeds max_step and the travel fell.
    peak_power > 0: each joint's squared change weighted by 1 + (the change / the median step)
    ** peak_power, weighed again every pass (a pass is kept when the weighted travel fell), which
    lowers the largest changes for more travel elsewhere. errors (T, 2): the kept errors."""
    settings = named(setting_values)
    count, n = path.shape
    rows = kernels.task_rows(settings)
    if count < 3 or n <= rows:
        return
    moved = range(1, count - 1 if pinned_end else count)  # the waypoints that may move
    spare = n - rows
    bases = np.zeros((count, n, spare))
    offsets = np.empty((count, n))
    trial = np.empty((count, n))
    trial_errors = np.empty((count, 2))
    work = kernels.workspace(n)
    scratch = np.empty((n, 6))
    weights = np.ones((count, n))
    for _ in range(passes):
        if peak_power > 0.0:
            _peak_weights(path, peak_power, weights)
        travel = _squared_travel(path, weights)
        for t in moved:
            kernels.null_space_basis(path[t], joints, tip, rows, work, scratch, bases[t])
        _least_travel_offsets(path, bases, weights, pinned_end, offsets)
        trial[0] = path[0]
        trial_errors[0] = errors[0]
        for t in range(1, count):
            for i in range(n):
                trial[t, i] = path[t, i] + offsets[t, i]
            position_error, orientation_error, _, _ = kernels.levenberg_marquardt(
                trial[t], positions[t], rotations[t], joints, tip, bounds, settings,
                settings.max_iterations, False, work,
            )  # fmt: skip
            step = _step(trial[t - 1], trial[t])
            if not kernels.meets(position_error, orientation_error, settings) or step > max_step:
                return
            trial_errors[t, 0], trial_errors[t, 1] = position_error, orientation_error
        if _squared_travel(trial, weights) >= travel:
            return
        path[:] = trial
        errors[:] = trial_errors


@njit(cache=True, nogil=True)
def mend_spikes(
    path, positions, rotations, joints, tip, bounds, setting_values, factor, longest, errors
):  # fmt: skip
    """Solve each run of up to longest inner waypoints of path (T, n) rad whose steps (into it,
    within it and out of it) include one more than factor times the median step again, from
    the straight line between its neighbours, and keep the new solutions where every one meets
    the tolerance, one is another solution (SAME_SOLUTION_RAD) and the run's largest step is
    smaller (so still within the max_step the path was followed under): near a singularity,
    where two branches come close, the follower can take a waypoint or a few on the other one
    and come back. Single waypoints first, then longer runs. errors (T, 2): updated with the
    path. Returns how many runs were mended."""
    settings = named(setting_values)
    count, n = path.shape
    if count < 3:
        return 0
    steps = np.empty(count - 1)
    _steps(path, steps)
    median = np.median(steps)
    if median <= 1e-12:
        return 0  # a path that mostly stands still: no step stands out
    limit = factor * median
    work = kernels.workspace(n)
    trial = np.empty((longest, n))
    trial_errors = np.empty((longest, 2))
    mended = 0
    for length in range(1, longest + 1):
        for first in range(1, count - length):
            end = first + length  # the neighbour after the run
            largest = 0.0
            for t in range(first - 1, end):
                largest = max(largest, steps[t])
            if largest <= limit:
                continue
            reached, another = True, False
            for k in range(length):
                share = (k + 1.0) / (length + 1.0)
                for i in range(n):
                    trial[k, i] = path[first - 1, i] + share * (path[end, i] - path[first - 1, i])
                position_error, orientation_error, _, _ = kernels.levenberg_marquardt(
                    trial[k], positions[first + k], rotations[first + k], joints, tip, bounds,
                    settings, settings.max_iterations, False, work,
                )  # fmt: skip
                trial_errors[k, 0], trial_errors[k, 1] = position_error, orientation_error
                if not kernels.meets(position_error, orientation_error, settings):
                    reached = False
                    break  # the run is not mended: the rest need not be solved
                another = another or _step(path[first + k], trial[k]) > SAME_SOLUTION_RAD
            if not (reached and another):
                continue
            new_largest = max(
                _step(path[first - 1], trial[0]), _step(trial[length - 1], path[end])
            )
            for k in range(1, length):
                new_largest = max(new_largest, _step(trial[k - 1], trial[k]))
            if new_largest >= largest:
                continue
            for k in range(length):
                path[first + k] = trial[k]
                errors[first + k] = trial_errors[k]
            for t in range(first - 1, end):
                steps[t] = _step(path[t], path[t + 1])
            mended += 1
    return mended


@njit(cache=True, nogil=True)
def _step(a, b):
    """The largest joint change (rad) from a to b: path.joint_steps' measure, compiled."""
    largest = 0.0
    for i in range(a.shape[0]):
        largest = max(largest, abs(b[i] - a[i]))
    return largest


@njit(cache=True, nogil=True)
def _steps(path, out):
    """out (T - 1,): _step between each pair of consecutive waypoints of path (T, n)."""
    for t in range(1, path.shape[0]):
        out[t - 1] = _step(path[t - 1], path[t])


@njit(cache=True, nogil=True)
def step_stands_out(path, factor):
    """Whether the largest joint step of path (T, n) is more than factor times its median step
    (_step's measure): compiled, because follow_path asks after every stage and np.median cost
    more than the path's own check."""
    if path.shape[0] < 2:
        return False
    steps = np.empty(path.shape[0] - 1)
    _steps(path, steps)
    return steps.max() > factor * np.median(steps)


@njit(cache=True, nogil=True)
def _squared_travel(path, weights):
    total = 0.0
    for t in range(1, path.shape[0]):
        for i in range(path.shape[1]):
            total += weights[t, i] * (path[t, i] - path[t - 1, i]) ** 2
    return total


@njit(cache=True, nogil=True)
def _peak_weights(path, power, weights):
    """weights[t, i] = 1 + (joint i's change into waypoint t / the median step) ** power (all 1
    where the median step is 0: a path that mostly stands still has no peaks to weigh)."""
    count, n = path.shape
    steps = np.empty(count - 1)
    _steps(path, steps)
    median = np.median(steps)
    for t in range(1, count):
        for i in range(n):
            change = abs(path[t, i] - path[t - 1, i])
            weights[t, i] = 1.0 + (change / median) ** power if median > 1e-12 else 1.0


@njit(cache=True, nogil=True)
def _least_travel_offsets(path, bases, weights, pinned_end, offsets):
    """offsets (T, n): v_t = Z_t a_t, Z_t (n, r) the orthonormal null-space basis at waypoint t
    (bases), minimizing sum_t |q_t - q_t-1 + v_t - v_t-1|^2_W_t + ridge |a|^2 with v_0 = 0 (and
    v_T-1 = 0 where pinned_end), W_t = diag(weights[t]) weighing each joint's change into
    waypoint t. The normal equations are block tridiagonal in a, with r x r blocks (diagonal
    Z_t^T (W_t + W_t+1) Z_t + ridge I, W_t+1 = 0 at a free end; off-diagonal -Z_t^T W_t Z_t-1);
    block Thomas elimination with each pivot block Cholesky-factored once."""
    count, n = path.shape
    spare = bases.shape[2]
    last = count - 2 if pinned_end else count - 1  # the last waypoint that moves
    factors = np.empty((count, spare, spare))
    reduced = np.empty((count, spare))
    coupling, solved = np.empty((spare, spare)), np.empty((spare, spare))
    right, column, along = np.empty(spare), np.empty(spare), np.empty(n)
    coefficients = np.zeros((count, spare))
    for t in range(1, last + 1):
        free_end = t == count - 1
        pivot = factors[t]
        for a in range(spare):
            total = 0.0
            for j in range(n):
                change = weights[t, j] * (path[t, j] - path[t - 1, j])
                if not free_end:
                    change -= weights[t + 1, j] * (path[t + 1, j] - path[t, j])
                total -= bases[t, j, a] * change
            right[a] = total
            for b in range(a + 1):
                total = 0.0
                for j in range(n):
                    weight = weights[t, j] + (0.0 if free_end else weights[t + 1, j])
                    total += bases[t, j, a] * weight * bases[t, j, b]
                pivot[a, b] = pivot[b, a] = total
            pivot[a, a] += _RIDGE
        if t > 1:
            # Eliminate a_t-1 with the previous pivot F: pivot -= C F^-1 C^T, right -= C F^-1
            # reduced_t-1, C = -Z_t^T W_t Z_t-1 (a_t-1's block in row t).
            for a in range(spare):
                for b in range(spare):
                    total = 0.0
                    for j in range(n):
                        total += bases[t, j, a] * weights[t, j] * bases[t - 1, j, b]
                    coupling[a, b] = -total
            for a in range(spare):  # solved[:, a] = F^-1 C[a, :]
                kernels.cholesky_substitute(factors[t - 1], coupling[a], column)
                for b in range(spare):
                    solved[b, a] = column[b]
            kernels.cholesky_substitute(factors[t - 1], reduced[t - 1], column)
            for a in range(spare):
                total = 0.0
                for c in range(spare):
                    total += coupling[a, c] * column[c]
                right[a] -= total
                for b in range(spare):
                    total = 0.0
                    for c in range(spare):
                        total += coupling[a, c] * solved[c, b]
                    pivot[a, b] -= total
        kernels.cholesky_factor(pivot)
        reduced[t] = right
    # Back substitution: a_t = F_t^-1 (reduced_t + Z_t^T W_t+1 Z_t+1 a_t+1), then v_t = Z_t a_t.
    kernels.cholesky_substitute(factors[last], reduced[last], coefficients[last])
    for t in range(last - 1, 0, -1):
        for j in range(n):
            total = 0.0
            for b in range(spare):
                total += bases[t + 1, j, b] * coefficients[t + 1, b]
            along[j] = total
        for a in range(spare):
            total = 0.0
            for j in range(n):
                total += bases[t, j, a] * weights[t + 1, j] * along[j]
            right[a] = reduced[t, a] + total
        kernels.cholesky_substitute(factors[t], right, coefficients[t])
    for t in range(count):
        for j in range(n):
            total = 0.0
            for b in range(spare):
                total += bases[t, j, b] * coefficients[t, b]
            offsets[t, j] = total
