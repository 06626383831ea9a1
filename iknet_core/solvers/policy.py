"""The branch policy: which of several IK solutions comes first.

Solutions meeting the tolerance come first, then those inside the software limits, then the one
nearest to the seed (so a path does not flip between elbow up and down), else the smallest error.

Joints whose reach spans a full turn (OM-X joint1 reaches beyond pi) reach one pose at q and at
q - 2*pi. Both are valid, distinct solutions (a servo sent from 3.2 rad to -3.0 rad turns 6.2 rad),
and both are offered. Distances to the seed are wrap-aware: such joints count their shortest angle,
so the twins are equally near and the limits decide; the plain joint travel breaks remaining ties
(joint1 = pi or -pi, both inside the limits: the one on the seed's side comes first).
"""

from __future__ import annotations

import math

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.solvers.result import Solutions, Tolerance

TURN = 2.0 * math.pi
# Solutions whose joints all differ by less than this (rad) are one solution.
DUPLICATE_ATOL = 1e-6
# Slack (rad) when testing limits and reach, so values computed at a bound count as inside.
_SLACK = 1e-9


def full_turn_joints(chain: Chain, bounds: str = 'reach') -> np.ndarray:
    """(n,) bool: joints whose `reach` (or `limits`) span a whole turn, so they wrap."""
    low, high = joint_bounds(chain, bounds)
    return high - low >= TURN - _SLACK


def joint_bounds(chain: Chain, bounds: str = 'reach') -> tuple[np.ndarray, np.ndarray]:
    """(n,) low and high (rad) of every joint's `reach` or software `limits`."""
    if bounds not in ('reach', 'limits'):
        raise ValueError(f"bounds must be 'reach' or 'limits', got {bounds!r}")
    pairs = np.array([getattr(joint, bounds) for joint in chain.joints], dtype=np.float64)
    return pairs[:, 0], pairs[:, 1]


def within_limits(chain: Chain, joints: np.ndarray, bounds: str = 'limits') -> np.ndarray:
    """(..., n) rad -> (...,) bool: every joint inside its software limits (or its reach)."""
    low, high = joint_bounds(chain, bounds)
    return np.all((joints >= low - _SLACK) & (joints <= high + _SLACK), axis=-1)


def into_limits(chain: Chain, joints: np.ndarray) -> np.ndarray:
    """(..., n) -> (..., n): full-turn joints moved by whole turns inside the software limits
    where that is possible, so the limits-first policy sees the in-limits twin of a solution."""
    low, high = joint_bounds(chain, 'limits')
    shifted = low + np.mod(joints - low, TURN)
    outside = (joints < low - _SLACK) | (joints > high + _SLACK)
    return np.where(full_turn_joints(chain) & outside & (shifted <= high), shifted, joints)


