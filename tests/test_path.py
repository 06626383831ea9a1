import cmath
import inspect
import math

import numpy as np
import pytest
from chain_helpers import omx_with_one_turn_base

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.transforms import matrix_from_quaternion, quaternion_from_matrix
from iknet_core.metrics import SAME_SOLUTION_RAD, distinct_solutions
from iknet_core.solvers import AnalyticSolver, Refiner, SolverSettings
from iknet_core.solvers.path import (
    alternative_paths,
    follow_path,
    smooth_joint_paths,
    start_solutions,
)
from iknet_core.solvers.path_timing import time_stamps
from iknet_core.solvers.policy import joint_bounds

LOW, HIGH = joint_bounds(OMX_CHAIN, 'limits')


def elbow_bend(q: np.ndarray) -> np.ndarray:
    """(..., 4) -> (...,): the OM-X elbow's angle from straight; its sign is the branch."""
    geometry = OmxAnalyticIK(OMX_CHAIN).geometry
    twist = cmath.phase(geometry.upper) - cmath.phase(geometry.fore)
    return q[..., 2] + twist


def line_towards_straight_elbow(bend: float, beyond: float = 0.0, count: int = 100):
    """Poses (count, 7) on a straight line from a bent elbow (sign of bend) to 0.05 rad short of
    straight at a fixed tool pitch, continued `beyond` m past that point; and the start joints."""
    geometry = OmxAnalyticIK(OMX_CHAIN).geometry
    twist = cmath.phase(geometry.upper) - cmath.phase(geometry.fore)
    pitch = 0.0
    start = np.array([0.2, 0.0, bend - twist, 0.0])
    start[3] = pitch - start[1] - start[2]
    near = np.array([0.2, -0.3, np.sign(bend) * 0.05 - twist, 0.0])
    near[3] = pitch - near[1] - near[2]
    (a, b), rotation = forward_kinematics(OMX_CHAIN, np.stack([start, near]))
    direction = (b - a) / np.linalg.norm(b - a)
    end = b + beyond * direction
    positions = a + np.linspace(0.0, 1.0, count)[:, None] * (end - a)
    quaternion = quaternion_from_matrix(rotation[0])
    return np.concatenate([positions, np.broadcast_to(quaternion, (count, 4))], -1), start


def test_random_smooth_paths_are_followed_exactly_without_jumps():
    curves = smooth_joint_paths(OMX_CHAIN, count=20, waypoints=100, seed=1)
    for curve in curves:
        result = follow_path(OMX_CHAIN, pose_from_joints(OMX_CHAIN, curve), curve[0])
        assert result.success, result.reason
        assert (result.status == 'reached').all()
        assert result.position_errors.max() <= 1e-6
        assert ((result.joints >= LOW - 1e-9) & (result.joints <= HIGH + 1e-9)).all()
        steps = np.abs(np.diff(result.joints, axis=0)).max()
        assert steps <= 1.5 * np.abs(np.diff(curve, axis=0)).max()


def line_of_positions_and_starts():
    """A line of positions for the OM-X (one joint to spare), the position-only settings, and
    exact solutions of its first point from seeds spread over the joints: every tool pitch
    reaches it, so different starts, and different joint paths."""
    a, b = np.array([0.2, -0.05, 0.12]), np.array([0.2, 0.05, 0.12])
    positions = a + np.linspace(0.0, 1.0, 40)[:, None] * (b - a)
    settings = SolverSettings().position_only()
    seeds = np.array([[0.0, s, 0.0, -s] for s in (-0.8, -0.3, 0.2, 0.7)])
    refined = Refiner(OMX_CHAIN, settings).refine(
        np.repeat(positions[:1], len(seeds), 0), np.repeat(np.eye(3)[None], len(seeds), 0), seeds
    )
    return positions, settings, refined.joints[refined.converged]


def test_alternative_paths_from_every_solution_of_the_first_waypoint_come_smoothest_first():
    positions, settings, starts = line_of_positions_and_starts()
    results = alternative_paths(OMX_CHAIN, positions, starts, settings)
    assert len(results) == len(starts) >= 2
    reached = [len(r.joints) if r.success else r.failed_at for r in results]
    assert reached == sorted(reached, reverse=True) and results[0].success
    followed = [r for r in results if r.success]
    assert [r.travel for r in followed] == sorted(r.travel for r in followed)
    # Each keeps its own start's branch: the first waypoints are the distinct starts.
    firsts = np.array([r.joints[0] for r in results])
    assert len({tuple(np.round(q, 6)) for q in firsts}) == len(results)
    with pytest.raises(ValueError, match='at least one start'):
        alternative_paths(OMX_CHAIN, positions, np.zeros((0, 4)))
    # From where the arm is, the move to a path's first point counts: the path that starts at
    # the arm's joints beats a shorter one that starts a long move away.
    shortest, other = followed[0], followed[-1]
    origin = other.joints[0]
    assert np.abs(shortest.joints[0] - origin).sum() > other.travel - shortest.travel
    ranked = alternative_paths(OMX_CHAIN, positions, starts, settings, origin=origin)
    assert np.allclose(ranked[0].joints[0], origin)


def test_alternative_paths_tighten_the_best_path_alone(monkeypatch):
    from iknet_core.solvers import path

    positions, settings, starts = line_of_positions_and_starts()
    plain = alternative_paths(OMX_CHAIN, positions, starts, settings)
    follow, tightened = path.follow_path, []

    def spy(chain, targets, start, *arguments, tighten=False, **keywords):
        if tighten:
            tightened.append(np.array(start))
        return follow(chain, targets, start, *arguments, tighten=tighten, **keywords)

    monkeypatch.setattr(path, 'follow_path', spy)
    ranked = alternative_paths(OMX_CHAIN, positions, starts, settings, tighten=True)
    assert len(starts) >= 2 and len(tightened) == 1  # the best start's path, once
    best_start = np.abs(starts - plain[0].joints[0]).max(-1).argmin()  # the best's first point
    np.testing.assert_array_equal(tightened[0], starts[best_start])
    assert ranked[0].success
    largest = path.joint_steps(ranked[0].joints).max()
    assert largest <= path.joint_steps(plain[0].joints).max()
    for before, after in zip(plain[1:], ranked[1:], strict=True):
        np.testing.assert_array_equal(before.joints, after.joints)  # the others as they were


def test_start_solutions_are_distinct_exact_solutions_inside_the_limits():
    settings = SolverSettings().position_only()
    target = np.array([0.2, 0.0, 0.12])
    starts = start_solutions(OMX_CHAIN, target, 16, settings)
    assert len(starts) >= 3  # a position has a continuum of solutions (any tool pitch)
    reached, _ = forward_kinematics(OMX_CHAIN, starts)
    assert np.linalg.norm(reached - target, axis=-1).max() <= settings.tolerance.position
    assert ((starts >= LOW) & (starts <= HIGH)).all()
    gaps = np.abs(starts[:, None] - starts[None]).max(-1) + np.eye(len(starts))
    assert gaps.min() > 1e-3
    np.testing.assert_array_equal(starts, start_solutions(OMX_CHAIN, target, 16, settings))
    with pytest.raises(ValueError, match='count must be at least 1'):
        start_solutions(OMX_CHAIN, target, 0)


def test_start_solutions_begin_with_a_solvers_own():
    from iknet_core.solvers.factory import build_solver

    settings = SolverSettings().position_only()
    solver = build_solver('refine-from-zero', OMX_CHAIN, settings=settings)
    target = np.array([0.2, 0.05, 0.12])
    own = solver.solve(target, np.eye(3), max_solutions=8)
    # As start_solutions keeps them: SAME_SOLUTION_RAD apart (the solver's are 1e-3 rad apart).
    own = distinct_solutions(own.joints[own.meets_tolerance & own.within_limits])
    starts = start_solutions(OMX_CHAIN, target, 8, settings, solver=solver)
    np.testing.assert_allclose(starts[: len(own)], own)
    assert len(own) <= len(starts) <= 8  # random restarts add to the continuum
    assert len(start_solutions(OMX_CHAIN, target, 1, settings, solver=solver)) == 1
    # A solver's rows are refined with the path's settings inside the limits, near-duplicates
    # (closer than SAME_SOLUTION_RAD) do not crowd out the restarts, and avoid is left out.
    from iknet_core.solvers.result import Solutions

    class Crowded:
        def solve(self, position, rotation, max_solutions):
            rows = own[0] + np.outer(np.arange(max_solutions), [0.0, 0.0, 0.0, 5e-3])
            rows[-1] = HIGH + 0.5  # past every limit
            flags = np.ones(max_solutions, dtype=bool)
            zeros = np.zeros(max_solutions)
            return Solutions(rows, zeros, zeros, flags, flags)

    crowded = start_solutions(OMX_CHAIN, target, 8, settings, solver=Crowded())
    assert len(crowded) > 2 and ((crowded >= LOW) & (crowded <= HIGH)).all()
    reached, _ = forward_kinematics(OMX_CHAIN, crowded)
    assert np.linalg.norm(reached - target, axis=-1).max() <= settings.tolerance.position
    avoided = start_solutions(OMX_CHAIN, target, 8, settings, solver=solver, avoid=own[0])
    assert (np.abs(avoided - own[0]).max(-1) >= 0.02).all()


# (The limits leave the other branch 0.115 rad of bend, too little for a line.)
@pytest.mark.parametrize('bend', [0.8, 0.4])
def test_a_line_to_the_straight_elbow_keeps_its_branch(bend):
    poses, start = line_towards_straight_elbow(bend)
    result = follow_path(OMX_CHAIN, poses, start)
    assert result.success, result.reason
    bends = elbow_bend(result.joints)
    assert (np.sign(bends) == np.sign(bend)).all()
    assert np.abs(bends).min() < 0.06  # the line did come near the singularity


