"""Follow a Cartesian path: joint waypoints that reach every pose, keep the start's branch (or
go on through a singularity the way they were moving) and never jump.

Each waypoint is refined by Levenberg-Marquardt from the previous one (as it is, and carried on
at its last velocity), with the joints clamped to the software limits (a continuous joint goes on
past them: _path_bounds) and never wrapped: damped steps from the previous solution stay on its
branch, except through a singularity. Arms with
joints to spare keep them near the previous waypoint and off their limits; where the path still
stops short of a waypoint, it is followed again with the joints near a limit pulled harder, and
where it stops even so, their self-motion is searched (path_search). On an arm with no joints to
spare, where a path passes through a singularity (two branches meeting), it goes on the way its
joints were moving (SMOOTHEST_CONTINUATION); a path that stops or has a step standing out takes
the other branch where it passed close by a singularity, if that gets further (path_branches). A
waypoint that can only be reached with a jump (a branch change away from a singularity, a turn
through one) or not at all stops the path there, with the reason. The whole path is one compiled
call (a per-waypoint call from Python would cost more than the refinement).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import Chain, chain_difference
from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_angle_between
from iknet_core.metrics import SAME_SOLUTION_RAD, distinct_solutions
from iknet_core.solvers import kernels
from iknet_core.solvers.base import Solver, check_seed, kernel_ready
from iknet_core.solvers.path_branches import other_branches, starts_near_singularity
from iknet_core.solvers.path_search import (
    NARROW_SEARCH_OFFSETS,
    NARROW_SEARCH_WIDTH,
    SEARCH_OFFSETS,
    SEARCH_WIDTH,
    WIDER_SEARCH_OFFSETS,
    WIDEST_SEARCH_WIDTH,
    search_path,
)
from iknet_core.solvers.path_smoothing import (
    SMOOTHING_PASSES,
    mend_spikes,
    smooth_path,
    step_stands_out,
)
from iknet_core.solvers.path_timing import slide_units
from iknet_core.solvers.policy import (
    TURN,
    continuous_joints,
    continuous_nearest,
    into_limits,
    into_reach,
    joint_bounds,
)
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings, named

# Waypoint status codes, as the kernel writes them.
REACHED, MISSED, JUMPED, NOT_TRIED = 0, 1, 2, 3
STATUS_NAMES = ('reached', 'missed', 'jumped', 'not tried')
# The default bound on a joint step (rad): STEP_FACTOR times the path's largest waypoint spacing
# (position over the arm's length plus orientation, both in rad), at least MIN_MAX_STEP. Joints
# turn faster than the tool near a singularity (a 100-waypoint line to 0.05 rad short of the
# OM-X's straight elbow ends with a 0.11 rad step), hence the generous bound; a branch change
# away from a singularity moves a joint by tenths of a radian or more.
STEP_FACTOR = 8.0
MIN_MAX_STEP = 0.25
# Start joints up to this (rad; a slide: SLIDE_METRES_PER_RAD times it, m) past their reach are
# taken from the limit, as a tick past a software limit is: where a URDF gives no narrower
# software limits, the reach is the limit, and a real arm's joint states read past it by encoder
# noise (a Unitree Z1 at rest has two joints on theirs).
START_SLACK_RAD = 0.01
# On an arm with joints to spare, a waypoint reached from the previous one with a joint step at
# most STEADY_STEP_FACTOR times the last step is not tried again carried on at the last velocity:
# the pull back to the previous waypoint lands both tries on about the same solution, and the
# second cost the Panda a tenth of its rate (iknet-path-bench seeds 0 to 5, interleaved runs:
# 22,750 -> 25,100 waypoints/s; within 1.5x 3,144 -> 3,146 of 3,200 paths, seeds 0 to 15). On an
# arm with none, the velocity carries the follower on through a singularity (UR5 seeds 0 to 11
# without the second try where the first reached: one more path left its curve's branch). A
# first try that reached only with a step above max_step is always tried again.
STEADY_STEP_FACTOR = 1.5
# On an arm with no joints to spare, a path followed from a start near a singularity
# (path_branches.starts_near_singularity) with no step standing out is followed again from the
# start's twins, each only where its first MIRROR_CHECK waypoints have a largest step at least
# MIRROR_GAIN smaller than the path's (a mirrored path's steps are larger throughout), and kept
# where the whole path's is MIRROR_GAIN smaller: UR5 seeds 0 to 31, 6,399 -> 6,400 of 6,400
# paths within 1.5x the curve's largest step (seed 17 path 153, 1.75x -> 1.00x). The gain keeps
# ties (a joint both branches share taking the largest step, equal up to rounding) from moving
# a path onto the other branch for nothing.
MIRROR_CHECK = 10
MIRROR_GAIN = 0.01
# On an arm with no joints to spare, of the two tries that reach the waypoint within max_step
# (from the second waypoint after the start on: before it, the last step is the move from the
# start joints onto the path, not the path's velocity), the one that changes the joints'
# velocity least wins (the largest change of a joint's step from the last step), not the one
# nearest the previous waypoint. The two differ where they land on different solutions, two
# branches meeting near a singularity: there the nearest is often the branch that turns
# back off it, which then needs larger steps of the other joints; the smoothest goes on through
# it, as a smooth joint curve does. On 6,400 random UR5 paths (iknet-path-bench seeds 0 to 31),
# those within 1.5x their curve's largest step went from 6,386 to 6,399, at a higher rate (fewer
# paths have a step that stands out for path_branches to try twins for); example-robot-data's
# UR3, UR10 and Z1 (seeds 0 to 15) from 3,191, 3,195 and 3,199 to all 3,200; the OM-X's and
# SO-101's 3,200 stay within 1.5x. An arm with joints to spare keeps the nearest: its tries differ
# along the self-motion, not by branch (ranked the smoothest way, seeds 0 to 3 kept 799 of 800
# Panda paths within 1.5x, as the nearest did).
SMOOTHEST_CONTINUATION = True
# Redundant arms move their spare joints, per waypoint, this share of the way from the previous
# waypoint towards the middle of their limits: a 7-joint arm that only kept its joints near the
# previous waypoint drifted into its limits on 1 in 6 random paths (1 in 8 with a pull of 0.05).
# Since the retries below take such stops, the pull is weak: 0.05, summed over a path, drew the
# self-motion away from where the curve's joints are into regions where every step is larger. On
# 6,400 random Panda paths (iknet-path-bench seeds 0 to 31), those within 1.5x their curve's
# largest step went from 6,329 to 6,353 with 0.01 (seeds 8 to 31, not used to choose it: 4,745
# to 4,763; 0.02: 4,758, 0.03: 4,753, none: 4,754), with no stops, at a rate ~7 % higher
# (interleaved runs: it smooths and searches less); xArm7, 100 paths: 96 -> 98.
LIMIT_PULL = 0.01
# A path that still stops short of a waypoint on such an arm (17 of 20 such stops on random
# Panda paths: a spare joint pinned at a limit that a later target needs it past; the rest:
# refinement stalled just short of the tolerance) is followed again from its start with the pull
# weighted towards the joints near a limit (by 1 / (4 u (1 - u)), u the joint's place in its
# range), at these strengths until one goes through: on 200 random Panda paths, 184 -> 191
# followed (188 -> 194 on another 200; both with LIMIT_PULL at 0.05), with the same largest steps
# on the paths the first pass followed; the self-motion search (path_search) takes the rest.
RETRY_PULLS = (0.05, 0.1, 0.2, 0.5)
# The retries and the search run only where the stop is within reach: Levenberg-Marquardt with
# restarts inside the limits, from the start joints and from the last waypoint reached, gets
# within REACH_SLACK times the tolerance of it (a path leaving the workspace stops in ~5 ms
# instead of ~40 ms). From the start joints alone, to the tolerance, it missed 2 of the 5
# waypoints that stopped 2,400 random Panda paths (seeds 4 to 15, the default tolerance), one by
# 4.5e-6 m; the search linked both.
REACH_SLACK = 100.0
# A smoothed path on such an arm whose largest joint step is more than SPIKE_FACTOR times its
# median step (a smooth joint curve's was at most 1.88 times on 400 random Panda curves; paths of
# fewer than SPIKE_MIN_WAYPOINTS are not judged) has a spike the greedy follower walked into: its
# self-motion is searched too (path_search, SPIKE_SEARCH_WIDTH solutions per waypoint) with no
# joint step above SPIKE_BOUNDS times the median step, the tightest bound first, then the
# tightest again wider (SPIKE_RETRY_WIDTH), then under max_step (unless the path came from a
# search under it), until one links the whole path;
# that path is smoothed and kept where its largest step is smaller. Under max_step alone the
# search, which links by least travel, often keeps the spike. On 200 random Panda paths, 18
# were searched, and the paths within 1.5x their curve's largest step went from 89.0 % to
# 93.5 % with max_step alone, 94.5 % with the bounds first (90.0 to 94.5 and 96.5 % on another
# 200; 92.5 to 95.5 and 95.5 % on a third), at the same waypoints/s (interleaved runs: a search
# under a bound it cannot keep stops early); the spike search costs ~15 % of the rate. A factor
# of 2.5 searched 9 paths for 92.5 % and a width of 2 gave 92.5 % for half the time of 4 (both
# under max_step alone); with the bounds, widths of 6 and 8 gained 0.5 to 1 point for up to
# twice the time.
SPIKE_FACTOR = 2.0
SPIKE_MIN_WAYPOINTS = 10
SPIKE_SEARCH_WIDTH = 4
SPIKE_BOUNDS = (1.6, 2.0, 2.5)
# Where no bound links the path at that width, the tightest is tried once more SPIKE_RETRY_WIDTH
# wide before max_step: a narrow beam can miss the part of the self-motion that the bound leaves
# open. On 6,400 random Panda paths (iknet-path-bench seeds 0 to 31) it linked one more within
# 1.5x (6,353 -> 6,354: seed 0's path 1, from 2.04 to 1.01 times its curve's largest step), at
# no rate that interleaved runs could tell apart.
SPIKE_RETRY_WIDTH = SEARCH_WIDTH
# Then a path (of SPIKE_MIN_WAYPOINTS or more) whose largest step is more than PEAK_FACTOR times
# its median step is smoothed again with each joint's change weighted by 1 + (the change / the
# median step) ** PEAK_POWER (path_smoothing): least travel, with large changes dearer, and kept
# where its largest step is smaller. Least travel and the searches leave peaks where the greedy
# follower took the self-motion through a region in which the tool's motion needs large joint
# steps. On 200 random Panda paths, 155 were smoothed this way, and the paths within 1.5x their
# curve's largest step went from 96.5 to 99.0 % (97.0 to 98.0 and 96.0 to 97.5 % on two other
# 200) for ~14 % of the waypoints/s. A factor of 1.5 gave 98.0, 98.0 and 97.5 %; 1.0, 99.0, 98.0
# and 98.0 % for ~5 % more; one weight per step (from its largest change), 98.5, 98.0 and 97.5 %;
# a power of 3 or 6 passes did no better.
PEAK_FACTOR = 1.3
PEAK_POWER = 2.0
# A path whose largest step is still more than JUMP_FACTOR times its median step after all that has
# what is a jump in all but name (under max_step, which a path's large spacing makes generous): its
# self-motion is searched once more, SEARCH_WIDTH wide with the wider offsets
# (path_search.WIDER_SEARCH_OFFSETS), under SPIKE_BOUNDS, and kept where its largest step is
# smaller. On 3,200 random Panda paths (iknet-path-bench seeds 0 to 15), 7 had one (the largest
# 18.6 times its curve's largest step, another 10.9 and 6.9); none after, the largest ratio 2.48,
# and 3,141 instead of 3,135 within 1.5x, at the same rate (seeds 0 to 3 have none). Since
# STEADY_STEP_FACTOR (with two capped searches at 0.75 before this stage), 4 had one: 11.4 and 5.9
# times their curve's largest step, and two at 1.3 and 1.6 times.
JUMP_FACTOR = 3.0
# Last on such an arm (but for tighten, below), a path (of SPIKE_MIN_WAYPOINTS or more) whose
# largest step is still more than CAP_FACTOR times its median step is searched once more with no
# step above CAP_SHARE of its largest (path_search's narrow search), and the path found, smoothed,
# is kept where its largest step is smaller: the greedy follower can take the self-motion into a
# region where the whole path needs larger joint steps than its curve's, which no smoothing gets it
# out of. On 3,200 random Panda paths (iknet-path-bench seeds 0 to 15), those within 1.5x went from
# 3,154 to 3,169 (seeds 3 to 15, not looked at while choosing it: 2,562 to 2,573) for ~11 % of the
# waypoints/s (seeds 0 to 2, interleaved runs; the narrow first rescue search gained 12 %), in
# place of two searches 4 wide under 0.75 of the largest step, one before the weighted smoothing
# and one after it with the wider offsets. A factor of 1.4 gave 1,191 instead of 1,188 of seeds 0
# to 5's 1,200, for ~20 % of the rate; the search on every path left none of seeds 0 to 2's over
# 1.5x, at 2.35 ms a path (over half the rest's time). Measured again with every later stage in
# place: 1.3 took seeds 11 to 30 from 3,968 to 3,974 of 4,000 (seeds 3 to 10: 1,586 to 1,590 of
# 1,600) for 10 to 15 % of the rate, and 1.0 (every path) fixed no more, for 17 %: too little for
# the rate and for the bar's second use (below). In half of the misses left the curve passes near a
# singularity (least singular value under 0.002 of the greatest) that the follower goes round;
# path_search's beam over the whole path, 32 to 64 wide, took 8 to 11 of seeds 3 to 10's 14 within
# 1.5x at 55 to 146 ms a path, too slow for every path.
# On an arm with no joints to spare, CAP_FACTOR is also the bar under which a path's largest step
# no longer stands out, so its other twins are not tried (path_branches).
CAP_FACTOR = 1.5
CAP_SHARE = 0.85
# With tighten=True, a path followed to the end on an arm with joints to spare is searched once
# more, whatever its steps, under each of TIGHTEN_SHARES of its largest step in turn (16 wide,
# SEARCH_WIDTH, with the wider offsets, where the capped search above is 6 wide under 0.85) until
# one links it, and kept, smoothed, where its largest step is smaller: the follower can take the
# self-motion into a region where every step is larger than its curve's, which the path's own steps
# do not show (its largest need not stand out from its median: of 3,200 random Panda paths,
# iknet-path-bench seeds 0 to 15 at follow_path's default tolerance, 11 of the 20 over 1.5 times
# their curve's largest step were under CAP_FACTOR), so only a search on every path finds it. Those
# 20 went to 3 (shares 0.8: 5; 0.7 alone: 6; 0.7, 0.85, then 32 wide: 1), and seeds 16 to 19, not
# looked at while choosing it, from 7 of 800 to none, at 2.4 times the time a path (6.9 -> 16.7 ms,
# one thread); at iknet-path-bench's tolerance, from 3,180 to 3,198 of seeds 0 to 15's 3,200
# (xArm7, seed 0: 94.5 -> 98.5 % at 2.8 times the time; TIAGo Pro's left arm 96.5 -> 99.0 % at 2.0
# times). Too slow for the default, as the rate is part of the bar.
TIGHTEN_SHARES = (0.7, 0.85)
# Finally, on any arm, each inner waypoint whose larger step is more than MEND_FACTOR times the
# median step is solved again from the midpoint of its neighbours and kept where its larger step
# is smaller (path_smoothing.mend_spikes): near a singularity two branches come close, and the
# follower can take one waypoint on the other and come back on the next step. On 200 random UR5
# paths, those followed within 1.5x their curve's largest step went from 98.5 to 99.5 % (96.0 to
# 98.5 and 94.0 to 97.5 % on two other 200; most of the rest stopped where the curve left the
# start's branch at a singularity, which path_branches now follows); the Panda's from 99.0, 98.0
# and 97.5 to 99.0, 98.5 and 97.5 %; the rate is the same.
MEND_FACTOR = 1.5
# Runs of up to MEND_RUN consecutive waypoints are solved again the same way, from the line
# between their neighbours, after the single ones: the follower can take two or three waypoints
# on the nearby solution. On 2,400 random UR5 paths (seeds 0 to 11), those within 1.5x went from
# 2,397 to 2,398 (a run of two, 0.12 rad off); the Panda's and the OM-X's and the rates did not
# change.
MEND_RUN = 3


@dataclass(frozen=True)
class PathResult:
    """Joint waypoints (T, n) rad with their FK errors (T,) m and (T,) rad and a status per
    waypoint (STATUS_NAMES); failed_at is the first waypoint not reached (None if all were),
    reason says why. Joints from failed_at on are NaN; the errors at failed_at are the nearest
    miss, NaN after it. Orientation errors are NaN for a path of positions."""

    joints: np.ndarray
    position_errors: np.ndarray
    orientation_errors: np.ndarray
    status: np.ndarray
    max_step: float
    failed_at: int | None
    reason: str

    @property
    def success(self) -> bool:
        return self.failed_at is None

    @property
    def reached(self) -> int:
        """How many waypoints were reached, from the first: all of them, or up to failed_at."""
        return len(self.joints) if self.failed_at is None else self.failed_at

    @property
    def travel(self) -> float:
        """Joint motion along the waypoints reached (rad, summed over joints and steps): what
        `alternative_paths` ranks equally far paths by."""
        reached = self.joints[: self.failed_at]
        return float(np.abs(np.diff(reached, axis=0)).sum())


def alternative_paths(
    chain: Chain,
    targets: np.ndarray,
    starts: np.ndarray,
    settings: SolverSettings = DEFAULT_SETTINGS,
    max_step: float | None = None,
    *,
    origin: np.ndarray | None = None,
    tighten: bool = False,
) -> list[PathResult]:
    """follow_path from each of several start joints (M, n) rad, best first: paths followed to
    the end, then the ones that got furthest, then those with no step standing out like a jump
    (JUMP_FACTOR times the path's median), and among equals the least joint travel; with
    origin (n,) rad, the joints the arm is at, the move from there to a path's first waypoint
    counts in its travel. The starts are different solutions of the first waypoint: a
    solver's distinct solutions of it (`solve(..., max_solutions=M)`; with a mixture model's
    samples, many) or start_solutions', so one end-effector path gives several joint paths and
    the smoothest comes first. A start that stops where another gets through may come back as
    followed, not rescued (below): the best is what this ranks. tighten: follow_path's, for
    the best path alone (followed again from its start), at the cost of about one more path."""
    starts = np.atleast_2d(np.asarray(starts, dtype=np.float64))
    if not len(starts):
        raise ValueError('alternative_paths needs at least one start')
    if origin is not None:
        origin = check_seed(origin, chain, 'origin')
        # A solver's starts are within +-pi: a continuous joint's by the turns nearest the arm.
        starts = continuous_nearest(chain, starts, origin)
    # A start that stops is rescued (followed again, rescue and all) only where that is likely to
    # pay. On an arm with joints to spare (on these targets: positions are position-only): the
    # retries and self-motion searches, for the stopped start with the least travel so far where
    # that is below the best path's whole travel (a rule of thumb: a rescue plans the whole path
    # again). iknet-path-bench's Panda best of 8, seeds 0 and 1 (before the narrow searches): 3,675
    # and 3,796 waypoints/s, the paths within 1.5x as from the curve's start alone (99.0 and
    # 98.5 %); rescuing every stopped start below the best, 2,783 on seed 0 (most such rescues
    # fail, each after three searches; four since the narrow one), every stopped start at all,
    # 2,789 and 2,588 (before the third search); only where no start got through, ~5,400 and
    # ~6,200, but one path in 200 kept a 3x step where the curve's own start, rescued, had none. On
    # an arm with none: the twins near a singularity (path_branches), only where no start gets to
    # the end (a start that follows the path through is still tried on its twins where it starts
    # near a singularity, MIRROR_CHECK). The twins are the other branches, which the other starts
    # already are, and trying them for every stopped start cost a UR5 two thirds of its best of
    # 8's rate for the same paths.
    results = [
        follow_path(chain, targets, start, settings, max_step, rescue_where_stopped=False)
        for start in starts
    ]

    def cost(result: PathResult) -> float:
        """Joint travel, the move from origin to the first waypoint included: from where the
        arm is, a path that starts a long move away is no shortcut."""
        move = 0.0 if origin is None or not result.reached else np.abs(result.joints[0] - origin)
        return result.travel + float(np.sum(move))

    def jerky(result: PathResult) -> bool:
        """Followed to the end with a step standing out like a jump (JUMP_FACTOR)."""
        return result.success and _stands_out(result.joints, JUMP_FACTOR)

    spare = has_joints_to_spare(chain, targets, settings)
    through = [cost(result) for result in results if result.success]
    best = min(through, default=math.inf)
    rescued = [k for k, result in enumerate(results) if not result.success]
    # Else every stopped start is rescued: one must get through if any can, and without a jump
    # if any can (a Kinova Jaco2 path whose three starts that got through all turned the wrist
    # 1.21 rad in one step, 10 times the curve's largest, where its own start, taken on its
    # twin near the singularity, went through with none).
    if any(result.success and not jerky(result) for result in results):
        cheaper = [k for k in rescued if cost(results[k]) < best] if spare else []
        cheapest = min(cheaper, key=lambda k: cost(results[k]), default=None)
        rescued = [] if cheapest is None else [cheapest]
    for k in rescued:
        results[k] = follow_path(chain, targets, starts[k], settings, max_step)

    def rank(k: int) -> tuple[int, bool, float]:
        """Furthest first, then those with no step standing out like a jump, then the least
        travel."""
        return -results[k].reached, jerky(results[k]), cost(results[k])

    order = sorted(range(len(results)), key=rank)
    ranked = [results[k] for k in order]
    if tighten and spare and ranked[0].success:
        # The best alone: tightening lowers its largest step, not its rank's reach, and costs
        # 2 to 3 paths' time; every start's would cost that many times over.
        best_start = starts[order[0]]
        ranked[0] = follow_path(chain, targets, best_start, settings, max_step, tighten=True)
    return ranked


def has_joints_to_spare(
    chain: Chain, targets: np.ndarray, settings: SolverSettings = DEFAULT_SETTINGS
) -> bool:
    """Whether the chain has more joints than a path's targets (T, 7) poses or (T, 3) positions
    constrain under settings: the arms whose self-motion follow_path smooths, searches and
    tightens."""
    _, _, path_settings = _check_targets(targets, settings)
    return chain.n_joints > path_settings.task_dimensions


def start_solutions(
    chain: Chain,
    target: np.ndarray,
    count: int,
    settings: SolverSettings = DEFAULT_SETTINGS,
    seed: int = 0,
    solver: Solver | None = None,
    avoid: np.ndarray | None = None,
) -> np.ndarray:
    """Up to count distinct solutions (m, n) rad of one waypoint (7,) or (3,) as follow_path
    takes it, inside the software limits and its tolerance: the solver's first, when one is
    given (asked for count: a mixture model's samples give many), then Levenberg-Marquardt from
    count joint vectors drawn uniformly in the limits (seed). None within SAME_SOLUTION_RAD of
    avoid (n,) (the start joints, whose own path is followed anyway), and a continuous joint by
    the whole turns nearest it. Starts for alternative_paths."""
    if count < 1:
        raise ValueError(f'count must be at least 1, got {count}')
    solver_chain = getattr(solver, 'chain', chain)  # a Solver has one; a stand-in may not
    if solver_chain != chain:
        raise ValueError(
            f'the solver is for {solver_chain.name}, the path for {chain.name} '
            f'({chain_difference(solver_chain, chain)})'
        )
    if avoid is not None:
        avoid = check_seed(avoid, chain, 'avoid')
    positions, rotations, settings = _check_targets(np.asarray(target)[None], settings)
    low, high = joint_bounds(chain, 'limits')
    seeds = np.random.default_rng(seed).uniform(low, high, (count, chain.n_joints))
    if solver is not None:
        # Refined again with the path's settings, inside the limits: the solver's own may be
        # another tolerance, or past a limit.
        solutions = solver.solve(positions[0], rotations[0], max_solutions=count)
        seeds = np.concatenate([solutions.joints, seeds])
    refiner = Refiner(chain, replace(settings, restarts=0), bounds='limits')
    refined = refiner.refine(
        np.repeat(positions, len(seeds), 0), np.repeat(rotations, len(seeds), 0), seeds
    )
    found = refined.joints[refined.converged]
    if avoid is not None:
        # A continuous joint by the whole turns that take it nearest avoid: the same arm, which
        # a path from there would otherwise reach only by turning it round.
        found = continuous_nearest(chain, found, avoid)
        found = found[np.abs(found - avoid).max(-1) >= SAME_SOLUTION_RAD]
    return distinct_solutions(found)[:count]


def follow_path(
    chain: Chain,
    targets: np.ndarray,
    start: np.ndarray,
    settings: SolverSettings = DEFAULT_SETTINGS,
    max_step: float | None = None,
    smoothing_passes: int = SMOOTHING_PASSES,
    *,
    rescue_where_stopped: bool = True,
    tighten: bool = False,
) -> PathResult:
    """Joint waypoints for targets (T, 7) = x, y, z, qx, qy, qz, qw (m) or positions (T, 3),
    from the arm's current joints start (n,) rad; max_step (rad): the largest joint change
    between waypoints (default: from the path's spacing, see STEP_FACTOR); smoothing_passes:
    path_smoothing's, for an arm with joints to spare, then the searches and the weighted
    smoothing for a largest step that stands out (SPIKE_FACTOR, PEAK_FACTOR, JUMP_FACTOR,
    CAP_FACTOR), on
    an arm with none to spare the twins near a singularity (path_branches; from a start near
    one, MIRROR_CHECK), and on any arm the
    mending of single waypoints and short runs off their neighbours (MEND_FACTOR, MEND_RUN);
    0: the waypoints as followed, neither smoothed nor searched nor taken on a twin nor mended
    (a stopped path on an arm with joints to spare is still followed again and searched);
    tighten (with smoothing_passes > 0): on an arm with joints to spare, also search the
    self-motion of a path followed to the end for a lower largest step (TIGHTEN_SHARES): fewer
    paths with steps larger than they need, in 2 to 3 times the time (the Panda: 2.4);
    rescue_where_stopped=False: a path that stops is neither taken on a twin, nor followed
    again, nor searched (the twins still serve a step that stands out): alternative_paths,
    whose other starts may get through. ValueError naming the problem for an empty path,
    non-finite values or start joints outside their reach (start joints a little past a
    software limit are taken from the limit, as a real arm at rest may be)."""
    positions, rotations, settings = _check_targets(targets, settings)
    start = check_start(chain, start)
    if max_step is None:
        max_step = default_max_step(chain, positions, rotations, settings)
    if not max_step > 0.0:
        raise ValueError(f'max_step must be > 0 rad, got {max_step}')
    count = len(positions)
    bounds = _path_bounds(chain, start, count, max_step)
    arrays = kernels.ChainArrays.from_chain(chain)
    kernel_settings = settings.kernel()
    spare = chain.n_joints > settings.task_dimensions
    smoothest = SMOOTHEST_CONTINUATION and not spare

    def follow(
        pull: float,
        near_limits: bool,
        first: int = 0,
        first_joints: np.ndarray = start,
        end: int = count,
    ) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
        """The path followed from targets[first] up to targets[end] (excluded), from
        first_joints (n,); the waypoints before first are left for the caller (NaN, not
        tried), as are those from end on (which also count as where it stopped)."""
        joints = np.full((count, chain.n_joints), np.nan)
        errors = np.full((count, 2), np.nan)
        status = np.full(count, NOT_TRIED, dtype=np.int64)
        part = slice(first, end)
        failed = _follow(
            first_joints, positions[part], rotations[part], arrays.joints, arrays.tip, bounds,
            kernel_settings, float(max_step), pull, near_limits, smoothest, joints[part],
            errors[part], status[part],
        )  # fmt: skip
        return first + failed, joints, errors, status

    def twin_steps_less(path: np.ndarray, first: int, twin: np.ndarray) -> bool:
        """Whether path (T, n) left at targets[first] for the twin (n,) there, and followed on
        from it, has a largest step at least MIRROR_GAIN smaller than path's over the
        MIRROR_CHECK waypoints from first - 1 (the step onto the twin included): a cheap look
        ahead before following a twin to the end. False where the look ahead stops."""
        end = min(count, first + MIRROR_CHECK)
        reached, ahead, _, _ = follow(LIMIT_PULL, False, first, twin, end)
        if reached < end:
            return False
        ahead[first - 1] = path[first - 1]
        return _steps_less(ahead[first - 1 : end], path[first - 1 : end])

    failed, joints, errors, status = follow(LIMIT_PULL, False)
    followed = failed == count
    stands_out = not spare and followed and _stands_out(joints, SPIKE_FACTOR)
    if not spare and smoothing_passes > 0 and (stands_out if followed else rescue_where_stopped):
        # Near a singularity the start's branch meets another (path_branches): each twin
        # followed on from, after the path's own waypoints before it.
        path, path_errors, path_status = joints, errors, status
        # Where a followed path's step stands out, around it too: a branch change under a
        # max_step that the path's spacing made generous.
        largest = (int(np.argmax(joint_steps(path))),) if stands_out else ()
        for first, twin in other_branches(
            path[:failed], positions, rotations, arrays, bounds, settings, max_step, largest
        ):
            retry = follow(LIMIT_PULL, False, first, twin)
            for part, before in zip(retry[1:], (path, path_errors, path_status), strict=True):
                part[:first] = before[:first]
            if _goes_further(retry[0], retry[1], failed, joints, count):
                failed, joints, errors, status = retry
                if failed == count and not _stands_out(joints, CAP_FACTOR):
                    break  # followed, no step standing out: the rest would cost for little
    elif (
        not spare
        and smoothing_passes > 0
        and followed
        and starts_near_singularity(joints[0], arrays, settings)
    ):
        # Followed with nothing standing out, from a start near a singularity: with no velocity
        # there to choose a side by, the path can be the mirror of its motion, every step
        # larger (MIRROR_CHECK); the start's twins, each looked at ahead first.
        for first, twin in other_branches(
            joints, positions, rotations, arrays, bounds, settings, max_step, start_only=True
        ):
            if not twin_steps_less(joints, first, twin):
                continue
            retry = follow(LIMIT_PULL, False, first, twin)
            for part, before in zip(retry[1:], (joints, errors, status), strict=True):
                part[:first] = before[:first]
            if retry[0] == count and _steps_less(retry[1], joints):
                failed, joints, errors, status = retry
                break
    # Joints to spare, and the path stopped at a waypoint within reach inside the limits (else
    # nothing below could get past it): the retries, while it stops short of a waypoint (pulling
    # joints off their limits does not undo a jump), then the search of the self-motion
    # (path_search), which takes jumps too.

    @functools.cache  # asked again after the retries, often for the same waypoint
    def within_reach(waypoint: int) -> bool:
        """Restarts from the start joints and the last waypoint reached get within
        REACH_SLACK tolerances of the waypoint inside the limits."""
        refiner = _reach_refiner(chain, settings)
        seeds = np.stack([start, joints[waypoint - 1] if waypoint else start])
        refined = refiner.refine(
            np.repeat(positions[waypoint : waypoint + 1], 2, 0),
            np.repeat(rotations[waypoint : waypoint + 1], 2, 0),
            seeds,
            restarts=True,
        )
        tolerance = settings.tolerance
        return bool(
            (
                (refined.position_errors <= REACH_SLACK * tolerance.position)
                & (refined.orientation_errors <= REACH_SLACK * tolerance.orientation)
            ).any()
        )

    rescue = spare and rescue_where_stopped and failed < count and within_reach(failed)
    for pull in RETRY_PULLS if rescue else ():
        if failed == count or status[failed] != MISSED:
            break
        retry = follow(pull, True)
        if retry[0] > failed:  # got further: keep it, with the reason it stopped
            failed, joints, errors, status = retry

    def search(
        width: int, step_bound: float = math.inf, offsets: np.ndarray = SEARCH_OFFSETS
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """path_search's joints and errors for the whole path, no joint step above step_bound
        (rad) or max_step, its candidates seeded at offsets (rad); None where it stops."""
        searched, searched_errors = np.empty_like(joints), np.empty_like(errors)
        linked = search_path(
            start, positions, rotations, arrays.joints, arrays.tip, bounds, kernel_settings,
            float(min(step_bound, max_step)), width, offsets, searched, searched_errors,
        )  # fmt: skip
        return (searched, searched_errors) if linked == count else None

    def smooth(
        path: np.ndarray, path_errors: np.ndarray, stopped: bool, peak_power: float = 0.0
    ) -> None:
        """path_smoothing in place (an arm with joints to spare; else a no-op). Where the path
        stopped, its last reached waypoint stays: the reason was found from there."""
        smooth_path(
            path, positions[: len(path)], rotations[: len(path)], arrays.joints, arrays.tip,
            bounds, kernel_settings, float(max_step), smoothing_passes, stopped, path_errors,
            peak_power,
        )  # fmt: skip

    def lower_largest_step(
        path: np.ndarray,
        path_errors: np.ndarray,
        searches: list[tuple[int, float]],
        offsets: np.ndarray = SEARCH_OFFSETS,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The path searched (width, step bound in rad; offsets) by the first of searches that
        links it whole, then smoothed, where its largest step is smaller; else path as it was."""
        for width, bound in searches:
            found = search(width, bound, offsets)
            if found is not None:
                candidate, candidate_errors = found
                smooth(candidate, candidate_errors, stopped=False)
                return _lower_largest_step(candidate, candidate_errors, path, path_errors)
        return path, path_errors

    def spike_bounds(path: np.ndarray) -> list[float]:
        """SPIKE_BOUNDS times the path's median joint step (rad), those below max_step."""
        median_step = float(np.median(joint_steps(path)))
        return [f * median_step for f in SPIKE_BOUNDS if f * median_step < max_step]

    found = None
    searched = rescue and failed < count and within_reach(failed)
    rescue_searches = (
        (NARROW_SEARCH_WIDTH, NARROW_SEARCH_OFFSETS),
        (SEARCH_WIDTH, SEARCH_OFFSETS),
        (SEARCH_WIDTH, WIDER_SEARCH_OFFSETS),
        (WIDEST_SEARCH_WIDTH, WIDER_SEARCH_OFFSETS),
    )
    for width, offsets in rescue_searches if searched else ():
        found = search(width, offsets=offsets)
        if found is not None:
            break
    rescued = found is not None
    if rescued:
        failed, (joints, errors) = count, found
        status[:] = REACHED
    failed_at = None if failed == count else int(failed)
    if failed_at is not None:
        joints[failed_at:] = np.nan
    smooth(joints[:failed], errors[:failed], failed_at is not None)  # less joint travel
    if spare and smoothing_passes > 0 and failed_at is None:
        # A spike left in a smoothed path: its self-motion searched under step bounds.
        if _stands_out(joints, SPIKE_FACTOR):
            bounds_below = spike_bounds(joints)
            searches = [(SPIKE_SEARCH_WIDTH, bound) for bound in bounds_below]
            if bounds_below:  # the tightest (SPIKE_BOUNDS rise), wider
                searches.append((SPIKE_RETRY_WIDTH, bounds_below[0]))
            if not rescued:  # a rescued path was searched under max_step already
                searches.append((SPIKE_SEARCH_WIDTH, max_step))
            joints, errors = lower_largest_step(joints, errors, searches)
        # Peaks that still stand out: smoothed again, large joint changes weighted up.
        if _stands_out(joints, PEAK_FACTOR):
            candidate, candidate_errors = joints.copy(), errors.copy()
            smooth(candidate, candidate_errors, stopped=False, peak_power=PEAK_POWER)
            joints, errors = _lower_largest_step(candidate, candidate_errors, joints, errors)
        # A step that still stands out like a jump: the widest search, under the spike bounds.
        if _stands_out(joints, JUMP_FACTOR):
            searches = [(SEARCH_WIDTH, bound) for bound in spike_bounds(joints)]
            joints, errors = lower_largest_step(joints, errors, searches, WIDER_SEARCH_OFFSETS)
        # A largest step that still stands out: the narrow search, capped below it.
        if _stands_out(joints, CAP_FACTOR):
            cap = CAP_SHARE * _largest_step(joints)
            searches = [(NARROW_SEARCH_WIDTH, cap)]
            joints, errors = lower_largest_step(joints, errors, searches, NARROW_SEARCH_OFFSETS)
        if tighten:  # asked for: the self-motion searched under the largest step, whatever it is
            searches = [(SEARCH_WIDTH, share * _largest_step(joints)) for share in TIGHTEN_SHARES]
            joints, errors = lower_largest_step(joints, errors, searches, WIDER_SEARCH_OFFSETS)
    if smoothing_passes > 0:
        mend_spikes(
            joints[:failed], positions, rotations, arrays.joints, arrays.tip, bounds,
            kernel_settings, MEND_FACTOR, MEND_RUN, errors[:failed],
        )  # fmt: skip
    if settings.is_position_only:
        errors[:, 1] = np.nan  # against no orientation: meaningless
    return PathResult(
        joints=joints,
        position_errors=errors[:, 0],
        orientation_errors=errors[:, 1],
        status=np.array(STATUS_NAMES, dtype=object)[status],
        max_step=float(max_step),
        failed_at=failed_at,
        reason=_reason(failed_at, status, errors, max_step)
        + (
            ''
            if failed_at == 0 and status[0] == JUMPED
            else _pose_hint(chain, settings, failed_at)
        ),
    )


def smooth_joint_paths(
    chain: Chain, count: int, waypoints: int = 100, seed: int = 0
) -> np.ndarray:
    """(count, waypoints, n) smooth random joint curves inside the software limits (a continuous
    joint's about any centre in its turn, so they may go on past +-pi), whose FK
    makes test paths that a jump-free answer exists for: per joint, a sine of random phase,
    0.5 to 1 period and up to a quarter of the range about a centre in the middle half."""
    rng = np.random.default_rng(seed)
    low, high = joint_bounds(chain, 'limits')
    span = high - low
    shape = (count, 1, chain.n_joints)
    margin = np.where(continuous_joints(chain), 0.0, 0.25 * span)
    centre = rng.uniform(low + margin, high - margin, shape)
    amplitude = 0.25 * span * rng.uniform(0.3, 1.0, shape)
    periods, phase = rng.uniform(0.5, 1.0, shape), rng.uniform(0.0, 2.0 * math.pi, shape)
    s = np.linspace(0.0, 1.0, waypoints)[None, :, None]
    return centre + amplitude * np.sin(2.0 * math.pi * periods * s + phase)


def default_max_step(
    chain: Chain, positions: np.ndarray, rotations: np.ndarray, settings: SolverSettings
) -> float:
    """STEP_FACTOR times the largest spacing between consecutive targets, at least MIN_MAX_STEP
    (rad): position steps count over the arm's length, orientation steps as they are (unless
    the path is position-only)."""
    if len(positions) < 2:
        return MIN_MAX_STEP
    length = chain.stretched_length
    spacing = np.linalg.norm(np.diff(positions, axis=0), axis=-1) / max(length, 1e-9)
    if not settings.is_position_only:
        spacing = spacing + rotation_angle_between(rotations[1:], rotations[:-1])
    return max(MIN_MAX_STEP, STEP_FACTOR * float(spacing.max()))


def _check_targets(
    targets: np.ndarray, settings: SolverSettings
) -> tuple[np.ndarray, np.ndarray, SolverSettings]:
    targets = np.asarray(targets, dtype=np.float64)
    if targets.ndim != 2 or targets.shape[1] not in (3, 7):
        raise ValueError(
            f'a path is poses (T, 7) = x, y, z, qx, qy, qz, qw or positions (T, 3), got '
            f'{targets.shape}'
        )
    if len(targets) == 0:
        raise ValueError('the path is empty')
    bad = np.flatnonzero(~np.isfinite(targets).all(-1))
    if len(bad):
        raise ValueError(f'waypoint {bad[0]} of the path is not finite: {targets[bad[0]]}')
    positions = kernel_ready(targets[:, :3])
    if targets.shape[1] == 3:
        return positions, np.tile(np.eye(3), (len(targets), 1, 1)), settings.position_only()
    norms = np.linalg.norm(targets[:, 3:], axis=-1)
    bad = np.flatnonzero(norms < 1e-6)
    if len(bad):
        raise ValueError(f'waypoint {bad[0]} of the path has a zero quaternion')
    rotations = matrix_from_quaternion(targets[:, 3:] / norms[:, None])
    return positions, kernel_ready(rotations), settings


def check_start(chain: Chain, start: np.ndarray) -> np.ndarray:
    """Start joints (n,) as follow_path takes them: start_in_reach's, clamped into the software
    limits (a real arm may rest past a limit, and the path must keep to them). A trajectory
    starts from start_in_reach's joints, where the arm is."""
    return into_limits(chain, start_in_reach(chain, start))


def start_in_reach(chain: Chain, start: np.ndarray) -> np.ndarray:
    """Start joints (n,) checked to lie inside the joints' reach (within START_SLACK_RAD, taken
    onto it). A joint that turns whole turns is taken whole turns back into its reach: the same
    arm (a UR5's state counted past 2 pi). A continuous joint stays where it is, past +-pi or
    turns on: its path goes on from there, so the trajectory starts where the arm is.
    ValueError naming a start joint more than START_SLACK_RAD outside its reach."""
    start = check_seed(start, chain, 'start joints')
    continuous = continuous_joints(chain)
    start = np.where(continuous, start, into_reach(chain, start))
    low, high = joint_bounds(chain, 'reach')
    slack = START_SLACK_RAD * slide_units(chain)
    outside = np.flatnonzero(~continuous & ((start < low - slack) | (start > high + slack)))
    if len(outside):
        i = outside[0]
        raise ValueError(
            f'start joint {chain.joint_names[i]} = {start[i]:.4f} {chain.joints[i].unit} '
            f'is outside its reach [{low[i]:.4f}, {high[i]:.4f}]'
        )
    return np.where(continuous, start, np.clip(start, low, high))


def _path_bounds(chain: Chain, start: np.ndarray, count: int, max_step: float) -> np.ndarray:
    """The kernels' (n, 3) joint bounds along a path of count waypoints from start (n,): the
    software limits, clamped, never wrapped (a wrap is a jump); a continuous joint's widened
    about start by more than the path can turn it (count steps of max_step, none needing more
    than a turn), so it goes on past +-pi. Its spare-joint pull, towards the middle of the
    bounds, is then towards where it started."""
    low, high = joint_bounds(chain, 'limits')
    continuous = continuous_joints(chain)
    radius = count * min(max_step, TURN) + math.pi
    low = np.where(continuous, start - radius, low)
    high = np.where(continuous, start + radius, high)
    return np.stack([low, high, np.zeros_like(low)], -1)


@functools.lru_cache(maxsize=8)
def _reach_refiner(chain: Chain, settings: SolverSettings) -> Refiner:
    """follow_path's within-reach check's refiner, with restarts, inside the limits: kept per
    chain and settings, as building one costs more than the check."""
    restarts = max(settings.restarts, DEFAULT_SETTINGS.restarts)
    return Refiner(chain, replace(settings, restarts=restarts), bounds='limits')


def joint_steps(joints: np.ndarray) -> np.ndarray:
    """The largest joint change (rad) between consecutive waypoints: (..., T - 1) for joint
    waypoints (..., T, n), paths stacked or not; the measure of follow_path's max_step."""
    joints = np.asarray(joints)
    return np.abs(np.diff(joints, axis=-2)).max(-1, initial=0.0)


def _largest_step(joints: np.ndarray) -> float:
    return float(joint_steps(joints).max(initial=0.0))


def _lower_largest_step(
    candidate: np.ndarray, candidate_errors: np.ndarray, path: np.ndarray, errors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate path and its errors where its largest step is smaller than path's; else
    path and its errors: each later stage keeps only what lowers the largest step."""
    if _largest_step(candidate) < _largest_step(path):
        return candidate, candidate_errors
    return path, errors


def _steps_less(candidate: np.ndarray, path: np.ndarray) -> bool:
    """Whether the candidate waypoints' largest step is at least MIRROR_GAIN smaller than
    path's (not a tie within rounding)."""
    return _largest_step(candidate) < (1.0 - MIRROR_GAIN) * _largest_step(path)


def _goes_further(
    failed: int, joints: np.ndarray, failed_before: int, before: np.ndarray, count: int
) -> bool:
    """Whether a path that stops at failed (count: not at all) beats the one before: it gets
    further, or both reach the end and its largest step is smaller."""
    if failed != failed_before:
        return failed > failed_before
    return failed == count and _largest_step(joints) < _largest_step(before)


def _stands_out(joints: np.ndarray, factor: float) -> bool:
    """Whether the largest joint step of a path of at least SPIKE_MIN_WAYPOINTS is more than
    factor times its median step."""
    return len(joints) >= SPIKE_MIN_WAYPOINTS and step_stands_out(joints, factor)


def _reason(failed_at: int | None, status: np.ndarray, errors: np.ndarray, max_step: float) -> str:
    if failed_at is None:
        return ''
    position_error, orientation_error = errors[failed_at]
    if status[failed_at] == JUMPED and failed_at == 0:
        return (
            f'waypoint 0 is more than a joint step of {max_step:.3g} rad from the start joints: '
            'the path starts away from them; start it at its first waypoint (move the arm there '
            'first), or follow it from other starts (alternatives)'
        )
    if status[failed_at] == JUMPED:
        return (
            f'waypoint {failed_at} is reached only by a joint step above {max_step:.3g} rad: a '
            'branch change or a turn through a singularity'
        )
    # A path of positions has no orientation error to report (NaN).
    angle = '' if math.isnan(orientation_error) else f', {math.degrees(orientation_error):.3g} deg'
    previous = 'the previous one' if failed_at else 'the start joints'
    return (
        f'waypoint {failed_at} is not reached from {previous} (nearest: '
        f'{position_error * 1e3:.3g} mm{angle}): out of reach, outside the limits, or reachable '
        'only on another branch'
    )


def _pose_hint(chain: Chain, settings: SolverSettings, failed_at: int | None) -> str:
    """For a path of whole poses that stopped on an arm of fewer joints than a pose has degrees
    of freedom: most paths of poses are beyond it (a 5-joint arm cannot hold one orientation
    along a line), which the reason alone does not say."""
    if failed_at is None or settings.is_position_only or chain.n_joints >= 6:
        return ''
    return (
        f'; with {chain.n_joints} joints the arm takes a whole pose only where its orientation '
        'fits its position: for the positions alone, position_only'
    )


@njit(cache=True, nogil=True)
def _follow(
    start, positions, rotations, joints, tip, bounds, setting_values, max_step, pull,
    near_limits, smoothest, out, errors, status,
):  # fmt: skip
    """Fill out (T, n), errors (T, 2) and status (T,) waypoint by waypoint; returns the index
    of the first waypoint not reached, or T. pull, near_limits: _null_space_goal's; smoothest:
    of two reached solutions within max_step, the one that changes the joints' velocity least
    wins (SMOOTHEST_CONTINUATION), else the nearest."""
    settings = named(setting_values)
    n = start.shape[0]
    work = kernels.workspace(n)
    previous, before, trial = start.copy(), start.copy(), np.empty(n)
    spare = max(n - kernels.task_rows(settings), 0)
    null_work = (np.empty((n, 6)), np.empty((n, spare)), np.empty(spare), np.empty(n), np.empty(n))
    for t in range(positions.shape[0]):
        current = out[t]
        # The first target where the path starts at the arm's pose, or a target repeated: the
        # arm stays, rather than drifting along the self-motion with the pull. (Not any target
        # within the tolerance of the last joints: under a tolerance wider than the spacing the
        # arm would stop and go.)
        if t == 0 or _same_target(positions, rotations, t):
            position_error, orientation_error = kernels.pose_error(
                previous, positions[t], rotations[t], joints, tip
            )
            if kernels.meets(position_error, orientation_error, settings):
                current[:] = previous
                errors[t, 0], errors[t, 1] = position_error, orientation_error
                status[t] = REACHED
                before[:] = previous
                continue
        best_key, best_step = (3.0, np.inf), np.inf
        position_error = orientation_error = np.inf
        # From the previous waypoint, and from it carried on at its last velocity: of the
        # results reached within max_step, the nearest the previous waypoint wins (or the
        # smoothest), then the nearest reached beyond it (a jump), then the nearest miss
        # (STEADY_STEP_FACTOR: the first try may do).
        steady = 0.0
        for i in range(n):
            steady = max(steady, STEADY_STEP_FACTOR * abs(previous[i] - before[i]))
        for attempt in range(2 if t else 1):  # at the start there is no velocity yet
            if attempt and spare and best_key[0] == 0.0 and best_step <= steady:
                break  # reached at a steady step: carrying on at the velocity would do as well
            for i in range(n):
                trial[i] = previous[i] + attempt * (previous[i] - before[i])
            trial_errors = _solve_near(
                trial, previous, positions[t], rotations[t], joints, tip, bounds, settings, work,
                null_work, pull, near_limits,
            )  # fmt: skip
            trial_step = trial_turn = 0.0
            for i in range(n):
                trial_step = max(trial_step, abs(trial[i] - previous[i]))
                trial_turn = max(trial_turn, abs(trial[i] - 2.0 * previous[i] + before[i]))
            if not kernels.meets(trial_errors[0], trial_errors[1], settings):
                missed_by = trial_errors[0] + settings.orientation_weight * trial_errors[1]
                key = (2.0, _or_inf(missed_by))
            elif trial_step > max_step:
                key = (1.0, trial_step)
            else:
                key = (0.0, trial_turn if smoothest and t > 1 else trial_step)
            if key < best_key:
                best_key, best_step = key, trial_step
                current[:] = trial
                position_error, orientation_error = trial_errors
        errors[t, 0], errors[t, 1] = position_error, orientation_error
        if best_key[0] == 2.0:
            status[t] = MISSED
            return t
        if best_key[0] == 1.0:
            status[t] = JUMPED
            return t
        status[t] = REACHED
        before[:] = previous
        previous[:] = current
    return positions.shape[0]


@njit(cache=True, nogil=True)
def _same_target(positions, rotations, t):
    """Whether target t (t >= 1) is target t - 1 again."""
    for i in range(positions.shape[1]):
        if positions[t, i] != positions[t - 1, i]:
            return False
    for i in range(3):
        for j in range(3):
            if rotations[t, i, j] != rotations[t - 1, i, j]:
                return False
    return True


@njit(cache=True, nogil=True)
def _solve_near(
    q, previous, position, rotation, joints, tip, bounds, settings, work, null_work, pull,
    near_limits,
):  # fmt: skip
    """Levenberg-Marquardt on q (n,) in place; then, for an arm with joints to spare, one step
    in the null space of the Jacobian towards _null_space_goal and LM again (kept when it still
    reaches the target), so spare joints stay near the previous waypoint and off their limits.
    Returns the position (m) and orientation (rad) errors; null_work: its own buffers."""
    position_error, orientation_error, _, _ = kernels.levenberg_marquardt(
        q, position, rotation, joints, tip, bounds, settings, settings.max_iterations, False,
        work,
    )  # fmt: skip
    n = q.shape[0]
    spare = n > kernels.task_rows(settings)
    if not spare or not kernels.meets(position_error, orientation_error, settings):
        return position_error, orientation_error  # no null space, or nothing to keep
    reflectors, basis, along, saved, goal = null_work
    for i in range(n):
        goal[i] = _null_space_goal(q, previous, bounds, i, pull, near_limits)
    # step = Z Z^T goal, Z the null space's orthonormal basis.
    kernels.null_space_basis(q, joints, tip, kernels.task_rows(settings), work, reflectors, basis)
    for c in range(basis.shape[1]):
        total = 0.0
        for i in range(n):
            total += basis[i, c] * goal[i]
        along[c] = total
    saved[:] = q
    for i in range(n):
        for c in range(basis.shape[1]):
            q[i] += basis[i, c] * along[c]
    pulled_position_error, pulled_orientation_error, _, _ = kernels.levenberg_marquardt(
        q, position, rotation, joints, tip, bounds, settings, settings.max_iterations, False,
        work,
    )  # fmt: skip
    if kernels.meets(pulled_position_error, pulled_orientation_error, settings):
        return pulled_position_error, pulled_orientation_error
    q[:] = saved
    return position_error, orientation_error


@njit(cache=True, nogil=True)
def _or_inf(value):
    """NaN (a target FK cannot be compared with) ranks last."""
    return math.inf if math.isnan(value) else value


@njit(cache=True, nogil=True)
def _null_space_goal(q, previous, bounds, i, pull, near_limits):
    """How far joint i would like to move along the null space: back to the previous waypoint,
    and the share pull of the way from there towards the middle of its limits; near_limits:
    that share grows as the joint nears a limit (RETRY_PULLS), up to the whole way."""
    low, high = bounds[i, 0], bounds[i, 1]
    middle = 0.5 * (low + high)
    share = pull
    if near_limits:
        place = min(max((previous[i] - low) / max(high - low, 1e-12), 1e-3), 1.0 - 1e-3)
        share = min(pull / (4.0 * place * (1.0 - place)), 1.0)
    return previous[i] - q[i] + share * (middle - previous[i])
