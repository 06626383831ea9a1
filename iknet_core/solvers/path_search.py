"""A search over the self-motion of an arm with joints to spare, for paths that following one
waypoint after another cannot finish.

follow_path decides each waypoint's spare-joint motion from the previous waypoint alone, so it
can walk into a part of the self-motion that the limits cut off further on, with no way back:
on 200 random Panda paths, 9 stopped short of a waypoint, each with a joint at a limit, while
the curve that made the path stays clear of them. The search keeps a beam of up to SEARCH_WIDTH
solutions per waypoint, spread over the self-motion, each refined from one of the previous
waypoint's (as it is, and moved along the null space of its Jacobian by SEARCH_OFFSETS), and
links them by dynamic programming to the least squared joint travel with no step above the
bound; the path is then the chain of links back from the last waypoint. All 9 of those paths
are followed with it. It costs SEARCH_WIDTH x (1 + 2 x directions x offsets) short refinements
per waypoint (48 on Panda poses, 80 on its positions), so follow_path runs it only where
following stopped at a waypoint the arm can reach, narrower on a followed path with a spike or
a largest step that stands out (path.SPIKE_FACTOR, path.CAP_FACTOR), and as wide on one with a
jump in all but name (path.JUMP_FACTOR).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from iknet_core.metrics import SAME_SOLUTION_RAD
from iknet_core.solvers import kernels
from iknet_core.solvers.settings import named

# Solutions kept per waypoint: on those 9 Panda paths, 12 linked 8 and 16 all 9.
SEARCH_WIDTH = 16
# Moves (rad, along a unit null-space direction, both ways) from each kept solution that seed
# the next waypoint's candidates, besides the solution itself: on the Panda paths that every
# retry left stopped, 0.1 linked all 9 at ~17 ms each; 0.05 or 0.2 linked 8, and two sizes
# (0.05 and 0.2) all 9 at ~28 ms.
SEARCH_OFFSETS = np.array([0.1])
# Where those leave a path stopped (after the narrow search below), a wide search with two sizes:
# on 2,400 other random Panda paths (seeds 4 to 15, the default tolerance), 3 stopped after a
# search with SEARCH_OFFSETS alone, and these linked all 3 (~28 ms a path; at iknet-path-bench's
# tolerance, 1 stays).
WIDER_SEARCH_OFFSETS = np.array([0.05, 0.2])
# Where that leaves a path stopped too, one twice as wide with the wider offsets: on 3,200
# random Panda paths (iknet-path-bench seeds 0 to 15, its tolerance), 1 stopped after the two
# 16 wide, and this linked it (~50 ms); as wide with SEARCH_OFFSETS alone linked 2 of the 3 that
# the first search left at that tolerance.
WIDEST_SEARCH_WIDTH = 32
# The cheap search, tried first where following stops and used for a largest step that stands out
# (path.CAP_FACTOR): a beam NARROW_SEARCH_WIDTH wide seeded NARROW_SEARCH_OFFSETS along the null
# space. On the 8 random Panda paths of iknet-path-bench seeds 0 to 2 whose largest step stayed
# over 1.5 times their curve's, a search under 0.85 times their largest step linked all 8 under 1.5
# times their curve's at 6 ms each (at 4 wide, 6 of 8; 8 wide with offsets of 0.2, 2 of 8, with 0.1
# and 0.3, 3 of 8, with 0.05 and 0.2, all 8 at 14 ms). Where following stopped, it linked 23 of the
# 25 paths that the first wide search linked, at 7.5 ms instead of 17 ms each.
NARROW_SEARCH_WIDTH = 6
NARROW_SEARCH_OFFSETS = np.array([0.05])
# Null-space directions per kept solution (fewer where the null space is smaller): the
# projector's two largest columns, made orthogonal.
SEARCH_DIRECTIONS = 2


@njit(cache=True, nogil=True)
def search_path(
    start, positions, rotations, joints, tip, bounds, setting_values, max_step, width, offsets,
    out, errors,
):  # fmt: skip
    """Fill out (T, n) rad and errors (T, 2) with the searched path from start (n,), the targets
    positions (T, 3) and rotations (T, 3, 3); returns T where every waypoint was linked, else the
    first waypoint with no solution within max_step of a kept one (out is then untouched)."""
    settings = named(setting_values)
    count, n = positions.shape[0], start.shape[0]
    rows = kernels.task_rows(settings)
    directions = max(min(SEARCH_DIRECTIONS, n - rows), 0)
    per_node = 1 + 2 * directions * offsets.shape[0]
    layers = np.empty((count, width, n))
    layer_errors = np.empty((count, width, 2))
    parents = np.zeros((count, width), dtype=np.int64)
    costs = np.zeros(width)
    candidates = np.empty((width * per_node, n))
    candidate_errors = np.empty((width * per_node, 2))
    candidate_costs = np.empty(width * per_node)
    candidate_parents = np.empty(width * per_node, dtype=np.int64)
    nearest = np.empty(width * per_node)
    projector, basis = np.empty((n, n)), np.empty((directions, n))
    work = kernels.workspace(n)
    scratch = (np.empty((n, 6)), np.empty((n, max(n - rows, 0))))
    previous = start.reshape(1, n).copy()
    previous_costs = np.zeros(1)
    for t in range(count):
        # Candidates: each kept solution of the previous waypoint, as it is and moved along
        # its null space, refined onto this waypoint's target.
        made = 0
        for p in range(previous.shape[0]):
            kernels.null_space_projector(previous[p], joints, tip, rows, work, scratch, projector)
            _null_basis(projector, basis)
            for seed in range(per_node):
                q = candidates[made]
                q[:] = previous[p]
                if seed > 0:
                    which = seed - 1
                    sign = 1.0 if which % 2 == 0 else -1.0
                    offset = offsets[(which // 2) % offsets.shape[0]]
                    direction = basis[which // (2 * offsets.shape[0])]
                    for i in range(n):
                        q[i] += sign * offset * direction[i]
                position_error, orientation_error, _, _ = kernels.levenberg_marquardt(
                    q, positions[t], rotations[t], joints, tip, bounds, settings,
                    min(settings.max_iterations, 8), True, work,
                )  # fmt: skip
                if not kernels.meets(position_error, orientation_error, settings):
                    continue
                # The cheapest link back to any kept solution within max_step.
                best, best_parent = np.inf, -1
                for r in range(previous.shape[0]):
                    step, squared = 0.0, 0.0
                    for i in range(n):
                        change = q[i] - previous[r, i]
                        step = max(step, abs(change))
                        squared += change * change
                    if step <= max_step and previous_costs[r] + squared < best:
                        best, best_parent = previous_costs[r] + squared, r
                if best_parent < 0:
                    continue
                candidate_errors[made, 0] = position_error
                candidate_errors[made, 1] = orientation_error
                candidate_costs[made], candidate_parents[made] = best, best_parent
                made += 1
        if made == 0:
            return t
        # Keep the cheapest, then the candidate farthest from those kept, while any is more
        # than SAME_SOLUTION_RAD from them: a beam spread over the self-motion.
        chosen = int(np.argmin(candidate_costs[:made]))
        kept = 0
        for c in range(made):
            nearest[c] = np.inf
        while kept < width:
            layers[t, kept] = candidates[chosen]
            layer_errors[t, kept] = candidate_errors[chosen]
            parents[t, kept] = candidate_parents[chosen]
            costs[kept] = candidate_costs[chosen]
            kept += 1
            farthest, chosen = SAME_SOLUTION_RAD, -1
            for c in range(made):
                distance = 0.0
                for i in range(n):
                    distance = max(distance, abs(candidates[c, i] - layers[t, kept - 1, i]))
                nearest[c] = min(nearest[c], distance)
                if nearest[c] > farthest:
                    farthest, chosen = nearest[c], c
            if chosen < 0:
                break
        previous = layers[t, :kept]
        previous_costs = costs[:kept].copy()
    node = int(np.argmin(previous_costs))
    for t in range(count - 1, -1, -1):
        out[t] = layers[t, node]
        errors[t] = layer_errors[t, node]
        node = parents[t, node]
    return count


@njit(cache=True, nogil=True)
def _null_basis(projector, basis):
    """basis (m, n): unit directions in the null space, the projector's largest columns made
    orthogonal one after another (Gram-Schmidt)."""
    n = projector.shape[0]
    column = np.empty(n)
    for d in range(basis.shape[0]):
        best, best_norm = 0, -1.0
        for j in range(n):
            norm = _orthogonal_column(projector, j, basis, d, column)
            if norm > best_norm:
                best, best_norm = j, norm
        norm = max(np.sqrt(_orthogonal_column(projector, best, basis, d, column)), 1e-12)
        for i in range(n):
            basis[d, i] = column[i] / norm


@njit(cache=True, nogil=True)
def _orthogonal_column(projector, j, basis, count, column):
    """column (n,) = the projector's column j less its parts along basis[:count]; returns its
    squared norm."""
    n = projector.shape[0]
    for i in range(n):
        column[i] = projector[i, j]
    for e in range(count):
        along = 0.0
        for i in range(n):
            along += basis[e, i] * column[i]
        for i in range(n):
            column[i] -= along * basis[e, i]
    squared = 0.0
    for i in range(n):
        squared += column[i] * column[i]
    return squared