def test_a_path_that_starts_away_from_the_arm_says_so():
    # A whole-pose OM-X path whose poses fit the arm, a joint step from where it is: the reason
    # said 'a branch change or a turn through a singularity' and that the orientations may not
    # fit, neither of which was so.
    joints = np.linspace([1.2, 0.1, 0.2, 0.3], [1.3, 0.1, 0.2, 0.3], 20)
    poses = pose_from_joints(OMX_CHAIN, joints)
    result = follow_path(OMX_CHAIN, poses, np.zeros(4))
    assert result.failed_at == 0 and 'the path starts away from them' in result.reason
    assert 'orientation fits' not in result.reason
    assert follow_path(OMX_CHAIN, poses, joints[0]).success


def test_a_path_leaving_the_workspace_fails_at_its_first_unreachable_waypoint():
    poses, start = line_towards_straight_elbow(0.8, beyond=0.05)
    analytic = AnalyticSolver(OMX_CHAIN)
    _, rotation = forward_kinematics(OMX_CHAIN, start)
    reachable = [analytic.solve(pose[:3], rotation).success for pose in poses]
    first_unreachable = reachable.index(False)
    assert first_unreachable > 50 and not any(reachable[first_unreachable:])
    result = follow_path(OMX_CHAIN, poses, start)
    assert result.failed_at == first_unreachable
    assert result.status[first_unreachable] == 'missed'
    assert (result.status[:first_unreachable] == 'reached').all()
    assert (result.status[first_unreachable + 1 :] == 'not tried').all()
    assert np.isnan(result.joints[first_unreachable:]).all()
    assert f'waypoint {first_unreachable} is not reached' in result.reason


def test_a_step_above_the_bound_is_a_jump_not_a_solution():
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=50, seed=2)[0]
    result = follow_path(OMX_CHAIN, pose_from_joints(OMX_CHAIN, curve), curve[0], max_step=1e-4)
    assert result.failed_at == 1
    assert result.status[1] == 'jumped'
    assert 'joint step above' in result.reason


def test_positions_alone_are_followed_in_any_orientation():
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=100, seed=3)[0]
    positions, _ = forward_kinematics(OMX_CHAIN, curve)
    result = follow_path(OMX_CHAIN, positions, curve[0])
    assert result.success, result.reason
    reached, _ = forward_kinematics(OMX_CHAIN, result.joints)
    assert np.linalg.norm(reached - positions, axis=-1).max() <= 1e-6


def test_a_redundant_arm_keeps_its_joints_inside_the_limits():
    from iknet_core.kinematics.robots import example_robots_dir, named_chain

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    panda = named_chain('panda')
    low, high = joint_bounds(panda, 'limits')
    followed = 0
    for curve in smooth_joint_paths(panda, count=5, waypoints=100, seed=4):
        result = follow_path(panda, pose_from_joints(panda, curve), curve[0])
        followed += result.success
        done = result.joints[: result.failed_at]
        assert ((done >= low - 1e-9) & (done <= high + 1e-9)).all()
        assert (result.position_errors[: result.failed_at] <= 1e-6).all()
    assert followed >= 3


def test_an_arm_with_joints_to_spare_stays_where_it_is_at_a_target_it_is_at():
    # Positions of the OM-X (the tool pitch spare): the pull towards the middle of the limits
    # must not move an arm that is at the target already.
    curve = np.array([0.2, -0.3, 0.4, 0.9]) + np.linspace(0.0, 0.2, 8)[:, None] * [1, 1, -1, 0]
    positions, _ = forward_kinematics(OMX_CHAIN, curve)
    for targets in (positions[:1], positions[[0] * 5], positions):
        result = follow_path(OMX_CHAIN, targets, curve[0])
        assert result.success, result.reason
        np.testing.assert_array_equal(result.joints[0], curve[0])
    np.testing.assert_array_equal(
        follow_path(OMX_CHAIN, positions[[0] * 5], curve[0]).joints, curve[[0] * 5]
    )


def squared_travel(joints: np.ndarray) -> float:
    return float((np.diff(joints, axis=0) ** 2).sum())


@pytest.mark.usefixtures('earlier_limit_pull')
def test_smoothing_cuts_the_joint_travel_of_a_spare_joint_and_keeps_every_waypoint_exact():
    # Positions of the OM-X: the tool pitch is spare. The earlier, stronger pull towards the
    # middle of the limits adds travel for the smoothing to cut: at the default pull the
    # smoothing cuts under 1 % of these paths' squared travel, below this test's bar of 2 %.
    travel = {'followed': 0.0, 'smoothed': 0.0}
    for curve in smooth_joint_paths(OMX_CHAIN, count=6, waypoints=100, seed=5):
        positions, _ = forward_kinematics(OMX_CHAIN, curve)
        followed = follow_path(OMX_CHAIN, positions, curve[0], smoothing_passes=0)
        smoothed = follow_path(OMX_CHAIN, positions, curve[0])
        assert followed.success and smoothed.success, smoothed.reason
        np.testing.assert_array_equal(smoothed.joints[0], followed.joints[0])
        reached, _ = forward_kinematics(OMX_CHAIN, smoothed.joints)
        errors = np.linalg.norm(reached - positions, axis=-1)
        assert errors.max() <= 1e-6
        np.testing.assert_allclose(smoothed.position_errors, errors, atol=1e-12)
        assert ((smoothed.joints >= LOW - 1e-9) & (smoothed.joints <= HIGH + 1e-9)).all()
        assert np.abs(np.diff(smoothed.joints, axis=0)).max() <= smoothed.max_step
        assert squared_travel(smoothed.joints) <= squared_travel(followed.joints)
        travel['followed'] += squared_travel(followed.joints)
        travel['smoothed'] += squared_travel(smoothed.joints)
    assert travel['smoothed'] < 0.98 * travel['followed']


def test_smoothing_a_stopped_path_keeps_the_waypoint_its_reason_was_found_from():
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=60, seed=7)[0]
    positions, _ = forward_kinematics(OMX_CHAIN, curve)
    positions[40:] = [0.6, 0.0, 0.1]  # out of reach from waypoint 40 on
    smoothed = follow_path(OMX_CHAIN, positions, curve[0])
    followed = follow_path(OMX_CHAIN, positions, curve[0], smoothing_passes=0)
    assert smoothed.failed_at == followed.failed_at == 40
    assert smoothed.reason == followed.reason
    np.testing.assert_array_equal(smoothed.joints[39], followed.joints[39])
    assert squared_travel(smoothed.joints[:40]) < squared_travel(followed.joints[:40])
    assert (smoothed.position_errors[:40] <= 1e-6).all()


def test_smoothing_leaves_an_arm_without_spare_joints_as_followed():
    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=50, seed=6)[0]
    targets = pose_from_joints(OMX_CHAIN, curve)
    smoothed = follow_path(OMX_CHAIN, targets, curve[0])
    followed = follow_path(OMX_CHAIN, targets, curve[0], smoothing_passes=0)
    np.testing.assert_array_equal(smoothed.joints, followed.joints)


def test_smoothing_brings_a_panda_paths_largest_step_near_its_generating_curves():
    from iknet_core.kinematics.robots import example_robots_dir, named_chain

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    panda = named_chain('panda')
    ratios = {0: [], 3: []}
    for curve in smooth_joint_paths(panda, count=20, waypoints=100, seed=0):
        largest = np.abs(np.diff(curve, axis=0)).max()
        for passes, found in ratios.items():
            result = follow_path(panda, pose_from_joints(panda, curve), curve[0],
                                 smoothing_passes=passes)  # fmt: skip
            if result.success:
                found.append(np.abs(np.diff(result.joints, axis=0)).max() / largest)
                assert (result.position_errors <= 1e-6).all()
    assert len(ratios[3]) == len(ratios[0]) >= 15
    assert np.median(ratios[3]) < min(1.15, np.median(ratios[0]))


def random_path(name: str, count: int, index: int, seed: int = 0):
    """The arm name (from example-robot-data) and path index of count random smooth paths
    (seed): its curve and poses."""
    from iknet_core.kinematics.robots import example_robots_dir, named_chain

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    chain = named_chain(name)
    curve = smooth_joint_paths(chain, count=count, waypoints=100, seed=seed)[index]
    return chain, curve, pose_from_joints(chain, curve)


def random_panda_path(count: int, index: int, seed: int = 0):
    """The Panda and path index of count random smooth paths (seed): its curve and poses."""
    return random_path('panda', count, index, seed)


@pytest.fixture
def earlier_limit_pull():
    """The follower's pull towards the middle of the limits at 0.05, where it was when the
    example paths of a stage's tests were picked: followed with it, they show what the stage
    takes away (a stop, a spike, a drift); followed with the weaker default, many no longer do.
    Its own patch, so a test's monkeypatch.undo() keeps it."""
    from iknet_core.solvers import path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(path, 'LIMIT_PULL', 0.05)
        yield


@pytest.fixture
def nearest_continuation():
    """On arms with no joints to spare, of two solutions the follower reaches, the nearest the
    previous waypoint wins, as when the example paths of the twin and mending stages' tests were
    picked: followed so, they show what the stage takes away (a stop, a waypoint on a nearby
    branch); followed the smoothest way (path.SMOOTHEST_CONTINUATION), they no longer do. Its
    own patch, so a test's monkeypatch.undo() keeps it."""
    from iknet_core.solvers import path

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(path, 'SMOOTHEST_CONTINUATION', False)
        yield