def turn_variants(chain: Chain, joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every whole-turn shift of full-turn joints that stays within reach.

    joints (k, n) -> variants (m, n) and, per variant, the index (m,) of the solution it came from
    (same pose, so the same errors).
    """
    low, high = joint_bounds(chain, 'reach')
    variants, sources = [joints], [np.arange(len(joints))]
    for index in np.flatnonzero(full_turn_joints(chain)):
        for turns in (-1.0, 1.0):
            shifted = joints.copy()
            shifted[:, index] += turns * TURN
            inside = (shifted[:, index] >= low[index] - _SLACK) & (
                shifted[:, index] <= high[index] + _SLACK
            )
            variants.append(shifted[inside])
            sources.append(np.flatnonzero(inside))
    return np.concatenate(variants), np.concatenate(sources)


def seed_distance(
    chain: Chain, joints: np.ndarray, seed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(k, n), (n,) rad -> wrap-aware distance (k,) and plain joint travel (k,), both rad."""
    difference = joints - seed
    wrapped = np.mod(difference + math.pi, TURN) - math.pi
    angular = np.where(full_turn_joints(chain), wrapped, difference)
    return np.linalg.norm(angular, axis=-1), np.linalg.norm(difference, axis=-1)


def rank(
    position_errors: np.ndarray,
    orientation_errors: np.ndarray,
    inside_limits: np.ndarray,
    tolerance: Tolerance,
    distances: tuple[np.ndarray, np.ndarray] | None = None,
    orientation_weight: float = 0.1,
) -> np.ndarray:
    """Order (k,) of k solutions, best first.

    Tolerance met, then inside the limits, then nearest to the seed (distances = wrap-aware
    distance and travel (k,) rad from `seed_distance`, when a seed is given) among those meeting
    the tolerance; otherwise the smallest error, weighted as in refinement (orientation_weight
    m/rad), so an unreachable target gets its nearest compromise.
    """
    error = position_errors + orientation_weight * orientation_errors
    error = np.where(np.isnan(error), np.inf, error)
    meets = tolerance.met(position_errors, orientation_errors)
    if distances is None:
        return np.lexsort((error, ~inside_limits, ~meets))
    distance, travel = (np.where(meets, value, error) for value in distances)
    return np.lexsort((error, travel, distance, ~inside_limits, ~meets))


def distinct(joints: np.ndarray, atol: float = DUPLICATE_ATOL) -> np.ndarray:
    """(k, n) -> (k,) bool: False for a solution within atol (rad, every joint) of an earlier one.

    Call on ranked solutions, so the better of two duplicates stays.
    """
    close = np.all(np.abs(joints[:, None] - joints[None]) < atol, axis=-1)
    return ~np.any(np.tril(close, -1), axis=-1)


def select(
    chain: Chain,
    joints: np.ndarray,
    position_errors: np.ndarray,
    orientation_errors: np.ndarray,
    tolerance: Tolerance,
    seed: np.ndarray | None = None,
    max_solutions: int = 1,
    orientation_weight: float = 0.1,
) -> Solutions:
    """Rank candidate solutions of one pose, drop duplicates, keep the best max_solutions.

    joints (k, n) rad with their errors (k,) m and (k,) rad; seed (n,) rad or None. Solutions
    the joints cannot physically take (outside `reach`) are dropped: the arm would not get there;
    so are those missing the tolerance when another meets it.
    """
    joints, sources = turn_variants(chain, joints)
    reachable = within_limits(chain, joints, 'reach')
    joints, sources = joints[reachable], sources[reachable]
    position_errors, orientation_errors = position_errors[sources], orientation_errors[sources]
    inside = within_limits(chain, joints)
    distances = None if seed is None else seed_distance(chain, joints, seed)
    order = rank(
        position_errors, orientation_errors, inside, tolerance, distances, orientation_weight
    )
    order = order[distinct(joints[order])]
    meets = tolerance.met(position_errors[order], orientation_errors[order])
    if meets.any():
        # Compromises that miss the target are only worth offering when nothing reaches it.
        order = order[meets]
    order = order[: max(1, max_solutions)]
    return Solutions(
        joints=joints[order],
        position_errors=position_errors[order],
        orientation_errors=orientation_errors[order],
        within_limits=inside[order],
        meets_tolerance=tolerance.met(position_errors[order], orientation_errors[order]),
    )


def best_per_pose(
    chain: Chain,
    joints: np.ndarray,
    position_errors: np.ndarray,
    orientation_errors: np.ndarray,
    tolerance: Tolerance,
    orientation_weight: float = 0.1,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The best of K candidates per pose, without a seed: (B, K, n), (B, K), (B, K) -> (B, n),
    (B,), (B,). Full-turn joints are first moved inside the limits where a whole turn allows;
    candidates outside the joints' reach come last."""
    joints = into_limits(chain, joints)
    error = position_errors + orientation_weight * orientation_errors
    error = np.where(np.isnan(error), np.inf, error)
    meets = tolerance.met(position_errors, orientation_errors)
    unreachable = ~within_limits(chain, joints, 'reach')
    best = np.lexsort((error, ~within_limits(chain, joints), ~meets, unreachable))[:, 0]
    rows = np.arange(len(joints))
    return joints[rows, best], position_errors[rows, best], orientation_errors[rows, best]
