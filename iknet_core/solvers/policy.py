"""The branch policy: which of several IK solutions comes first.

Solutions meeting the tolerance come first, then those inside the software limits, then the one
nearest to the seed (so a path does not flip between elbow up and down), else the smallest error
(position m + orientation_weight * orientation rad), so an unreachable target gets its nearest
compromise. A solution outside the joints' reach never meets the tolerance: the arm cannot take it.

Joints whose reach spans a full turn (OM-X joint1 reaches beyond pi) reach one pose at q and at
q - 2*pi. Both are valid, distinct solutions (a servo sent from 3.2 rad to -3.0 rad turns 6.2 rad),
and both are offered. Distances to the seed are wrap-aware: such joints count their shortest angle,
so the twins are equally near and the limits decide; the plain joint travel breaks remaining ties
(joint1 = pi or -pi, both inside the limits: the one on the seed's side comes first).

The ranking is compiled (numba): ranking a handful of candidates with numpy costs ~20-30 us of
per-call overhead per query, more than the refinement itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import Chain
from iknet_core.solvers.result import Solutions
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings, named

TURN = 2.0 * math.pi
# Slack (rad) when testing limits and reach, so values computed at a bound count as inside.
_SLACK = 1e-9


def joint_bounds(chain: Chain, bounds: str = 'reach') -> tuple[np.ndarray, np.ndarray]:
    """(n,) low and high (rad) of every joint's `reach` or software `limits`."""
    if bounds not in ('reach', 'limits'):
        raise ValueError(f"bounds must be 'reach' or 'limits', got {bounds!r}")
    pairs = np.array([getattr(joint, bounds) for joint in chain.joints], dtype=np.float64)
    return pairs[:, 0], pairs[:, 1]


def full_turn_joints(chain: Chain, bounds: str = 'reach') -> np.ndarray:
    """(n,) bool: revolute joints whose `reach` (or `limits`) span a whole turn, so they wrap."""
    low, high = joint_bounds(chain, bounds)
    revolute = np.array([not joint.prismatic for joint in chain.joints])
    return (high - low >= TURN - _SLACK) & revolute


def arm_pose_count(chain: Chain, joints: np.ndarray, tolerance: float) -> int:
    """How many arm poses solutions (k, n) are: rows the same up to whole turns of the joints
    that turn them (within tolerance rad) are one, as the ranking of several solutions takes
    them."""
    groups = np.empty(len(joints), dtype=np.int64)
    full_turn = full_turn_joints(chain).astype(np.float64)
    _arm_poses(np.ascontiguousarray(joints, dtype=np.float64), full_turn, tolerance, groups)
    return len(np.unique(groups))


def continuous_joints(chain: Chain) -> np.ndarray:
    """(n,) bool: the chain's continuous joints (URDF), which turn without end."""
    return np.array([joint.continuous for joint in chain.joints], dtype=bool)