def assert_followed_exactly_inside_the_limits(chain, result) -> None:
    assert result.success, result.reason
    assert (result.status == 'reached').all()
    assert (result.position_errors <= 1e-5).all() and (result.orientation_errors <= 1e-4).all()
    low, high = joint_bounds(chain, 'limits')
    assert ((result.joints >= low - 1e-9) & (result.joints <= high + 1e-9)).all()
    assert np.abs(np.diff(result.joints, axis=0)).max() <= result.max_step


def assert_followed_within_the_step_bar(chain, result, curve) -> None:
    """Followed exactly inside the limits with no joint step above 1.5 times the generating
    curve's largest: the issue's bar for a path."""
    from iknet_core.solvers.path import joint_steps

    assert_followed_exactly_inside_the_limits(chain, result)
    assert joint_steps(result.joints).max() <= 1.5 * joint_steps(curve).max()


def test_a_redundant_arm_stopped_by_a_limit_follows_the_path_again_pulled_off_it(monkeypatch):
    from iknet_core.solvers import path

    # Path 41 of these 200 stops short of a waypoint on the first pass.
    panda, curve, targets = random_panda_path(200, 41)
    monkeypatch.setattr(path, 'search_path', lambda *arguments: 0)  # the retries alone
    monkeypatch.setattr(path, 'RETRY_PULLS', ())
    assert not follow_path(panda, targets, curve[0]).success
    monkeypatch.undo()
    monkeypatch.setattr(path, 'search_path', lambda *arguments: 0)
    assert_followed_exactly_inside_the_limits(panda, follow_path(panda, targets, curve[0]))


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_redundant_arm_that_retries_cannot_take_through_searches_its_self_motion(monkeypatch):
    from iknet_core.solvers import path

    # Path 13 of these 20 stops short of a waypoint after every retry.
    panda, curve, targets = random_panda_path(20, 13)
    searched = []
    search = path.search_path

    def unlinked(*arguments):
        searched.append((arguments[8], arguments[9].tolist()))  # the width and offsets
        return 0  # as if no waypoint could be linked

    monkeypatch.setattr(path, 'search_path', unlinked)
    stopped = follow_path(panda, targets, curve[0])
    assert not stopped.success
    assert searched == [
        (path.NARROW_SEARCH_WIDTH, path.NARROW_SEARCH_OFFSETS.tolist()),
        (path.SEARCH_WIDTH, path.SEARCH_OFFSETS.tolist()),
        (path.SEARCH_WIDTH, path.WIDER_SEARCH_OFFSETS.tolist()),
        (path.WIDEST_SEARCH_WIDTH, path.WIDER_SEARCH_OFFSETS.tolist()),
    ]
    assert 'not reached from the previous one' in stopped.reason
    monkeypatch.setattr(path, 'search_path', search)
    result = follow_path(panda, targets, curve[0])
    assert_followed_exactly_inside_the_limits(panda, result)
    assert np.abs(result.joints[0] - curve[0]).max() <= result.max_step


# Stops the rescue of a stopped path gets past: (seed, path of 200, the module constant that,
# set to the value, takes that part of the rescue away, the waypoint the path then stops at,
# the position tolerance (m; the orientation's is ten times it in rad)).
RESCUES = {
    # Stops after every retry and the narrow and first wide searches, and after the next two
    # too with their wider offsets taken away: with them, the second wide search links it.
    'wider offsets': (4, 58, 'WIDER_SEARCH_OFFSETS', lambda path: path.SEARCH_OFFSETS, 16, 1e-6),
    # Stops after the first three searches (at iknet-path-bench's tolerance): the fourth, twice
    # as wide, links it.
    'widest': (10, 49, 'WIDEST_SEARCH_WIDTH', lambda path: path.SEARCH_WIDTH, 35, 1e-5),
    # Restarts inside the limits get to within 4.5e-6 m of the stop but not within the
    # tolerance: it still counts as within reach, and the search links the path whole.
    'within reach': (9, 10, 'REACH_SLACK', lambda path: 1.0, 80, 1e-6),
}


@pytest.mark.parametrize('case', list(RESCUES))
def test_a_redundant_arm_rescues_a_stop_that_a_narrower_rescue_leaves(monkeypatch, case):
    from iknet_core.solvers import path
    from iknet_core.solvers.result import Tolerance

    seed, index, name, value, stop, tolerance = RESCUES[case]
    settings = SolverSettings(tolerance=Tolerance(tolerance, 10.0 * tolerance))
    panda, curve, targets = random_panda_path(200, index, seed=seed)
    monkeypatch.setattr(path, name, value(path))
    stopped = follow_path(panda, targets, curve[0], settings)
    assert stopped.failed_at == stop, stopped.reason
    monkeypatch.undo()
    result = follow_path(panda, targets, curve[0], settings)
    assert_followed_exactly_inside_the_limits(panda, result)


def test_a_jump_in_all_but_name_is_searched_away_wide(monkeypatch):
    from iknet_core.solvers import path

    # Path 169 of these 200 (seed 9) keeps a step under its max_step of 1.03 rad after every
    # other stage that is 11.4 times its curve's largest (the spike search's retry, as wide,
    # takes it away too, so it is made as narrow as the spike search here).
    panda, curve, targets = random_panda_path(200, 169, seed=9)
    generating = path.joint_steps(curve).max()
    monkeypatch.setattr(path, 'SPIKE_RETRY_WIDTH', path.SPIKE_SEARCH_WIDTH)
    with monkeypatch.context() as patch:
        patch.setattr(path, 'JUMP_FACTOR', math.inf)
        jumped = follow_path(panda, targets, curve[0])
    assert path.joint_steps(jumped.joints).max() > 10 * generating
    result = follow_path(panda, targets, curve[0])
    assert result.success
    assert path.joint_steps(result.joints).max() <= 1.5 * generating


def test_a_spike_no_narrow_bounded_search_links_is_searched_wider_under_the_tightest_bound(
    monkeypatch,
):
    from iknet_core.solvers import path

    # Path 1 of these 200: the spike searches under the three bounds, 4 wide, all stop short;
    # under max_step, the path kept a step 2.04 times its curve's largest.
    panda, curve, targets = random_panda_path(200, 1)
    generating = path.joint_steps(curve).max()
    with monkeypatch.context() as patch:
        patch.setattr(path, 'SPIKE_RETRY_WIDTH', path.SPIKE_SEARCH_WIDTH)
        narrow = follow_path(panda, targets, curve[0])
    assert path.joint_steps(narrow.joints).max() > 1.5 * generating
    searches = counting_search(monkeypatch, path)
    result = follow_path(panda, targets, curve[0])
    widths = [width for width, _ in searches]
    spike = path.SPIKE_SEARCH_WIDTH
    assert widths[: len(path.SPIKE_BOUNDS) + 1] == [spike] * len(path.SPIKE_BOUNDS) + [
        path.SPIKE_RETRY_WIDTH
    ]
    assert searches[len(path.SPIKE_BOUNDS)][1] == pytest.approx(searches[0][1])  # the tightest
    assert_followed_within_the_step_bar(panda, result, curve)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_spike_left_in_a_smoothed_path_is_searched_away(monkeypatch):
    from iknet_core.solvers import path

    # Path 120 of these 200 is followed and smoothed with a step 2.06 times its curve's largest.
    panda, curve, targets = random_panda_path(200, 120)
    generating = path.joint_steps(curve).max()
    only_the_searches(monkeypatch, path)
    searched = follow_path(panda, targets, curve[0])
    factor = path.SPIKE_FACTOR
    monkeypatch.setattr(path, 'SPIKE_FACTOR', math.inf)  # the spike search off
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)  # and the capped one
    spiky = follow_path(panda, targets, curve[0])
    steps = path.joint_steps(spiky.joints)
    assert steps.max() > 1.5 * generating and steps.max() > factor * np.median(steps)
    assert_followed_within_the_step_bar(panda, searched, curve)


def followed_path_search_widths(path_module) -> set[int]:
    """The beam widths of the 4-wide spike searches and of the capped search, a followed path's
    (the capped one's is also the first rescue search's; the spike search's wider retry is
    left out)."""
    return {path_module.SPIKE_SEARCH_WIDTH, path_module.NARROW_SEARCH_WIDTH}


def only_the_searches(monkeypatch, path_module) -> None:
    """The stages besides the spike and capped searches off (the weighted smoothing, the wide
    search for a jump, the mending), so what a test of those searches measures is theirs."""
    monkeypatch.setattr(path_module, 'PEAK_FACTOR', math.inf)
    monkeypatch.setattr(path_module, 'JUMP_FACTOR', math.inf)
    monkeypatch.setattr(path_module, 'MEND_FACTOR', math.inf)


