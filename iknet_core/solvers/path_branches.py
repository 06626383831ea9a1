"""The other branch near a singularity, for paths on an arm with no joints to spare.

Where a path passes close to a singular configuration, two branches of the arm's IK meet (the
elbow through straight, the wrist through aligned), and the arm can go on along either with
small joint steps. follow_path keeps the branch it is on, which there can be the branch on which
a later waypoint lies past a joint limit, or is reached only with a jump. So where a path stops,
or its largest step stands out, follow_path takes the other branch (the twin) at the waypoints
around the path's closest passes by a singularity (`other_branches`), follows the rest from
there, and keeps what gets further or, followed to the end either way, has the smaller largest
step. On 200 random UR5 paths per seed (`iknet-path-bench --chains ur5`), 29 of 2,400 (seeds 0
to 11) stopped without it and none with it; those followed within 1.5 times their curve's
largest step went from 2,360 to 2,395 (seeds 8 to 11, not looked at while building it: 782 to
797 of 800); the OM-X's stops went from 3 to 0. Trying them around a followed path's largest
step too, where it stands out, took seeds 0 to 11 to 2,399 (from 2,398 after path.MEND_RUN).
A path that starts near a singularity has no velocity to go on by, and can follow the mirror of
its motion with every step larger and none standing out: its start's twins are tried too
(starts_near_singularity), which took UR5 seeds 0 to 31 from 6,399 to 6,400 of 6,400.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from iknet_core.metrics import SAME_SOLUTION_RAD
from iknet_core.solvers import kernels
from iknet_core.solvers.settings import SolverSettings

# Where twins are tried: around the path's SINGULAR_PASSES closest passes by a singularity (the
# least singular value of its Jacobian, orientation rows weighted as refinement weighs them, at
# its smallest, passes at least PASS_GAP waypoints apart), at every waypoint from PASS_REACH
# before to PASS_REACH after: the curve a path was made from can leave the path's branch a few
# waypoints before the path passes closest, and right at the pass the twins nearly coincide.
# The path's start is tried too (with no velocity yet, the follower can take the twin there),
# where a path stopped, the waypoints before it, and the waypoints around a step that stands out
# (`also`).
SINGULAR_PASSES = 3
PASS_GAP = 5
PASS_REACH = 4
# Seeds of a twin: moves (rad, both ways) from the path's waypoint before it, along the least
# singular direction (the elbow through straight) and along each joint (the wrist through
# aligned, where the twin has the middle wrist joint's sign flipped and its neighbours turned).
BRANCH_OFFSETS = (0.1, 0.3)
# A start whose task Jacobian's least singular value is below this share of its greatest (a
# condition number over 100) starts near a singularity (starts_near_singularity).
SINGULAR_START_RATIO = 0.01


def other_branches(
    path: np.ndarray,
    positions: np.ndarray,
    rotations: np.ndarray,
    arrays: kernels.ChainArrays,
    bounds: np.ndarray,
    settings: SolverSettings,
    max_step: float,
    also: tuple[int, ...] = (),
    *,
    start_only: bool = False,
) -> Iterator[tuple[int, np.ndarray]]:
    """(waypoint w, joints (n,) rad) pairs, the most promising first, found as they are asked
    for: exact solutions of target w on another branch than path[w], within max_step of
    path[w - 1], around where path (k, n) passes closest by a singularity (SINGULAR_PASSES,
    PASS_REACH), and around the waypoints also (where a step stands out); start_only: only
    the twins of target 1, seeded from path[0] along the least singular direction alone (a
    path that starts near a singularity, starts_near_singularity; also must then be empty).
    positions (T, 3), rotations (T, 3, 3): every target; bounds: the kernels' (n, 3) joint
    bounds."""
    if start_only and also:
        raise ValueError('other_branches: start_only tries the start alone, not also')
    count, n = path.shape
    # The twin of target w + 1 is seeded from path[w]: up to the target after the last reached.
    last = min(count, len(positions) - 1)
    if last < 1:
        return  # no waypoint to branch from, or none after it
    rank = min(settings.task_dimensions, n)
    jacobians = _task_jacobians(path[:1] if start_only else path, arrays, settings)
    _, singular_values, directions = np.linalg.svd(jacobians)
    candidates = (
        [0]
        if start_only
        else _candidates(singular_values[:, rank - 1], last, count < len(positions), also)
    )
    steps = np.array([sign * offset for offset in BRANCH_OFFSETS for sign in (1.0, -1.0)])
    kernel_settings = replace(settings, restarts=0).kernel()  # a restart is not the twin
    for w in candidates:
        # The twin of target w + 1 from path[w], moved along the least singular direction and
        # (except with start_only) along each joint.
        moves = directions[w, rank - 1][None]
        if not start_only:
            moves = np.concatenate([moves, np.eye(n)])
        seeds = (path[w] + steps[:, None, None] * moves).reshape(-1, n)
        target = w + 1
        twins = _refined(seeds, positions[target], rotations[target], arrays, bounds,
                         kernel_settings)  # fmt: skip
        keep = np.abs(twins - path[w]).max(1) <= max_step
        if target < count:  # not the path's own branch
            keep &= np.abs(twins - path[target]).max(1) >= settings.duplicate_tolerance
        twins = twins[keep]
        while len(twins):  # one of each group of nearly equal twins
            yield int(target), twins[0]
            twins = twins[np.abs(twins - twins[0]).max(1) >= SAME_SOLUTION_RAD]


def starts_near_singularity(
    start: np.ndarray, arrays: kernels.ChainArrays, settings: SolverSettings
) -> bool:
    """Whether the joints start (n,) rad are near a singularity: the least singular value of
    the task Jacobian (orientation rows weighted by settings.orientation_weight, so the share
    depends on it) under SINGULAR_START_RATIO of the greatest. There the branch a path starts
    on is ambiguous, and with no velocity yet the follower goes on along the side it starts on,
    which can be the mirror of the path's motion, every step larger and none standing out."""
    jacobian = _task_jacobians(start[None], arrays, settings)[0]
    singular_values = np.linalg.svd(jacobian, full_matrices=False, compute_uv=False)
    greatest, least = singular_values[0], singular_values[-1]
    return bool(least < SINGULAR_START_RATIO * greatest)