def continuous_nearest(chain: Chain, joints: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """joints (..., n) rad with each continuous joint moved by the whole turns that take it
    nearest reference (..., n), the arm's joints: the same arm, which the arm then reaches
    without turning such a joint round (past +-pi where the arm's state is)."""
    joints = np.asarray(joints, dtype=np.float64)
    turns = np.round((np.asarray(reference) - joints) / TURN)
    return np.where(continuous_joints(chain), joints + turns * TURN, joints)


def into_limits(chain: Chain, joints: np.ndarray) -> np.ndarray:
    """joints (..., n) rad clamped into the software limits, but a continuous joint's, which
    turns on past them (as a path's start and a commanded goal are)."""
    joints = np.asarray(joints, dtype=np.float64)
    clamped = np.clip(joints, *joint_bounds(chain, 'limits'))
    return np.where(continuous_joints(chain), joints, clamped)


def into_reach(chain: Chain, joints: np.ndarray) -> np.ndarray:
    """joints (..., n) rad with each joint that turns whole turns and is past its reach taken
    back into it by the fewest whole turns: the same arm, nearest where it was (a continuous
    joint's state is often a little past +-pi, an unwrapped one many turns; a UR5's a tick past
    2 pi belongs near 2 pi, not near -2 pi). The other joints as they are."""
    joints = np.asarray(joints, dtype=np.float64)
    low, high = joint_bounds(chain, 'reach')
    wraps = full_turn_joints(chain)
    down = np.where(wraps & (joints > high + _SLACK), np.ceil((joints - high) / TURN), 0.0)
    up = np.where(wraps & (joints < low - _SLACK), np.ceil((low - joints) / TURN), 0.0)
    return joints + (up - down) * TURN


class BranchPolicy:
    """The policy for one chain and its settings, bounds precomputed."""

    def __init__(self, chain: Chain, settings: SolverSettings = DEFAULT_SETTINGS) -> None:
        self.chain = chain
        self.settings = settings
        self.tolerance = settings.tolerance
        # Rows: low, high of the limits, then of the reach, widened by the slack.
        limits, reach = joint_bounds(chain, 'limits'), joint_bounds(chain, 'reach')
        self._bounds = np.array([limits[0], limits[1], reach[0], reach[1]])
        self._bounds += np.array([-_SLACK, _SLACK, -_SLACK, _SLACK])[:, None]
        full_turn = full_turn_joints(chain)
        self._full_turn = full_turn.astype(np.float64)
        # Every combination of -1, 0, +1 turns of the full-turn joints, no shift first: (m, n) rad.
        turns = [(-1.0, 0.0, 1.0) if wraps else (0.0,) for wraps in full_turn]
        shifts = np.array(list(itertools.product(*turns))) * TURN
        self._shifts = shifts[np.argsort(np.abs(shifts).sum(1), kind='stable')]
        self._settings = settings.kernel()
        self._no_seed = np.zeros(chain.n_joints)
        # Load (or compile, the first time ever) the kernels now rather than in the first query.
        zero = np.zeros((1, 1, chain.n_joints))
        self.select(zero[0], np.zeros(1), np.zeros(1), seed=self._no_seed)
        self.best_per_pose(zero, np.zeros((1, 1)), np.zeros((1, 1)))

    @property
    def turn_variants(self) -> int:
        """Whole-turn variants ranked per candidate when several solutions are asked for (3 **
        the full-turn joints; 1 without any)."""
        return len(self._shifts)

    @property
    def reach_bounds(self) -> np.ndarray:
        """(2, n) low and high of what the joints physically take (rad, with the slack)."""
        return self._bounds[2:4]

    @property
    def limits_inside_reach(self) -> bool:
        """Some joint's software limits are narrower than its reach: an answer can reach the
        target inside the reach but outside the limits (soft limits, a hand-guided reach)."""
        limits, reach = self._bounds[0:2], self._bounds[2:4]
        return bool((limits[0] > reach[0]).any() or (limits[1] < reach[1]).any())

    def within_limits(self, joints: np.ndarray) -> np.ndarray:
        """(..., n) rad -> (...,) bool: every joint inside its software limits."""
        return ((joints >= self._bounds[0]) & (joints <= self._bounds[1])).all(-1)

    def within_reach(self, joints: np.ndarray) -> np.ndarray:
        """(..., n) rad -> (...,) bool: every joint inside what it physically takes."""
        return ((joints >= self._bounds[2]) & (joints <= self._bounds[3])).all(-1)

    def select(
        self,
        joints: np.ndarray,
        position_errors: np.ndarray,
        orientation_errors: np.ndarray,
        seed: np.ndarray | None = None,
        max_solutions: int = 1,
    ) -> Solutions:
        """Rank candidate solutions of one pose, drop duplicates, keep the best max_solutions.

        joints (k, n) rad with their errors (k,) m and (k,) rad; seed (n,) rad or None. Whole-turn
        twins within reach are added; candidates missing the tolerance are dropped when another
        meets it.
        """
        joints = np.ascontiguousarray(joints, dtype=np.float64)
        position_errors = np.asarray(position_errors, dtype=np.float64)
        orientation_errors = np.asarray(orientation_errors, dtype=np.float64)
        if joints.ndim != 2 or joints.shape[1] != self.chain.n_joints:
            raise ValueError(f'expected joints (k, {self.chain.n_joints}), got {joints.shape}')
        return Solutions(
            *select_candidates(
                joints,
                position_errors,
                orientation_errors,
                *self.kernel_arguments(seed, max_solutions),
            )
        )

    def kernel_arguments(self, seed: np.ndarray | None, max_solutions: int) -> tuple:
        """What `select_candidates` takes after the candidates, for kernels that rank inside."""
        return (
            self._shifts,
            self._bounds,
            self._full_turn,
            self._settings,
            self._no_seed if seed is None else np.asarray(seed, dtype=np.float64),
            seed is not None,
            max(1, max_solutions),
        )

    def best_per_pose(
        self, joints: np.ndarray, position_errors: np.ndarray, orientation_errors: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The best of K candidates per pose, without a seed, as `select` would rank them:
        (B, K, n) rad, (B, K) m, (B, K) rad -> (B, n), (B,), (B,)."""
        joints = np.ascontiguousarray(joints, dtype=np.float64)
        position_errors = np.ascontiguousarray(position_errors, dtype=np.float64)
        orientation_errors = np.ascontiguousarray(orientation_errors, dtype=np.float64)
        best = np.empty((len(joints), joints.shape[2]))
        sources = np.empty(len(joints), dtype=np.int64)
        _best_per_pose(
            joints,
            position_errors,
            orientation_errors,
            self._shifts,
            self._bounds,
            self._full_turn,
            self._settings,
            best,
            sources,
        )
        rows = np.arange(len(joints))
        return best, position_errors[rows, sources], orientation_errors[rows, sources]


@njit(cache=True)
def _shift_order(shift, n):
    """Where shift (n,) rad comes in BranchPolicy's whole-turn shifts: fewest turns first, then
    itertools.product's order of -1, 0, +1 turns per joint."""
    turns = index = 0.0
    for j in range(n):
        count = round(shift[j] / TURN)
        turns += abs(count)
        index = 3.0 * index + count + 1.0
    return turns * 3.0**n + index


@njit(cache=True)
def _best_shift(q, bounds, full_turn, seed, shift):
    """Fill shift (n,) with the whole-turn shift that the enumeration of every variant would
    rank first for candidate q (n,) (up to rounding: twins a few ulps apart in travel to the
    seed tie there and differ here), nearest the seed (zeros without one); returns whether
    q + shift is within reach.

    Each key of the policy is a per-joint condition (reach, limits) or a sum over joints
    (travel to the seed), so the best variant is chosen joint by joint: 3 tries per full-turn
    joint instead of 3**n variants (729 on a UR5, ~12 us per query)."""
    n = q.shape[0]
    every_reachable = every_inside = True
    for j in range(n):
        reachable = inside = False
        for t in range(3 if full_turn[j] > 0.0 else 1):
            value = q[j] + (0.0, -TURN, TURN)[t]
            if bounds[2, j] <= value <= bounds[3, j]:
                reachable = True
                inside = inside or bounds[0, j] <= value <= bounds[1, j]
        every_reachable = every_reachable and reachable
        every_inside = every_inside and inside
    for j in range(n):
        shift[j] = 0.0
    if not every_reachable:
        return False  # only the unshifted candidate is offered then
    for j in range(n):
        best = math.inf
        for t in range(3 if full_turn[j] > 0.0 else 1):
            offset = (0.0, -TURN, TURN)[t]
            value = q[j] + offset
            if not bounds[2, j] <= value <= bounds[3, j]:
                continue
            if every_inside and not bounds[0, j] <= value <= bounds[1, j]:
                continue
            cost = (value - seed[j]) ** 2
            if cost < best:
                best, shift[j] = cost, offset
    return True


@njit(cache=True)
def _wrapped(angle):
    """angle (rad) taken whole turns into [-pi, pi)."""
    return (angle + math.pi) % TURN - math.pi


@njit(cache=True)
def _describe(
    candidate, source, position_error, orientation_error, reachable, bounds, full_turn, settings,
    seed, has_seed, flags, keys,
):  # fmt: skip
    """Fill flags (2,) = (inside limits, meets tolerance) and keys[:7] of one candidate (n,),
    a whole-turn variant of source (n,); returns its squared travel to the seed (zeros without
    one), which ranks a candidate's twins (_twin_before)."""
    inside = True
    distance = travel = 0.0
    for j in range(candidate.shape[0]):
        value = candidate[j]
        inside = inside and bounds[0, j] <= value <= bounds[1, j]
        difference = value - seed[j]
        travel += difference * difference
        if full_turn[j] > 0.0:
            # From the source, so every twin has the very same distance (not one rounded
            # differently) and the travel below decides between them.
            difference = _wrapped(source[j] - seed[j])
        distance += difference * difference
    error = position_error + settings.orientation_weight * orientation_error
    if math.isnan(error):
        error = math.inf
    meets = (
        reachable
        and position_error <= settings.position_tolerance
        and orientation_error <= settings.orientation_tolerance
    )
    near = has_seed and meets
    flags[0], flags[1] = inside, meets
    keys[0] = 0.0 if reachable else 1.0
    keys[1] = 0.0 if meets else 1.0
    # Among solutions that meet the tolerance the limits come first; among misses the nearest
    # pose does (the network's best guess, the nearest reachable compromise).
    keys[2] = (0.0 if inside else 1.0) if meets else error
    outside = 0.0 if inside else 1.0
    keys[3] = 0.0  # a twin of a better variant of the same candidate: _rank's
    keys[4] = math.sqrt(distance) if near else (error if meets else outside)
    keys[5] = math.sqrt(travel) if near else error
    keys[6] = error
    return travel


@njit(cache=True)
def _rank(
    joints,
    position_errors,
    orientation_errors,
    shifts,
    bounds,
    full_turn,
    settings,
    seed,
    has_seed,
    candidates,
    sources,
    flags,
    chosen,
):
    """The policy for one pose; returns how many of chosen (max,) it filled.

    joints (k, n), errors (k,), shifts (m, n) whole turns, bounds (4, n) = limits low, high,
    reach low, high; settings: a KernelSettings (tolerances, orientation weight, duplicate
    tolerance). Fills candidates with the turn variants (unshifted ones always, shifted ones
    when within reach; for one solution only each candidate's best variant, so (k, n) is
    enough), sources with the joints row each came from, flags (.., 2) with (inside limits,
    meets tolerance), and chosen with candidate rows, best first (each candidate's whole-turn
    twins after the other candidates: _rank_twins_after).
    """
    k, n = joints.shape
    every_variant = chosen.shape[0] > 1
    # Keys, compared in order: outside reach, misses, outside limits, a twin, primary,
    # secondary, error, the shift's place (so both ways of filling rank ties alike).
    keys = np.empty((k * shifts.shape[0] if every_variant else k, 8))
    travels = np.empty(keys.shape[0])  # squared, to the seed (zeros without one)
    shift = np.empty(n)
    count = 0
    for s in range(shifts.shape[0] if every_variant else 1):
        for i in range(k):
            if every_variant:
                shift[:] = shifts[s]
                reachable = True
                for j in range(n):  # first, as most whole-turn variants fall outside the reach
                    value = joints[i, j] + shift[j]
                    reachable = reachable and bounds[2, j] <= value <= bounds[3, j]
                if not (reachable or s == 0):
                    continue
            else:
                reachable = _best_shift(joints[i], bounds, full_turn, seed, shift)
            for j in range(n):
                candidates[count, j] = joints[i, j] + shift[j]
            travels[count] = _describe(
                candidates[count],
                joints[i],
                position_errors[i],
                orientation_errors[i],
                reachable,
                bounds,
                full_turn,
                settings,
                seed,
                has_seed,
                flags[count],
                keys[count],
            )
            keys[count, 7] = _shift_order(shift, n)
            sources[count] = i
            count += 1
    if every_variant:
        groups = np.empty(k, dtype=np.int64)
        _arm_poses(joints, full_turn, settings.duplicate_tolerance, groups)
        _rank_twins_after(keys, travels, flags, sources, groups, count)
    # Best first by selection, not a full sort: one pass per pick, and ties keep the order
    # above (unshifted first). A UR5's six whole-turn joints give 729 variants per candidate.
    duplicate = settings.duplicate_tolerance
    used = np.zeros(count, dtype=np.bool_)
    filled = 0
    while filled < chosen.shape[0]:
        row = -1
        for c in range(count):
            if not used[c] and (row < 0 or _before(keys, c, row)):
                row = c
        if row < 0:
            break
        used[row] = True
        if filled and flags[chosen[0], 1] and not flags[row, 1]:
            break  # only misses left after a solution that meets the tolerance
        unique = True
        for c in range(filled):
            close = True
            for j in range(n):
                if abs(candidates[row, j] - candidates[chosen[c], j]) >= duplicate:
                    close = False
                    break
            if close:
                unique = False
                break
        if unique:
            chosen[filled] = row
            filled += 1
    return filled


@njit(cache=True)
def _arm_poses(joints, full_turn, tolerance, groups):
    """groups (k,): for each row of joints (k, n), the lowest row of its arm pose: rows every
    joint of which is within tolerance (rad) of another's, a joint that turns whole turns up to
    whole turns (two samples or restarts can end a turn apart), linked. Rows are compared only
    with those whose first joint is within tolerance, in sorted order (all pairs took 11 ms for
    1,365 candidates); a row with a NaN is its own."""
    k, n = joints.shape
    for i in range(k):
        groups[i] = i
    wraps = False
    for j in range(n):
        wraps = wraps or full_turn[j] > 0.0
    if not wraps or k < 2:
        return  # without whole turns the duplicates' own check suffices
    key = np.empty(k)
    for i in range(k):
        key[i] = joints[i, 0]
        if full_turn[0] > 0.0:
            key[i] = _wrapped(key[i])
    order = np.argsort(key)
    for a in range(k):
        i = order[a]
        for b in range(a + 1, k + a):  # on past the end for a first joint that wraps
            j = order[b % k]
            gap = key[j] - key[i] + (TURN if b >= k else 0.0)
            if math.isnan(gap):
                continue  # a row with a NaN (sorted last): on to the rows past the end
            if not gap < tolerance:
                break
            if _same_arm_pose(joints, full_turn, tolerance, i, j):
                _link(groups, i, j)
            if b >= k - 1 and full_turn[0] == 0.0:
                break
    for i in range(k):
        groups[i] = _root(groups, i)


@njit(cache=True)
def _same_arm_pose(joints, full_turn, tolerance, a, b):
    for j in range(joints.shape[1]):
        difference = joints[a, j] - joints[b, j]
        if full_turn[j] > 0.0:
            difference = _wrapped(difference)
        if not abs(difference) < tolerance:  # NaN: not the same
            return False
    return True


@njit(cache=True)
def _root(groups, i):
    while groups[i] != i:
        groups[i] = groups[groups[i]]
        i = groups[i]
    return i


@njit(cache=True)
def _link(groups, a, b):
    """Union of a's and b's sets, the lower root the root."""
    a, b = _root(groups, a), _root(groups, b)
    if a < b:
        groups[b] = a
    elif b < a:
        groups[a] = b


@njit(cache=True)
def _rank_twins_after(keys, travels, flags, sources, groups, count):
    """Mark (keys[:, 3] = 1) every candidate of an arm pose (groups of the candidates' sources)
    but its best: the same arm pose with joints turned whole turns, which comes after each other
    arm pose's best (the limits and the tolerance still first). Asked for several solutions, an
    arm with several joints that turn whole turns otherwise got its best pose's 2 ** joints
    twins (a Kinova Jaco2's three: 8 asked for, one arm pose), and twins from two samples took
    the places of other arm poses. Each source row's best variant is the one _best_shift takes
    for one solution (_twin_before: nearest the seed, zeros without one, so within +-pi where
    the reach allows, not a turn or more out); of the rows of an arm pose, the best ranked
    (_before), as for one solution."""
    k = groups.shape[0]
    row_best = np.full(k, -1, dtype=np.int64)
    for c in range(count):
        i = sources[c]
        if row_best[i] < 0 or _twin_before(keys, travels, flags, c, row_best[i]):
            row_best[i] = c
    best = np.full(k, -1, dtype=np.int64)
    for i in range(k):
        c, g = row_best[i], groups[i]
        if c >= 0 and (best[g] < 0 or _before(keys, c, best[g])):
            best[g] = c
    for c in range(count):
        if best[groups[sources[c]]] != c:
            keys[c, 3] = 1.0


@njit(cache=True)
def _twin_before(keys, travels, flags, a, b):
    """Variant a of a candidate is better than its variant b, as _best_shift chooses one: within
    reach, meeting the tolerance, inside the limits (flags[:, 0], a miss's too), then nearest
    the seed."""
    for column in range(3):
        if keys[a, column] != keys[b, column]:
            return keys[a, column] < keys[b, column]
    if flags[a, 0] != flags[b, 0]:
        return flags[a, 0]
    if travels[a] != travels[b]:
        return travels[a] < travels[b]
    return _before(keys, a, b)


@njit(cache=True)
def select_candidates(
    joints,
    position_errors,
    orientation_errors,
    shifts,
    bounds,
    full_turn,
    setting_values,
    seed,
    has_seed,
    max_solutions,
):
    """_rank with its buffers, and the chosen rows gathered in Solutions' field order: one
    compiled call, where numpy's fancy indexing of a handful of rows costs several us each.
    The arguments after the errors are BranchPolicy.kernel_arguments()."""
    settings = named(setting_values)
    # Every whole-turn variant is a candidate only when several solutions are asked for.
    count = joints.shape[0] * (shifts.shape[0] if max_solutions > 1 else 1)
    candidates = np.empty((count, joints.shape[1]))
    sources = np.empty(count, dtype=np.int64)
    flags = np.empty((count, 2), dtype=np.bool_)
    # No more than the candidates can be chosen: SolveIK's max_solutions is a uint32, and a
    # buffer for 4 billion rows failed the request with a MemoryError.
    chosen = np.empty(min(max_solutions, count), dtype=np.int64)
    filled = _rank(
        joints,
        position_errors,
        orientation_errors,
        shifts,
        bounds,
        full_turn,
        settings,
        seed,
        has_seed,
        candidates,
        sources,
        flags,
        chosen,
    )
    # Gathered by a loop: fancy indexing allocates an index array and a copy per field, and
    # allocations dominate a call made on a cold cache (a server woken by its next request).
    best = np.empty((filled, joints.shape[1]))
    best_position_errors, best_orientation_errors = np.empty(filled), np.empty(filled)
    within_limits, meets_tolerance = np.empty(filled, np.bool_), np.empty(filled, np.bool_)
    for rank in range(filled):
        row = chosen[rank]
        best[rank] = candidates[row]
        best_position_errors[rank] = position_errors[sources[row]]
        best_orientation_errors[rank] = orientation_errors[sources[row]]
        within_limits[rank], meets_tolerance[rank] = flags[row, 0], flags[row, 1]
    return best, best_position_errors, best_orientation_errors, within_limits, meets_tolerance


@njit(cache=True)
def _before(keys, a, b):
    """Row a of keys sorts strictly before row b (lexicographic)."""
    for column in range(keys.shape[1]):
        if keys[a, column] != keys[b, column]:
            return keys[a, column] < keys[b, column]
    return False


@njit(cache=True)
def _best_per_pose(
    joints,
    position_errors,
    orientation_errors,
    shifts,
    bounds,
    full_turn,
    setting_values,
    best,
    sources,
):
    """_rank without a seed for every pose of joints (B, K, n); fills best (B, n), sources (B,)."""
    settings = named(setting_values)
    count, k, n = joints.shape
    candidates = np.empty((k, n))  # one solution per pose: each candidate's best variant
    origins = np.empty(k, dtype=np.int64)
    flags = np.empty((k, 2), dtype=np.bool_)
    chosen = np.empty(1, dtype=np.int64)
    no_seed = np.zeros(n)
    for b in range(count):
        _rank(
            joints[b],
            position_errors[b],
            orientation_errors[b],
            shifts,
            bounds,
            full_turn,
            settings,
            no_seed,
            False,
            candidates,
            origins,
            flags,
            chosen,
        )
        best[b] = candidates[chosen[0]]
        sources[b] = origins[chosen[0]]