def counting_search(monkeypatch, path_module, change=None) -> list[tuple[int, float]]:
    """path_search's calls through path_module: (beam width, step bound) of each; change(out)
    after each."""
    searches = []
    search = path_module.search_path
    names = list(inspect.signature(search.py_func).parameters)

    def counted(*arguments):
        named = dict(zip(names, arguments, strict=True))
        searches.append((named['width'], named['max_step']))
        linked = search(*arguments)
        if change is not None:
            change(named['out'])
        return linked

    monkeypatch.setattr(path_module, 'search_path', counted)
    return searches


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_path_followed_without_smoothing_is_not_searched_for_spikes(monkeypatch):
    from iknet_core.solvers import path

    panda, curve, targets = random_panda_path(200, 120)  # spiky (the test above)
    searches = counting_search(monkeypatch, path)
    rough = follow_path(panda, targets, curve[0], smoothing_passes=0)
    assert rough.success and searches == []
    follow_path(panda, targets, curve[0])
    assert searches and {width for width, _ in searches} <= followed_path_search_widths(path)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_searched_path_with_a_larger_step_is_discarded(monkeypatch):
    from iknet_core.solvers import path

    panda, curve, targets = random_panda_path(200, 120)
    only_the_searches(monkeypatch, path)
    search = path.search_path
    monkeypatch.setattr(path, 'search_path', lambda *arguments: 0)  # no search links the path
    spiky = follow_path(panda, targets, curve[0])
    monkeypatch.setattr(path, 'search_path', search)

    def jump(out: np.ndarray) -> None:
        out[60:, 6] += 1.0  # a step of 1 rad: larger than any of the smoothed path's

    searches = counting_search(monkeypatch, path, jump)
    smooth, smoothed = path.smooth_path, []

    def smooth_the_followed_path_only(*arguments):
        smoothed.append(True)
        if len(smoothed) == 1:
            smooth(*arguments)

    monkeypatch.setattr(path, 'smooth_path', smooth_the_followed_path_only)
    result = follow_path(panda, targets, curve[0])
    assert len(smoothed) >= 2  # the followed path's, then the searched ones'
    assert searches and {width for width, _ in searches} == followed_path_search_widths(path)
    np.testing.assert_array_equal(result.joints, spiky.joints)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_spike_the_least_travel_search_keeps_goes_under_a_step_bound(monkeypatch):
    from iknet_core.solvers import path

    # Path 1 of these 200: the search under the path's max_step alone keeps a step 2.1 times
    # its curve's largest (it trades it for less travel elsewhere).
    panda, curve, targets = random_panda_path(200, 1)
    generating = path.joint_steps(curve).max()
    monkeypatch.setattr(path, 'SPIKE_BOUNDS', ())
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)
    only_the_searches(monkeypatch, path)
    unbounded = follow_path(panda, targets, curve[0])
    assert path.joint_steps(unbounded.joints).max() > 1.5 * generating
    monkeypatch.undo()
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)  # the bounds alone
    only_the_searches(monkeypatch, path)
    searches = counting_search(monkeypatch, path)
    bounded = follow_path(panda, targets, curve[0])
    median_step = np.median(path.joint_steps(unbounded.joints))
    # The first search, under the tightest bound, links it.
    assert searches == [(path.SPIKE_SEARCH_WIDTH, pytest.approx(1.6 * median_step))]
    assert_followed_within_the_step_bar(panda, bounded, curve)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_largest_step_that_stands_out_below_the_spike_factor_is_searched_under_a_cap(
    monkeypatch,
):
    from iknet_core.solvers import path

    # Path 50 of these 200: largest step 1.97 times the median (no spike), 2.02 times its
    # curve's largest.
    panda, curve, targets = random_panda_path(200, 50)
    generating = path.joint_steps(curve).max()
    only_the_searches(monkeypatch, path)
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)
    uncapped = follow_path(panda, targets, curve[0])
    steps = path.joint_steps(uncapped.joints)
    assert steps.max() <= path.SPIKE_FACTOR * np.median(steps)
    assert steps.max() > 1.5 * generating
    monkeypatch.undo()
    only_the_searches(monkeypatch, path)
    searches = counting_search(monkeypatch, path)
    capped = follow_path(panda, targets, curve[0])
    assert searches == [(path.NARROW_SEARCH_WIDTH, pytest.approx(path.CAP_SHARE * steps.max()))]
    assert_followed_within_the_step_bar(panda, capped, curve)


def test_tighten_searches_a_path_whose_largest_step_does_not_stand_out():
    from iknet_core.solvers import path

    # Path 26 of these 200 (seed 14) is followed with a largest step 1.55 times its curve's
    # largest but only 1.45 times its own median (every step larger than the curve's), so no
    # stage that waits for a step to stand out searches it; tighten does.
    panda, curve, targets = random_panda_path(200, 26, seed=14)
    followed = follow_path(panda, targets, curve[0])
    steps = path.joint_steps(followed.joints)
    assert steps.max() > 1.5 * path.joint_steps(curve).max()
    assert steps.max() <= path.CAP_FACTOR * np.median(steps)
    tightened = follow_path(panda, targets, curve[0], tighten=True)
    assert_followed_within_the_step_bar(panda, tightened, curve)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_a_largest_step_left_after_the_spike_search_is_smoothed_with_large_changes_weighted_up(
    monkeypatch,
):
    from iknet_core.solvers import path

    # Path 94 of these 200: after the spike search, its largest step is 1.69 times its curve's
    # largest and 1.72 times its median.
    panda, curve, targets = random_panda_path(200, 94)
    generating = path.joint_steps(curve).max()
    monkeypatch.setattr(path, 'MEND_FACTOR', math.inf)  # the weighted smoothing alone
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)
    weighted = follow_path(panda, targets, curve[0])
    factor = path.PEAK_FACTOR
    monkeypatch.setattr(path, 'PEAK_FACTOR', math.inf)
    unweighted = follow_path(panda, targets, curve[0])
    steps = path.joint_steps(unweighted.joints)
    assert steps.max() > 1.5 * generating and steps.max() > factor * np.median(steps)
    assert_followed_within_the_step_bar(panda, weighted, curve)


def test_a_path_taken_through_a_costlier_self_motion_is_searched_under_a_cap(monkeypatch):
    from iknet_core.solvers import path

    # Path 33 of these 200: after every other stage, its largest step is 1.56 times its curve's
    # largest and 1.55 times its median (the follower's self-motion drifted up to 1.9 rad from
    # the curve's, where the tool's motion needs larger joint steps).
    panda, curve, targets = random_panda_path(200, 33)
    generating, factor = path.joint_steps(curve).max(), path.CAP_FACTOR
    monkeypatch.setattr(path, 'MEND_FACTOR', math.inf)  # the capped search last
    monkeypatch.setattr(path, 'CAP_FACTOR', math.inf)
    kept = path.joint_steps(follow_path(panda, targets, curve[0]).joints)
    assert kept.max() > 1.5 * generating and kept.max() > factor * np.median(kept)
    monkeypatch.setattr(path, 'CAP_FACTOR', factor)
    searched, search = [], path.search_path

    def offsets_seen(*arguments):  # width, bound
        searched.append((arguments[8], arguments[7], arguments[9].tolist()))  # and offsets
        return search(*arguments)

    monkeypatch.setattr(path, 'search_path', offsets_seen)
    result = follow_path(panda, targets, curve[0])
    last = (path.NARROW_SEARCH_WIDTH, pytest.approx(path.CAP_SHARE * kept.max()))
    assert searched[-1] == (*last, path.NARROW_SEARCH_OFFSETS.tolist())
    assert_followed_within_the_step_bar(panda, result, curve)


def test_a_weighted_smoothing_with_a_larger_step_is_discarded(monkeypatch):
    from iknet_core.solvers import path

    panda, curve, targets = random_panda_path(200, 94)  # smoothed with weights (the test above)
    monkeypatch.setattr(path, 'PEAK_FACTOR', math.inf)
    unweighted = follow_path(panda, targets, curve[0])
    monkeypatch.undo()
    smooth, weighted = path.smooth_path, []

    def worse_when_weighted(*arguments):
        smooth(*arguments)
        if arguments[-1] > 0.0:  # peak_power
            weighted.append(True)
            arguments[0][60:, 6] += 1.0  # a step of 1 rad: larger than any of the path's

    monkeypatch.setattr(path, 'smooth_path', worse_when_weighted)
    result = follow_path(panda, targets, curve[0])
    assert weighted == [True]
    np.testing.assert_array_equal(result.joints, unweighted.joints)


def test_through_a_singularity_an_arm_with_no_joints_to_spare_goes_on_the_way_it_was_moving(
    monkeypatch,
):
    from iknet_core.solvers import path

    # UR5 path 196 of 200 random ones (seed 7): its curve turns the elbow through straight at
    # waypoints 8 and 64. There the solution nearest the previous waypoint turns back off the
    # singularity, onto the elbow's other side, where the shoulder and wrist need steps 1.75
    # times the curve's largest; the smoothest goes on through it, as the curve does.
    ur5, curve, targets = random_path('ur5', 200, 196, seed=7)
    followed = follow_path(ur5, targets, curve[0])
    assert_followed_within_the_step_bar(ur5, followed, curve)
    assert np.abs(followed.joints - curve).max() < 0.01
    monkeypatch.setattr(path, 'SMOOTHEST_CONTINUATION', False)
    nearest = follow_path(ur5, targets, curve[0])
    assert nearest.success, nearest.reason
    assert nearest.joints[30, 2] * curve[30, 2] < 0.0  # the elbow on its other side
    assert path.joint_steps(nearest.joints).max() > 1.5 * path.joint_steps(curve).max()


def test_a_path_from_a_start_at_a_singularity_takes_the_starts_twin_where_it_steps_less(
    monkeypatch,
):
    from iknet_core.solvers import kernels, path, path_branches

    # UR5 path 153 of 200 random ones (seed 17) starts with the elbow 0.028 rad from straight
    # and its curve turns through it. With no velocity yet, the follower keeps the start's side:
    # the whole path is then the curve's mirror, every step larger (1.75 times the curve's
    # largest), none standing out. The twin of the first waypoint goes on as the curve does.
    ur5, curve, targets = random_path('ur5', 200, 153, seed=17)
    arrays, settings = kernels.ChainArrays.from_chain(ur5), SolverSettings()
    assert path_branches.starts_near_singularity(curve[0], arrays, settings)
    assert not path_branches.starts_near_singularity(curve[50], arrays, settings)
    result = follow_path(ur5, targets, curve[0])
    assert_followed_within_the_step_bar(ur5, result, curve)
    assert result.joints[50, 2] * curve[50, 2] > 0.0  # the curve's side of the elbow
    monkeypatch.setattr(path_branches, 'SINGULAR_START_RATIO', 0.0)
    mirrored = follow_path(ur5, targets, curve[0])
    assert mirrored.success, mirrored.reason
    assert mirrored.joints[50, 2] * curve[50, 2] < 0.0
    assert path.joint_steps(mirrored.joints).max() > 1.5 * path.joint_steps(curve).max()
    # The twins tried: of the first target, on the other side of the elbow, one step away.
    low, high = joint_bounds(ur5, 'limits')
    bounds = np.stack([low, high, np.zeros_like(low)], -1)
    positions, rotations = targets[:, :3], matrix_from_quaternion(targets[:, 3:])
    branches = (mirrored.joints, positions, rotations, arrays, bounds, settings,
                mirrored.max_step)  # fmt: skip
    twins = list(path_branches.other_branches(*branches, start_only=True))
    assert twins and all(first == 1 for first, _ in twins)
    assert any(twin[2] * curve[1, 2] > 0.0 for _, twin in twins)
    with pytest.raises(ValueError, match='start_only'):
        next(path_branches.other_branches(*branches, (5,), start_only=True))