def _candidates(least: np.ndarray, last: int, stopped: bool, also: tuple[int, ...]) -> list[int]:
    """The waypoints w whose twins of target w + 1 other_branches tries, the most promising
    first: least (k,): the least singular value at each waypoint of a path, followed up to
    waypoint last (where it stopped, if stopped)."""
    # The start (where the follower has no velocity to go on), and where a path stopped.
    tried = [0, last - 1] if stopped else [0]
    tried += [w for w in also if 0 <= w < last and w not in tried]
    passes: list[int] = []
    for w in np.argsort(least[:last], kind='stable'):
        if len(passes) == SINGULAR_PASSES:
            break
        if all(abs(w - other) >= PASS_GAP for other in [*tried, *passes]):
            passes.append(int(w))
    # Most promising first: the passes and the waypoints tried (the start, the stop, also), the
    # closest to a singularity first, and around each, the waypoints nearest it.
    passes = sorted([*passes, *tried], key=lambda w: least[w])
    reach = sorted(range(-PASS_REACH, PASS_REACH + 1), key=abs)
    return list(dict.fromkeys(min(max(w + lead, 0), last - 1) for w in passes for lead in reach))


def _task_jacobians(
    path: np.ndarray, arrays: kernels.ChainArrays, settings: SolverSettings
) -> np.ndarray:
    """The task Jacobians (k, rows, n) at path (k, n) rad: the rows the target constrains
    (SolverSettings.task_dimensions), the orientation rows weighted as refinement weighs them."""
    count, n = path.shape
    jacobians = np.empty((count, 6, n))
    kernels.pose_jacobian_batch(
        path, arrays.joints, arrays.tip, np.empty((count, 3)), np.empty((count, 3, 3)), jacobians
    )
    weighted = jacobians[:, : settings.task_dimensions].copy()
    weighted[:, 3:] *= settings.orientation_weight
    return weighted


def _refined(
    seeds: np.ndarray,
    position: np.ndarray,
    rotation: np.ndarray,
    arrays: kernels.ChainArrays,
    bounds: np.ndarray,
    kernel_settings: tuple,
) -> np.ndarray:
    """The seeds (k, n) that refinement takes to the target, refined (m, n); a seed is given up
    once its cost stops falling (one near the twin converges in a few iterations). The kernel
    itself, not Refiner: the path's bounds clamp every joint and never wrap."""
    joints = np.ascontiguousarray(seeds, dtype=np.float64)
    count = len(joints)
    converged = np.empty(count, dtype=np.bool_)
    kernels.refine_batch(
        joints, np.repeat(position[None], count, 0), np.repeat(rotation[None], count, 0),
        arrays.joints,
        arrays.tip, bounds, kernel_settings, True, (0, count), np.empty((count, 2)),
        np.empty(count, dtype=np.int64), converged,
    )  # fmt: skip
    return joints[converged]