def test_a_start_near_a_singularity_keeps_its_side_where_the_twin_steps_no_less():
    from iknet_core.solvers import kernels, path, path_branches

    # UR5 path 164 of 200 random ones (seed 17) starts near the elbow singularity too, but its
    # largest step is the same on either side (a joint both sides share): the twin, a tie up to
    # rounding, would take waypoint 1 across the singularity and back for nothing.
    ur5, curve, targets = random_path('ur5', 200, 164, seed=17)
    arrays = kernels.ChainArrays.from_chain(ur5)
    assert path_branches.starts_near_singularity(curve[0], arrays, SolverSettings())
    result = follow_path(ur5, targets, curve[0])
    steps = path.joint_steps(result.joints)
    np.testing.assert_array_less(0.0, result.joints[:3, 2] * curve[0, 2])  # one side of it
    assert steps.max() <= 1.5 * path.joint_steps(curve).max()


@pytest.mark.usefixtures('nearest_continuation')
def test_a_waypoint_taken_on_a_nearby_branch_near_a_singularity_is_mended(monkeypatch):
    from iknet_core.solvers import path

    # UR5 path 106 of 200 random ones (seed 0) nears the wrist singularity at waypoint 47: the
    # follower reaches waypoint 45 on a nearby solution 0.21 rad off the curve's and comes back
    # at 46, with a step 2.36 times the curve's largest.
    ur5, curve, targets = random_path('ur5', 200, 106, seed=0)
    generating = path.joint_steps(curve).max()
    mended = follow_path(ur5, targets, curve[0])
    monkeypatch.setattr(path, 'MEND_FACTOR', math.inf)
    # The spike's twin too.
    monkeypatch.setattr(path, 'other_branches', lambda *arguments, **keywords: [])
    followed = follow_path(ur5, targets, curve[0])
    assert path.joint_steps(followed.joints).max() > 2.0 * generating
    assert np.abs(followed.joints[45] - curve[45]).max() > 0.2
    assert_followed_within_the_step_bar(ur5, mended, curve)
    # On the curve, but where the curve turns the elbow through straight (waypoint 7) and the
    # follower keeps the start's elbow, a hundredth of a radian or two off.
    assert np.abs(mended.joints[:40] - curve[:40]).max() < 0.05
    assert np.abs(mended.joints[40:] - curve[40:]).max() < 1e-3


@pytest.mark.usefixtures('nearest_continuation')
def test_a_run_of_waypoints_taken_on_a_nearby_solution_is_mended_as_one(monkeypatch):
    from iknet_core.solvers import path

    # UR5 path 141 of 200 random ones (seed 2): the follower takes waypoints 17 and 18 on a
    # nearby solution 0.12 rad off the curve's, and comes back at 19 with a step 1.65 times
    # the curve's largest; neither waypoint alone is better solved from its neighbours.
    ur5, curve, targets = random_path('ur5', 200, 141, seed=2)
    mended = follow_path(ur5, targets, curve[0])
    monkeypatch.setattr(path, 'MEND_RUN', 1)
    singly = follow_path(ur5, targets, curve[0])
    assert path.joint_steps(singly.joints).max() > 1.6 * path.joint_steps(curve).max()
    assert np.abs(singly.joints[17:19] - curve[17:19]).max() > 0.1
    assert_followed_within_the_step_bar(ur5, mended, curve)
    assert np.abs(mended.joints[15:21] - curve[15:21]).max() < 1e-3


@pytest.mark.usefixtures('nearest_continuation')
def test_a_path_the_start_branch_cannot_finish_takes_the_twin_where_it_passed_a_singularity(
    monkeypatch,
):
    from iknet_core.solvers import path

    # OM-X path 181 of 200 random ones (seed 1): the curve turns the elbow through straight
    # near waypoint 76 and the follower comes out on the other side, where the elbow joint
    # reaches its limit at waypoint 87.
    curve = smooth_joint_paths(OMX_CHAIN, count=200, waypoints=100, seed=1)[181]
    targets = pose_from_joints(OMX_CHAIN, curve)
    result = follow_path(OMX_CHAIN, targets, curve[0])
    assert_followed_within_the_step_bar(OMX_CHAIN, result, curve)
    np.testing.assert_allclose(result.joints, curve, atol=0.02)  # the curve's branch
    monkeypatch.setattr(path, 'other_branches', lambda *arguments, **keywords: [])
    kept = follow_path(OMX_CHAIN, targets, curve[0])
    assert kept.failed_at == 87
    assert 'reachable only on another branch' in kept.reason


def test_an_arm_without_spare_joints_always_tries_carrying_on_at_its_velocity():
    from iknet_core.solvers.result import Tolerance

    # UR5 path 186 of 200 (seed 8, iknet-path-bench's tolerance): tried from the previous
    # waypoint alone wherever that reached at a steady step (path.STEADY_STEP_FACTOR, which
    # spares only arms with joints to spare), the follower left the curve's branch for one
    # 3.4 rad away, with a step 1.73 times the curve's largest.
    ur5, curve, targets = random_path('ur5', 200, 186, seed=8)
    settings = SolverSettings(tolerance=Tolerance(1e-5, 1e-4))
    result = follow_path(ur5, targets, curve[0], settings)
    assert_followed_within_the_step_bar(ur5, result, curve)
    np.testing.assert_allclose(result.joints, curve, atol=0.05)  # the curve's branch


@pytest.mark.usefixtures('nearest_continuation')
def test_a_branch_change_under_a_generous_step_bound_takes_the_twin_around_it(monkeypatch):
    from iknet_core.solvers import path

    # UR5 path 80 of 200 random ones (seed 10): its waypoints are far apart, so max_step is
    # 3 rad, and the follower leaves the curve's branch at waypoint 80 for one that needs a
    # 1.7 rad step at 82, far from the path's closest passes by a singularity.
    ur5, curve, targets = random_path('ur5', 200, 80, seed=10)
    result = follow_path(ur5, targets, curve[0])
    branches = path.other_branches
    monkeypatch.setattr(
        path, 'other_branches', lambda *arguments, **keywords: branches(*arguments[:7], **keywords)
    )
    passes_only = follow_path(ur5, targets, curve[0])
    assert path.joint_steps(passes_only.joints).max() > 1.5
    assert_followed_within_the_step_bar(ur5, result, curve)
    np.testing.assert_allclose(result.joints, curve, atol=0.05)  # the curve's branch


@pytest.mark.usefixtures('nearest_continuation')
def test_alternative_paths_try_a_stopped_starts_twins_where_no_start_gets_through():
    # The OM-X path above: its start's branch stops at waypoint 87, its twin gets through.
    curve = smooth_joint_paths(OMX_CHAIN, count=200, waypoints=100, seed=1)[181]
    targets = pose_from_joints(OMX_CHAIN, curve)
    stopped = follow_path(OMX_CHAIN, targets, curve[0], rescue_where_stopped=False)
    assert stopped.failed_at == 87
    (alone,) = alternative_paths(OMX_CHAIN, targets, curve[:1])
    assert_followed_within_the_step_bar(OMX_CHAIN, alone, curve)


def rescues_in_alternative_paths(monkeypatch, panda, targets, starts, origin):
    """alternative_paths' ranking and, per start joints (a tuple), whether it was rescued."""
    from iknet_core.solvers import path

    follow, rescued = path.follow_path, {}

    def spy(chain, targets, start, *arguments, rescue_where_stopped=True, **keywords):
        rescued[tuple(start)] = rescued.get(tuple(start), False) or rescue_where_stopped
        return follow(
            chain, targets, start, *arguments, rescue_where_stopped=rescue_where_stopped,
            **keywords,
        )  # fmt: skip

    monkeypatch.setattr(path, 'follow_path', spy)
    return alternative_paths(panda, targets, starts, origin=origin), rescued


@pytest.mark.usefixtures('earlier_limit_pull')
def test_alternative_paths_rescue_the_stopped_start_with_the_least_travel_below_the_best(
    monkeypatch,
):
    # Panda path 3 of 40 (seed 1): from its curve's start the follower stops at waypoint 81
    # unrescued, and from two other solutions of the first waypoint, with more travel (the
    # move to them included), at 62 and 53; a fourth gets through with more travel than all.
    panda, curve, targets = random_panda_path(40, 3, seed=1)
    others = start_solutions(panda, targets[0], 3, seed=3, avoid=curve[0])
    starts = np.concatenate([curve[:1], others])
    unrescued = [follow_path(panda, targets, q, rescue_where_stopped=False) for q in starts]
    assert [result.failed_at for result in unrescued] == [81, 62, 53, None]
    costs = [r.travel + np.abs(r.joints[0] - curve[0]).sum() for r in unrescued]
    assert costs[0] < min(costs[1:3]) and max(costs[:3]) < costs[3]  # all three below the best
    ranked, rescued = rescues_in_alternative_paths(monkeypatch, panda, targets, starts, curve[0])
    assert rescued == {tuple(q): k == 0 for k, q in enumerate(starts)}  # the curve's alone
    assert np.abs(ranked[0].joints[0] - curve[0]).max() <= ranked[0].max_step  # the curve's
    assert_followed_within_the_step_bar(panda, ranked[0], curve)


@pytest.mark.usefixtures('earlier_limit_pull')
def test_alternative_paths_leave_a_stopped_start_with_more_travel_than_the_best(monkeypatch):
    # Panda path 28 of 40 (seed 1): another solution of the first waypoint stops at waypoint 59
    # having travelled (the move to it included) further than the curve's whole path.
    panda, curve, targets = random_panda_path(40, 28, seed=1)
    other = start_solutions(panda, targets[0], 3, seed=28, avoid=curve[0])[0]
    starts = np.stack([curve[0], other])
    ranked, rescued = rescues_in_alternative_paths(monkeypatch, panda, targets, starts, curve[0])
    assert rescued == {tuple(curve[0]): False, tuple(other): False}
    assert ranked[0].success and ranked[1].failed_at == 59


def test_alternative_paths_rescue_stopped_starts_where_every_path_through_jumps():
    """A Kinova Jaco2 path (example-robot-data's anymal-kinova; seed 0, path 13 of 20): the
    three starts that get through unrescued all turn the wrist 1.21 rad in one step, 10 times
    the curve's largest; the curve's own start, rescued (its twin near the singularity), gets
    through with none, and comes first."""
    from iknet_core.kinematics.robots import example_robots_dir
    from iknet_core.kinematics.urdf import chain_from_urdf
    from iknet_core.solvers.path import joint_steps
    from iknet_core.solvers.result import Tolerance

    robots = example_robots_dir()
    if robots is None:
        pytest.skip('example-robot-data is not installed')
    urdf = robots / 'anymal_b_simple_description' / 'robots' / 'anymal-kinova.urdf'
    kinova = chain_from_urdf(urdf, 'j2s6s200_link_base', 'j2s6s200_end_effector')
    curve = smooth_joint_paths(kinova, count=20, waypoints=100, seed=0)[13]
    targets = pose_from_joints(kinova, curve)
    settings = SolverSettings(tolerance=Tolerance(1e-5, 1e-4))  # iknet-path-bench's
    others = start_solutions(kinova, targets[0], 7, settings, seed=13, avoid=curve[0])
    starts = np.concatenate([curve[:1], others])
    unrescued = [
        follow_path(kinova, targets, q, settings, rescue_where_stopped=False) for q in starts
    ]
    through = [result for result in unrescued if result.success]
    curve_step = joint_steps(curve).max()
    assert through and all(joint_steps(r.joints).max() > 8 * curve_step for r in through)
    best = alternative_paths(kinova, targets, starts, settings, origin=curve[0])[0]
    assert_followed_within_the_step_bar(kinova, best, curve)


def test_the_twins_of_a_path_near_a_singularity_are_exact_and_within_a_step():
    from iknet_core.solvers import kernels
    from iknet_core.solvers.path_branches import other_branches

    curve = smooth_joint_paths(OMX_CHAIN, count=200, waypoints=100, seed=1)[181]
    positions, rotations = forward_kinematics(OMX_CHAIN, curve)
    arrays = kernels.ChainArrays.from_chain(OMX_CHAIN)
    bounds = np.stack([LOW, HIGH, np.zeros(4)], -1)
    settings = SolverSettings()
    twins = list(other_branches(curve, positions, rotations, arrays, bounds, settings, 0.25))
    assert twins
    compiled = kernels.CompiledChain(OMX_CHAIN)
    for waypoint, twin in twins:
        position_error, orientation_error = compiled.pose_errors(
            twin[None], positions[waypoint : waypoint + 1], rotations[waypoint : waypoint + 1]
        )
        assert settings.tolerance.met(position_error, orientation_error).all()
        assert np.abs(twin - curve[waypoint - 1]).max() <= 0.25
        assert np.abs(twin - curve[waypoint]).max() >= settings.duplicate_tolerance
    # Around the elbow's pass through straight (waypoint 76), and nothing for a path of one.
    assert any(abs(waypoint - 76) <= 4 for waypoint, _ in twins)
    assert not list(other_branches(curve[:1], *(a[:1] for a in (positions, rotations)), arrays,
                                   bounds, settings, 0.25))  # fmt: skip


@pytest.mark.parametrize('run', [1, 2, 3])
def test_waypoints_off_between_their_neighbours_are_solved_again_from_the_line_between(run):
    from iknet_core.solvers import kernels
    from iknet_core.solvers.path_smoothing import mend_spikes

    curve = smooth_joint_paths(OMX_CHAIN, count=1, waypoints=100, seed=3)[0]
    positions, rotations = forward_kinematics(OMX_CHAIN, curve)
    spiky = curve.copy()
    off = np.arange(50, 50 + run)
    spiky[off, 0] += 0.3  # out and back
    errors = np.full((100, 2), np.nan)
    arrays = kernels.ChainArrays.from_chain(OMX_CHAIN)
    bounds = np.stack([LOW, HIGH, np.zeros(4)], -1)
    settings = SolverSettings()
    arguments = (positions, rotations, arrays.joints, arrays.tip, bounds, settings.kernel())
    if run > 1:
        shorter = spiky.copy()
        assert mend_spikes(shorter, *arguments, 1.5, run - 1, errors.copy()) == 0  # too long
    assert mend_spikes(spiky, *arguments, 1.5, run, errors) == 1  # the run, as one
    np.testing.assert_allclose(spiky, curve, atol=1e-4)
    assert (errors[off, 0] <= settings.tolerance.position).all()
    assert (errors[off, 1] <= settings.tolerance.orientation).all()
    assert np.isnan(np.delete(errors, off, axis=0)).all()  # the others untouched
    assert mend_spikes(spiky, *arguments, 1.5, run, errors) == 0  # nothing stands out any more


@pytest.mark.parametrize('pinned_end', [False, True], ids=['free-end', 'pinned-end'])
def test_the_least_travel_offsets_solve_their_weighted_least_squares_problem(pinned_end):
    from iknet_core.solvers import path_smoothing

    rng = np.random.default_rng(4)
    count, n, spare = 8, 4, 2
    path = rng.normal(size=(count, n))
    bases = np.linalg.qr(rng.normal(size=(count, n, spare)))[0]  # orthonormal columns
    weights = rng.uniform(1.0, 3.0, (count, n))
    offsets = np.empty((count, n))
    path_smoothing._least_travel_offsets(path, bases, weights, pinned_end, offsets)
    # The same problem dense: sum_t |q_t - q_t-1 + Z_t a_t - Z_t-1 a_t-1|^2_W_t + ridge |a|^2
    # over the waypoints that move, by numpy's least squares.
    moved = list(range(1, count - 1 if pinned_end else count))
    column = {t: k * spare for k, t in enumerate(moved)}
    rows, right = [], []
    for t in range(1, count):
        for i in range(n):
            row = np.zeros(len(moved) * spare)
            for waypoint, sign in ((t, 1.0), (t - 1, -1.0)):
                if waypoint in column:
                    row[column[waypoint] : column[waypoint] + spare] = sign * bases[waypoint, i]
            scale = np.sqrt(weights[t, i])
            rows.append(scale * row)
            right.append(-scale * (path[t, i] - path[t - 1, i]))
    ridge = np.sqrt(path_smoothing._RIDGE) * np.eye(len(moved) * spare)
    system = np.vstack([np.array(rows), ridge])
    coefficients = np.linalg.lstsq(system, np.concatenate([right, np.zeros(len(ridge))]))[0]
    expected = np.zeros((count, n))
    for t in moved:
        expected[t] = bases[t] @ coefficients[column[t] : column[t] + spare]
    np.testing.assert_allclose(offsets, expected, atol=1e-10)


def test_the_search_says_which_waypoint_it_could_not_link_and_leaves_the_path_alone():
    from iknet_core.solvers import kernels
    from iknet_core.solvers.path_search import SEARCH_OFFSETS, search_path

    settings = SolverSettings().position_only()  # the OM-X's positions: a joint to spare
    joints = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.01, 0.0], [0.0, 0.0, 0.5, 0.0]])
    positions, _ = forward_kinematics(OMX_CHAIN, joints)
    rotations = np.broadcast_to(np.eye(3), (3, 3, 3)).copy()
    arrays = kernels.ChainArrays.from_chain(OMX_CHAIN)
    bounds = np.stack([LOW, HIGH, np.zeros(4)], -1)
    out, errors = np.full((3, 4), 7.0), np.full((3, 2), 7.0)
    arguments = (joints[0], positions, rotations, arrays.joints, arrays.tip, bounds,
                 settings.kernel())  # fmt: skip
    # Waypoint 2 is half a radian of elbow away: beyond a 0.1 rad bound from anything kept.
    assert search_path(*arguments, 0.1, 16, SEARCH_OFFSETS, out, errors) == 2
    assert (out == 7.0).all() and (errors == 7.0).all()
    assert search_path(*arguments, 1.0, 16, SEARCH_OFFSETS, out, errors) == 3
    assert (errors[:, 0] <= settings.tolerance.position).all()
    assert np.abs(np.diff(np.concatenate([joints[:1], out]), axis=0)).max() <= 1.0


def test_retries_and_the_search_are_only_for_reachable_stops_on_arms_with_joints_to_spare(
    monkeypatch,
):
    from iknet_core.solvers import path

    passes, searches = [], []
    follow, search = path._follow, path.search_path

    def counted(*arguments):
        passes.append(arguments[9])  # near_limits: a retry
        return follow(*arguments)

    def counted_search(*arguments):
        searches.append(True)
        return search(*arguments)

    monkeypatch.setattr(path, '_follow', counted)
    monkeypatch.setattr(path, 'search_path', counted_search)
    # A whole pose of the OM-X: no joint to spare, one pass even when the path stops.
    targets, start = line_towards_straight_elbow(0.8, beyond=0.05)
    assert not follow_path(OMX_CHAIN, targets, start).success
    assert passes == [False] and searches == []
    # Positions of the OM-X (a joint to spare): a target no joints inside the limits reach stops
    # the path after the first pass (nothing could get past it), and the result says so.
    passes.clear()
    positions = np.array([[0.6, 0.0, 0.1], [0.61, 0.0, 0.1]])
    result = follow_path(OMX_CHAIN, positions, np.zeros(4))
    assert result.failed_at == 0 and 'waypoint 0 is not reached' in result.reason
    assert passes == [False] and searches == []
    # A jump at a reachable waypoint is not retried (pulling joints off their limits would not
    # undo it) but searched, all four ways (path.follow_path's rescue searches); here no path
    # within the bound exists, so it stays a jump.
    passes.clear()
    line = np.array([[0.2, -0.05, 0.12], [0.2, 0.05, 0.12]])
    jumped = follow_path(OMX_CHAIN, line, np.zeros(4), max_step=1e-3)
    assert jumped.status[jumped.failed_at] == 'jumped' and passes == [False]
    assert searches == [True] * 4


@pytest.mark.parametrize(
    ('targets', 'start', 'message'),
    [
        (np.zeros((0, 7)), np.zeros(4), 'the path is empty'),
        (np.zeros((3, 5)), np.zeros(4), r'got \(3, 5\)'),
        (np.array([[0.2, 0, 0.1], [np.nan, 0, 0.1]]), np.zeros(4), 'waypoint 1 .* not finite'),
        (np.array([[0.2, 0, 0.1, 0, 0, 0, 0]]), np.zeros(4), 'waypoint 0 .* zero quaternion'),
        (np.array([[0.2, 0, 0.1]]), np.zeros(3), r'expected start joints of shape \(4,\)'),
        (
            np.array([[0.2, 0, 0.1]]),
            np.array([0, 0, 0, 9.0]),
            'joint4 = 9.0000 rad is outside its reach',
        ),
    ],
)
def test_bad_paths_are_refused_with_the_reason(targets, start, message):
    with pytest.raises(ValueError, match=message):
        follow_path(OMX_CHAIN, targets, start)


def test_a_start_a_tick_past_a_limit_that_is_its_reach_starts_from_the_limit():
    # The OM-X's joint2 has no narrower software limits: its reach is its limit, and an arm at
    # rest on it reads a tick past it (encoder noise), which must not refuse every path.
    curve = np.array([0.0, 1.5, -1.2, 0.3]) - np.linspace(0.0, 0.1, 6)[:, None] * [0, 1, 0, 0]
    poses = pose_from_joints(OMX_CHAIN, curve)
    result = follow_path(OMX_CHAIN, poses, curve[0] + [0.0, 4e-4, 0.0, 0.0])
    assert result.success, result.reason
    np.testing.assert_allclose(result.joints, curve, atol=1e-4)
    with pytest.raises(ValueError, match=r'joint2 = 1\.5200 rad is outside its reach'):
        follow_path(OMX_CHAIN, poses, curve[0] + [0.0, 0.02, 0.0, 0.0])


def test_a_start_a_whole_turn_past_the_reach_is_the_same_arm():
    # joint1 of the OM-X turns a whole turn (reach -pi to 3.3 rad): a state a turn off, as a
    # continuous joint reports past +-pi, starts the path from the same arm, not a refusal.
    curve = np.array([-2.9, 0.1, 0.2, 0.3]) + np.linspace(0.0, 0.05, 6)[:, None] * [1, 0, 0, 0]
    for turns in (1, -1):
        start = curve[0] + [turns * 2 * math.pi, 0.0, 0.0, 0.0]
        result = follow_path(OMX_CHAIN, pose_from_joints(OMX_CHAIN, curve), start)
        assert result.success, result.reason
        np.testing.assert_allclose(result.joints, curve, atol=1e-4)
    # By the fewest turns: a UR5 joint a tick past its +2 pi reach is near 0.01, not -2 pi.
    from iknet_core.kinematics.robots import named_chain

    ur5 = named_chain('ur5')
    curve = np.array([0.01, -1.0, 1.2, -0.5, 1.0, 0.3]) - np.linspace(0.0, 0.2, 10)[:, None] * [
        1,
        0,
        0,
        0,
        0,
        0,
    ]
    start = curve[0] + [2 * math.pi, 0.0, 0.0, 0.0, 0.0, 0.0]
    result = follow_path(ur5, pose_from_joints(ur5, curve), start)
    assert result.success, result.reason
    np.testing.assert_allclose(result.joints, curve, atol=1e-4)


def test_a_continuous_joint_goes_on_past_pi_where_a_limited_one_stops():
    # joint1 turning from 2.9 to 3.6 rad: a continuous joint's path goes on past pi (no jump,
    # no wrap); the same joint limited to +-pi stops at the first waypoint past it.
    curve = np.array([2.9, 0.1, 0.2, 0.3]) + np.linspace(0.0, 0.7, 36)[:, None] * [1, 0, 0, 0]
    past_pi = int(np.argmax(curve[:, 0] > math.pi))
    continuous = omx_with_one_turn_base()
    result = follow_path(continuous, pose_from_joints(continuous, curve), curve[0])
    assert result.success, result.reason
    np.testing.assert_allclose(result.joints, curve, atol=1e-4)
    limited = omx_with_one_turn_base(continuous=False)
    result = follow_path(limited, pose_from_joints(limited, curve), curve[0])
    assert result.failed_at == past_pi, result.reason
    # A continuous joint's state turns on: the path goes on from where the arm is.
    for turns in (1, -2):
        start = curve[0] + [turns * 2 * math.pi, 0.0, 0.0, 0.0]
        result = follow_path(continuous, pose_from_joints(continuous, curve), start)
        assert result.success, result.reason
        np.testing.assert_allclose(result.joints, curve + start - curve[0], atol=1e-4)


def test_random_curves_of_a_continuous_joint_go_past_pi_and_are_followed():
    chain = omx_with_one_turn_base()
    curves = smooth_joint_paths(chain, count=10, waypoints=50, seed=2)
    low, high = joint_bounds(chain, 'limits')
    assert (np.abs(curves[..., 0]).max(-1) > math.pi).sum() >= 2  # centred anywhere in the turn
    assert ((curves[..., 1:] >= low[1:]) & (curves[..., 1:] <= high[1:])).all()
    for curve in curves:
        result = follow_path(chain, pose_from_joints(chain, curve), curve[0])
        assert result.success, result.reason
        assert (
            np.abs(np.diff(result.joints, axis=0)).max()
            <= 1.5 * np.abs(np.diff(curve, axis=0)).max()
        )


def test_other_starts_of_a_continuous_joint_are_taken_nearest_the_arm():
    # Alternative starts are found inside -pi..pi; for an arm whose continuous joint1 is a turn
    # on, they are the arm's other solutions near it, and the arm's own is not among them a turn
    # away (a path from there would turn the base round for nothing).
    chain = omx_with_one_turn_base()
    arm = np.array([3.0 + 2 * math.pi, 0.1, 0.2, 0.3])
    target = forward_kinematics(chain, arm)[0]
    found = start_solutions(chain, target, 8, SolverSettings().position_only(), avoid=arm)
    assert len(found) >= 2  # position-only: elbow up and down, and the base's twins
    assert (np.abs(found[:, 0] - arm[0]) <= math.pi + 1e-9).all(), found[:, 0]
    assert (np.abs(found - arm).max(-1) >= SAME_SOLUTION_RAD).all(), found
    # alternative_paths takes a solver's starts (within +-pi) by the turns nearest the origin:
    # the best path starts where the arm is, not a turn away.
    within_pi = np.concatenate(
        [arm[None] - [2 * math.pi, 0, 0, 0], found - [2 * math.pi, 0, 0, 0]]
    )
    curve = arm + np.linspace(0.0, 0.05, 8)[:, None] * [1, 0, 0, 0]
    targets = forward_kinematics(chain, curve)[0]
    best = alternative_paths(
        chain, targets, within_pi, SolverSettings().position_only(), origin=arm
    )[0]
    assert best.success, best.reason
    assert abs(best.joints[0, 0] - arm[0]) < 0.01, best.joints[0]  # position-only: joint4 free


def test_arguments_of_another_arm_or_shape_are_refused_by_name():
    from iknet_core.kinematics.robots import named_chain
    from iknet_core.solvers.factory import build_solver

    panda, target = named_chain('panda'), np.array([0.4, 0.0, 0.5])
    settings = SolverSettings().position_only()
    omx_solver = build_solver('refine-from-zero', OMX_CHAIN, settings=settings)
    with pytest.raises(ValueError, match='the solver is for open_manipulator_x, the path for'):
        start_solutions(panda, target, 4, settings, solver=omx_solver)
    with pytest.raises(ValueError, match=r'expected avoid of shape \(7,\)'):
        start_solutions(panda, target, 4, settings, avoid=np.zeros(4))
    with pytest.raises(ValueError, match=r'expected origin of shape \(4,\)'):
        alternative_paths(OMX_CHAIN, np.array([[0.2, 0, 0.1]]), np.zeros((1, 4)), origin=[0, 0])


def test_time_stamps_refuse_waypoints_a_stopped_path_left_nan():
    stopped = np.array([[0.0, 0.0, 0.0, 0.0], [0.1, 0.0, 0.0, 0.0], [np.nan] * 4])
    with pytest.raises(ValueError, match=r'finite joint waypoints: a path that stopped .*reached'):
        time_stamps(stopped)
    with pytest.raises(ValueError, match=r'waypoints \(T >= 1, n\), got \(0, 4\)'):
        time_stamps(np.zeros((0, 4)))
    assert len(time_stamps(stopped[:2])) == 2


def test_a_non_positive_step_bound_is_refused():
    with pytest.raises(ValueError, match='max_step must be > 0'):
        follow_path(OMX_CHAIN, np.array([[0.2, 0, 0.1]]), np.zeros(4), max_step=0.0)


def test_the_path_benchmark_reports_every_arm(tmp_path):
    import json

    from iknet_train.path_bench import main

    out = tmp_path / 'report'
    argv = ['--chains', 'omx', '--paths', '3', '--waypoints', '40', '--peers', '--out', str(out)]
    assert main(argv) == 0
    report = json.loads((out / 'path_bench.json').read_text())
    omx = report['arms']['omx']['iknet follow_path']
    assert omx['paths'] == 3
    assert omx['waypoints_reached'] == 1.0 and omx['paths_followed'] == 1.0
    assert omx['jumps'] == 0 and omx['step_ratio_max'] <= 1.5
    assert omx['paths_within_step_target'] == 1.0
    assert 'iknet follow_path, not smoothed' not in report['arms']['omx']  # nothing to spare
    assert '| omx | iknet follow_path | 3 |' in (out / 'path_bench.md').read_text()
    best = report['arms']['omx']['iknet best of 8 starts']  # the default --alternatives
    assert best['paths'] == 3 and best['paths_followed'] == 1.0 and best['jumps'] == 0
    assert main([*argv, '--alternatives', '0']) == 0
    report = json.loads((out / 'path_bench.json').read_text())
    assert list(report['arms']['omx']) == ['iknet follow_path']
    assert main([*argv, '--alternatives', '-1']) == 1
    assert main(['--chains', 'omx', '--paths', '0', '--out', str(out)]) == 1
    assert main(['--chains', 'nonesuch', '--paths', '1', '--peers', '--out', str(out)]) == 1


def test_the_path_benchmark_tightens_on_request_where_the_arm_has_joints_to_spare(tmp_path):
    import json

    from iknet_train.path_bench import main

    random_panda_path(1, 0)  # skips without example-robot-data
    argv = ['--paths', '2', '--waypoints', '30', '--peers', '--alternatives', '0', '--tighten']
    assert main(['--chains', 'panda', 'omx', *argv, '--out', str(tmp_path)]) == 0
    arms = json.loads((tmp_path / 'path_bench.json').read_text())['arms']
    # The row's plumbing: whether tightening lowers a step is test_tighten_searches_a_path_...'s.
    tightened = arms['panda']['iknet follow_path, tightened']
    assert tightened['paths'] == 2 and tightened['paths_followed'] == 1.0
    assert tightened['step_ratio_max'] <= arms['panda']['iknet follow_path']['step_ratio_max']
    assert list(arms['omx']) == ['iknet follow_path']  # no joints to spare, no row: it says so
    assert (
        '- skipped --tighten on omx: its 4 joints have none to spare'
        in (tmp_path / 'path_bench.md').read_text()
    )


def test_the_path_benchmark_takes_an_arm_from_its_urdf(tmp_path, capsys):
    import json

    from iknet_core.kinematics.urdf import chain_from_urdf, chain_to_urdf
    from iknet_train.path_bench import main

    urdf = tmp_path / 'arm.urdf'
    urdf.write_text(chain_to_urdf(OMX_CHAIN))
    out = tmp_path / 'report'
    links = ['--base', OMX_CHAIN.base_frame, '--tip', OMX_CHAIN.tip_frame]
    argv = ['--paths', '3', '--waypoints', '40', '--peers', '--alternatives', '0']
    argv += ['--out', str(out)]
    assert main(['--urdf', str(urdf), *links, *argv]) == 0
    arms = json.loads((out / 'path_bench.json').read_text())['arms']
    name = chain_from_urdf(urdf, *links[1::2]).name
    assert list(arms) == [name]  # in place of --chains
    assert arms[name]['iknet follow_path']['paths'] == 3
    assert arms[name]['iknet follow_path']['paths_within_step_target'] == 1.0
    refused = {
        'needs --base and --tip': ['--urdf', str(urdf), '--base', OMX_CHAIN.base_frame],
        'give the --urdf too': links,
        'does not exist': ['--urdf', str(tmp_path / 'nonesuch.urdf'), *links],
        'give --chains or --urdf, not both': ['--urdf', str(urdf), *links, '--chains', 'omx'],
    }
    for message, arguments in refused.items():
        capsys.readouterr()
        assert main([*arguments, *argv]) == 1
        assert message in capsys.readouterr().err


def test_path_metrics_count_stops_and_jumps_and_peers_start_from_their_last_answer():
    from iknet_core.solvers.settings import SolverSettings
    from iknet_train.path_bench import follow_with_peer, path_metrics

    curves = smooth_joint_paths(OMX_CHAIN, count=3, waypoints=30, seed=6)
    poses = pose_from_joints(OMX_CHAIN, curves)
    starts = []

    def exact_but_jumping(position, rotation, start):
        starts.append(start.copy())
        # The generating joints, except a whole turn of joint1 (the same pose) in the middle
        # of the second path.
        path, step = divmod(len(starts) - 1, 30)
        turn = np.array([2 * np.pi, 0, 0, 0]) if (path, step) == (1, 15) else 0.0
        return curves[path, step] + turn

    joints, _ = follow_with_peer(exact_but_jumping, curves, poses)
    assert np.allclose(starts[1], curves[0, 0]) and np.allclose(starts[31], curves[1, 0])
    joints[2, 20:] = np.nan  # the third path stopped at waypoint 20
    metrics = path_metrics(OMX_CHAIN, curves, poses, joints, 1000.0, SolverSettings())
    assert metrics['paths'] == 3 and metrics['paths_stopped'] == 1
    assert metrics['jumps'] == 2  # into the turn and back
    assert metrics['paths_followed'] == pytest.approx(1 / 3)
    assert metrics['waypoints_reached'] == pytest.approx((30 + 30 + 20) / 90)
    assert metrics['step_ratio_max'] == pytest.approx(1.0)
    assert metrics['paths_within_step_target'] == pytest.approx(1 / 3)


def test_path_metrics_count_no_jump_where_a_continuous_joint_wraps():
    # A peer that answers a continuous joint within +-pi wraps it where the curve passes pi:
    # the same arm, which a controller turns the short way. The same whole turn of a joint
    # that is not continuous is a jump (above).
    from iknet_core.solvers.settings import SolverSettings
    from iknet_train.path_bench import path_metrics

    chain = omx_with_one_turn_base()
    curve = np.array([2.9, 0.1, 0.2, 0.3]) + np.linspace(0.0, 0.6, 30)[:, None] * [1, 0, 0, 0]
    poses = pose_from_joints(chain, curve[None])
    wrapped = curve.copy()
    wrapped[:, 0] = np.angle(np.exp(1j * curve[:, 0]))
    for arm, jumps in ((chain, 0), (omx_with_one_turn_base(continuous=False), 1)):
        metrics = path_metrics(arm, curve[None], poses, wrapped[None], 1000.0, SolverSettings())
        assert metrics['jumps'] == jumps and metrics['waypoints_reached'] == 1.0


def test_a_continuous_joint_turns_on_the_same_whatever_max_step():
    # PR2's right arm (7 joints, its forearm and wrist roll continuous): started three turns on,
    # each path is the same path three turns on, also under a huge max_step (the bounds
    # that let those joints past +-pi stay about the start, where their spare-joint pull goes).
    from iknet_core.kinematics.robots import example_robots_dir
    from iknet_core.kinematics.urdf import chain_from_urdf
    from iknet_core.solvers.policy import continuous_joints

    urdf = example_robots_dir() / 'pr2_description/urdf/pr2.urdf'
    chain = chain_from_urdf(urdf, 'torso_lift_link', 'r_gripper_tool_frame')
    turns = 3 * 2 * math.pi * continuous_joints(chain)
    assert turns.any()
    for curve in smooth_joint_paths(chain, count=4, waypoints=40, seed=1):
        poses = pose_from_joints(chain, curve)
        for max_step in (None, 1e17):
            followed = follow_path(chain, poses, curve[0], max_step=max_step)
            turned_on = follow_path(chain, poses, curve[0] + turns, max_step=max_step)
            assert followed.success and turned_on.success, (followed.reason, turned_on.reason)
            np.testing.assert_allclose(turned_on.joints - turns, followed.joints, atol=1e-8)


def test_a_stopped_path_of_whole_poses_on_an_arm_of_few_joints_says_positions_may_do():
    # A sideways line at one fixed orientation: the OM-X turns its base along it, so it cannot
    # keep the orientation; the reason says that its positions alone may be followed.
    start = np.array([0.0, -0.3, 0.4, 0.5])
    first = pose_from_joints(OMX_CHAIN, start)
    line = np.repeat(first[None], 20, 0)
    line[:, 1] += np.linspace(0.0, 0.05, 20)
    stopped = follow_path(OMX_CHAIN, line, start)
    assert not stopped.success
    assert 'with 4 joints the arm takes a whole pose only where its orientation fits' in (
        stopped.reason
    )
    followed = follow_path(OMX_CHAIN, line[:, :3], start)
    assert followed.success and followed.reason == ''
