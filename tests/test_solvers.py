import itertools
import math
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
from golden import REFERENCE_JOINTS, REFERENCE_POSES, random_observed_joints

from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_angle_between
from iknet_core.solvers import (
    AnalyticSolver,
    RefinedSolver,
    Refiner,
    Solutions,
    Solver,
    SolverSettings,
    Tolerance,
    constant_proposer,
)
from iknet_core.solvers.base import check_pose
from iknet_core.solvers.factory import NETWORK_SOLVERS, SOLVER_NAMES, build_solver
from iknet_core.solvers.policy import TURN, BranchPolicy, joint_bounds

EXACT = Tolerance(position=1e-9, orientation=1e-9)
STRAIGHT_ELBOW = -math.atan2(0.128, 0.024)
POLICY = BranchPolicy(OMX_CHAIN, SolverSettings(tolerance=EXACT))


@pytest.fixture(scope='module')
def refiner() -> Refiner:
    return Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT))


@pytest.fixture(scope='module')
def analytic() -> AnalyticSolver:
    return AnalyticSolver(OMX_CHAIN, SolverSettings(tolerance=EXACT))


def noisy_analytic(scale: float, per_pose: int = 4, seed: int = 0):
    """A stand-in for the network: closed-form branches plus joint noise, K = 2 * per_pose."""
    rng = np.random.default_rng(seed)
    analytic = AnalyticSolver(OMX_CHAIN)

    def propose(positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        branches = np.repeat(analytic.ik.branches(positions, rotations), per_pose, 1)
        return branches + rng.normal(0.0, scale, branches.shape)

    return propose


def fk_errors(q: np.ndarray, position: np.ndarray, rotation: np.ndarray):
    reached, turned = forward_kinematics(OMX_CHAIN, q)
    return np.linalg.norm(reached - position, axis=-1), rotation_angle_between(turned, rotation)


def assert_honest(solutions: Solutions, position: np.ndarray, rotation: np.ndarray) -> None:
    """Reported errors are FK's, and success means the best solution meets the tolerance."""
    position_errors, orientation_errors = fk_errors(solutions.joints, position, rotation)
    assert np.allclose(solutions.position_errors, position_errors, rtol=0, atol=1e-12)
    assert np.allclose(solutions.orientation_errors, orientation_errors, rtol=0, atol=1e-12)
    assert solutions.success == (
        position_errors[0] <= EXACT.position and orientation_errors[0] <= EXACT.orientation
    )


def test_analytic_agrees_with_fk_on_random_joints(analytic):
    q = random_observed_joints(1_000, seed=31)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    for joints, position, rotation in zip(q[:200], positions, rotations, strict=False):
        solutions = analytic.solve(position, rotation, max_solutions=8)
        assert solutions.success
        assert_honest(solutions, position, rotation)
        # The sampled joints are among the solutions (whole-turn twins of joint1 included).
        assert np.abs(solutions.joints - joints).max(axis=1).min() < 1e-9
    joints, position_errors, orientation_errors = analytic.solve_batch(positions, rotations)
    assert position_errors.max() < 1e-9 and orientation_errors.max() < 1e-9
    assert np.allclose(fk_errors(joints, positions, rotations)[0], position_errors, atol=1e-12)


def test_joint1_twin_inside_the_limits_comes_first():
    # Reference row 4: joint1 = 3.2858 rad, beyond pi; 3.2858 - 2 pi reaches the same pose.
    position = REFERENCE_POSES[3, :3]
    rotation = matrix_from_quaternion(REFERENCE_POSES[3, 3:])
    joints = REFERENCE_JOINTS[3]
    solver = AnalyticSolver(
        OMX_CHAIN, SolverSettings(tolerance=Tolerance(1e-5, 1e-5))
    )  # 6-decimal recording
    for seed in (None, joints):
        solutions = solver.solve(position, rotation, seed=seed, max_solutions=8)
        assert solutions.success and not solutions.left_limits
        assert solutions.joints[0, 0] == pytest.approx(joints[0] - 2 * math.pi, abs=1e-5)
        # The twin the arm is at is offered too, flagged outside the limits.
        twin = np.abs(solutions.joints - joints).max(axis=1) < 1e-5
        assert twin.sum() == 1 and not solutions.within_limits[twin][0]
    # With the seed, the rest of the first solution is the seed's (wrap-aware distance).
    seeded = solver.solve(position, rotation, seed=joints, max_solutions=8)
    assert np.abs(seeded.joints[0, 1:] - joints[1:]).max() < 1e-5


def test_joint1_at_pi_comes_on_the_seed_side(analytic):
    # joint1 = pi and -pi are both inside the limits: the seed's side comes first.
    q = np.array([math.pi, -0.3, 0.4, 0.5])
    position, rotation = forward_kinematics(OMX_CHAIN, q)
    for side in (1.0, -1.0):
        seed = np.array([side * 3.0, -0.3, 0.4, 0.5])
        solutions = analytic.solve(position, rotation, seed=seed, max_solutions=4)
        assert solutions.success and solutions.within_limits[:2].all()
        assert solutions.joints[0, 0] == pytest.approx(side * math.pi, abs=1e-9)
        assert solutions.joints[1, 0] == pytest.approx(-side * math.pi, abs=1e-9)


def test_ranking_prefers_tolerance_then_limits_then_the_seed():
    base = np.array([0.1, 0.2, 0.3, 0.4])
    joints = np.array(
        [
            base,  # misses the target
            [0.1, 0.2, 1.45, 0.4],  # joint3 beyond its limit 1.4, within its reach 1.49
            [0.1, 0.7, 0.3, 0.4],
            [0.1, 0.3, 0.3, 0.4],
        ]
    )
    position_errors = np.array([1e-3, 0.0, 2e-10, 1e-10])
    zero = np.zeros(4)
    seeded = POLICY.select(joints, position_errors, zero, seed=base, max_solutions=4)
    # Inside the limits, nearest to the seed first; then outside the limits; the miss dropped.
    assert np.array_equal(seeded.joints, joints[[3, 2, 1]])
    assert seeded.within_limits.tolist() == [True, True, False]
    assert seeded.success and not seeded.left_limits
    # Without a seed: smallest error first.
    free = POLICY.select(joints[[1, 2, 3]], position_errors[[1, 2, 3]], zero[:3], max_solutions=4)
    assert np.array_equal(free.joints, joints[[3, 2, 1]])
    # Nothing meets the tolerance: smallest error first (the nearest compromise, even outside
    # the limits), whatever the seed; no solution is dropped.
    misses = np.array([0.3, 0.01, 0.1, 0.2])
    for seed in (None, joints[0]):
        failed = POLICY.select(joints, misses, zero, seed=seed, max_solutions=4)
        assert not failed.success
        assert np.array_equal(failed.joints, joints[[1, 2, 3, 0]])


# Every joint turns twice around (a UR-style arm): 3**4 whole-turn variants per candidate.
TURNING_CHAIN = replace(
    OMX_CHAIN,
    joints=tuple(
        replace(
            joint,
            limits=(-2 * math.pi + 1.0, 2 * math.pi - 1.0),
            reach=(-2 * math.pi, 2 * math.pi),
        )
        for joint in OMX_CHAIN.joints
    ),
)


@pytest.mark.parametrize('chain', [OMX_CHAIN, TURNING_CHAIN], ids=['omx', 'turning'])
def test_one_solution_is_the_first_of_every_whole_turn_variant(chain):
    """For one solution the policy picks each candidate's best variant joint by joint; it must
    be the one that ranking every variant puts first."""
    policy = BranchPolicy(chain, SolverSettings(tolerance=EXACT))
    rng = np.random.default_rng(0)
    for _ in range(500):
        k = int(rng.integers(1, 4))
        joints = rng.uniform(-8.0, 8.0, (k, 4))
        joints[:, 1:] *= 0.2 if chain is OMX_CHAIN else 1.0
        # Another sample of the first candidate's arm pose: a near copy, or a turn away.
        if rng.random() < 0.5:
            joints = np.concatenate([joints, joints[:1] + rng.normal(0.0, 3e-4, (1, 4))])
        if rng.random() < 0.5:
            turn = np.array([[rng.choice([-1, 1]) * TURN, 0.0, 0.0, 0.0]])
            joints = np.concatenate([joints, joints[:1] + turn])
        k = len(joints)
        # Most meet the tolerance, by errors that differ: they, not the travel, rank the copies.
        errors = np.where(
            rng.random((2, k)) < 0.7,
            rng.uniform(0.0, 1e-9, (2, k)),
            rng.uniform(0.0, 1e-2, (2, k)),
        )
        seed = None if rng.random() < 0.3 else rng.uniform(-6.0, 6.0, 4)
        one = policy.select(joints, *errors, seed=seed, max_solutions=1)
        every = policy.select(joints, *errors, seed=seed, max_solutions=3)
        assert np.array_equal(one.joints, every.joints[:1])
        assert one.within_limits[0] == every.within_limits[0]
        assert one.meets_tolerance[0] == every.meets_tolerance[0]


def test_the_twin_nearest_the_seed_wins_however_the_distance_rounds():
    """Twins are equally far from the seed on the circle; the plain travel decides, not how
    the wrapped distance happens to round for each."""
    policy = BranchPolicy(TURNING_CHAIN, SolverSettings(tolerance=EXACT))
    low, high = joint_bounds(TURNING_CHAIN, 'limits')
    rng = np.random.default_rng(1)
    for _ in range(200):
        joints = rng.uniform(-3.0, 3.0, (1, 4))
        seed = rng.uniform(-6.0, 6.0, 4)
        twins = joints + 2 * math.pi * np.array(list(itertools.product((-1, 0, 1), repeat=4)))
        inside = twins[((twins >= low) & (twins <= high)).all(1)]
        nearest = np.linalg.norm(inside - seed, axis=1).min()
        for count in (1, 3):
            best = policy.select(joints, np.zeros(1), np.zeros(1), seed=seed, max_solutions=count)
            assert np.linalg.norm(best.joints[0] - seed) == pytest.approx(nearest, abs=1e-9)


def test_several_solutions_are_other_arm_poses_before_whole_turn_twins():
    """An arm whose joints turn whole turns has 2 ** 4 twins of each pose inside these limits:
    asked for several solutions, the other candidate comes second, not a twin of the first
    (the best's twins filled the answer on a Kinova Jaco2: 8 asked for, one arm pose)."""
    policy = BranchPolicy(TURNING_CHAIN, SolverSettings(tolerance=EXACT))
    joints = np.array([[2.0, 1.5, -1.5, 2.5], [-2.0, 1.2, 1.3, -2.2]])
    position_errors = np.array([1e-12, 1e-10])  # the first candidate ranks first
    for seed in (None, joints[0] + 0.01):
        solutions = policy.select(joints, position_errors, np.zeros(2), seed=seed, max_solutions=2)
        arms = (solutions.joints + math.pi) % (2 * math.pi) - math.pi
        assert np.allclose(arms, joints, atol=1e-12)
        every = policy.select(joints, position_errors, np.zeros(2), seed=seed, max_solutions=64)
        assert len(every) == 32 and every.within_limits.all() and every.meets_tolerance.all()
        assert np.array_equal(every.joints[:2], solutions.joints)


def test_twins_from_two_candidates_come_after_other_arm_poses_and_unseeded_nearest_zero():
    """Two samples (or restarts) that end a whole turn apart are one arm pose: asked for two
    solutions, the other arm pose comes second, not the twin (a UR5 got copies of one arm pose
    in place of others). Without a seed the twin nearest zero comes first, not one a turn out
    (a leg's joint answered at -8.6 rad where -2.3 reaches the same)."""
    policy = BranchPolicy(TURNING_CHAIN, SolverSettings(tolerance=EXACT))
    turn = np.array([2 * math.pi, 0.0, 0.0, 0.0])
    pose = np.array([4.0, 0.3, -0.2, 0.1])
    other = np.array([0.5, -0.4, 0.6, -0.3])
    joints = np.stack([pose, pose - turn, other])
    zeros = np.zeros(3)
    two = policy.select(joints, zeros, zeros, max_solutions=2)
    np.testing.assert_allclose(two.joints, [pose - turn, other], atol=1e-12)
    one = policy.select(pose[None], zeros[:1], zeros[:1])
    np.testing.assert_allclose(one.joints, [pose - turn], atol=1e-12)
    seeded = policy.select(joints, zeros, zeros, seed=pose + 0.1, max_solutions=2)
    np.testing.assert_allclose(seeded.joints, [pose, other], atol=1e-12)
    # A candidate with a NaN (a network's) is no arm pose: it took the others into its own.
    with_nan = np.concatenate([np.full((1, 4), np.nan), joints])
    two = policy.select(with_nan, np.zeros(4), np.zeros(4), seed=pose + 0.1, max_solutions=2)
    np.testing.assert_allclose(two.joints, [pose, other], atol=1e-12)


def test_left_limits_is_reported_when_only_solutions_outside_the_limits_exist():
    joints = np.array([[0.1, 0.2, 1.45, 0.0], [0.1, 0.2, 1.46, 0.0]])  # joint3 beyond 1.4
    solutions = POLICY.select(joints, np.zeros(2), np.zeros(2), max_solutions=2)
    assert solutions.success and solutions.left_limits
    inside = np.array([[0.1, 0.2, 1.3, 0.0]])
    both = np.concatenate([joints, inside])
    solutions = POLICY.select(both, np.zeros(3), np.zeros(3), max_solutions=3)
    assert not solutions.left_limits and solutions.joints[0, 2] == 1.3


def test_solutions_outside_the_reach_never_succeed():
    joints = np.array([[0.1, 0.2, 2.5, 0.0], [0.1, 0.2, 1.3, 0.0]])  # joint3 reach ends at 1.49
    solutions = POLICY.select(joints, np.zeros(2), np.zeros(2), max_solutions=2)
    assert len(solutions) == 1 and solutions.joints[0, 2] == 1.3
    alone = POLICY.select(joints[:1], np.zeros(1), np.zeros(1))
    assert not alone.success and alone.left_limits
    assert not POLICY.within_reach(joints[0]) and POLICY.within_reach(joints[1])


def test_answers_outside_soft_limits_are_moved_inside_where_a_solution_there_exists():
    from iknet_core.kinematics.robots import example_robots_dir, named_chain

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    # A Panda with soft limits 0.15 rad inside its URDF limits, as a PR2's safety_controller
    # gives: refinement from zero, clamped into the reach, ended outside them for about a third
    # of poses of joints inside them; every one has a solution inside.
    panda = named_chain('panda')
    joints = tuple(
        replace(joint, limits=(joint.reach[0] + 0.15, joint.reach[1] - 0.15))
        for joint in panda.joints
    )
    soft = replace(panda, joints=joints)
    low, high = joint_bounds(soft, 'limits')
    q = np.random.default_rng(34).uniform(low, high, (200, 7))
    positions, rotations = forward_kinematics(soft, q)
    settings = SolverSettings(tolerance=Tolerance(1e-6, 1e-5))
    solver = RefinedSolver(constant_proposer(np.zeros(7)), Refiner(soft, settings))
    solved, position_errors, orientation_errors = solver.solve_batch(positions, rotations)
    assert settings.tolerance.met(position_errors, orientation_errors).all()
    assert solver.policy.within_limits(solved).all()
    for position, rotation in zip(positions[:40], rotations[:40], strict=True):
        solutions = solver.solve(position, rotation)
        assert solutions.success and not solutions.left_limits
        with_seed = solver.solve(position, rotation, seed=np.zeros(7), max_solutions=3)
        assert with_seed.success and not with_seed.left_limits


def test_an_answer_outside_the_limits_stays_where_no_solution_inside_exists():
    # OM-X joint3 past its software limit (1.4 rad) inside its hand-guided reach: no other
    # branch of the pose is inside, so refinement inside the limits cannot take it there.
    q = np.array([0.1, 0.2, 1.45, -0.3])
    position, rotation = forward_kinematics(OMX_CHAIN, q)
    settings = SolverSettings(tolerance=EXACT)
    analytic = AnalyticSolver(OMX_CHAIN, settings).solve(position, rotation, max_solutions=8)
    assert not analytic.within_limits[analytic.meets_tolerance].any()
    solver = RefinedSolver(constant_proposer(np.zeros(4)), Refiner(OMX_CHAIN, settings))
    solutions = solver.solve(position, rotation)
    assert solutions.success and solutions.left_limits
    assert_honest(solutions, position, rotation)
    joints, position_errors, _ = solver.solve_batch(position[None], rotation[None])
    assert position_errors[0] <= EXACT.position and not POLICY.within_limits(joints[0])


def test_refined_noisy_proposals_reach_1e_9_m_and_drop_duplicates(refiner):
    solver = RefinedSolver(noisy_analytic(0.05), refiner)
    q = random_observed_joints(200, seed=32)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    for position, rotation in zip(positions, rotations, strict=True):
        solutions = solver.solve(position, rotation, max_solutions=8)
        assert solutions.success
        assert_honest(solutions, position, rotation)
        # 8 hypotheses on 2 branches: duplicates are merged; whole-turn twins stay distinct.
        assert len(solutions) <= 4
        gaps = np.abs(solutions.joints[:, None] - solutions.joints[None]).max(-1)
        assert gaps[~np.eye(len(solutions), dtype=bool)].min(initial=np.inf) > 1e-6
    joints, position_errors, orientation_errors = solver.solve_batch(positions, rotations)
    assert position_errors.max() <= 1e-9 and orientation_errors.max() <= 1e-9
    assert np.allclose(fk_errors(joints, positions, rotations)[0], position_errors, atol=1e-14)


ASK_FOR_EVERY_SOLUTION = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
import numpy as np
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.solvers.factory import build_solver
solver = build_solver('refine-from-zero', OMX_CHAIN)
position, rotation = forward_kinematics(OMX_CHAIN, np.array([[0.1, 0.2, 0.3, 0.1]]))
solutions = solver.solve(position[0], rotation[0], max_solutions=2**32 - 1)
print(len(solutions), solutions.success)
"""


def test_a_request_for_more_solutions_than_exist_is_capped_not_allocated():
    """SolveIK's max_solutions is a uint32: 2**32 - 1 once failed with a MemoryError (a buffer
    of 34 GB; here the address space is capped at 8 GB, so a machine with more memory fails it
    too)."""
    done = subprocess.run(
        [sys.executable, '-c', ASK_FOR_EVERY_SOLUTION], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ['1', 'True']


def test_seed_gives_the_nearest_branch_first(refiner):
    solver = RefinedSolver(noisy_analytic(0.05, seed=33), refiner)
    q = random_observed_joints(200, seed=33)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    for joints, position, rotation in zip(q, positions, rotations, strict=True):
        solutions = solver.solve(position, rotation, seed=joints + 0.02, max_solutions=4)
        assert solutions.success
        # The seed's own branch first, unless it is outside the limits and another is inside.
        if POLICY.within_limits(joints) or not solutions.within_limits[0]:
            assert np.abs(solutions.joints[0] - joints).max() < 1e-6
        else:
            assert solutions.within_limits[0]


def test_seed_near_the_straight_elbow_keeps_its_branch(refiner):
    # The zero seed proposes the bent elbow; the caller's seed on the other side must win.
    solver = RefinedSolver(constant_proposer(np.zeros(4)), refiner)
    for side in (-1.0, 1.0):
        q = np.array([0.3, 0.5, STRAIGHT_ELBOW + side * 0.03, 0.2])
        position, rotation = forward_kinematics(OMX_CHAIN, q)
        seed = q + np.array([0.01, -0.01, -side * 0.02, 0.01])
        solutions = solver.solve(position, rotation, seed=seed, max_solutions=3)
        assert solutions.success
        assert np.sign(solutions.joints[0, 2] - STRAIGHT_ELBOW) == side
        assert np.abs(solutions.joints[0] - q).max() < 1e-6


def test_unreachable_targets_fail_with_the_nearest_solution(refiner):
    solver = RefinedSolver(AnalyticSolver(OMX_CHAIN).ik.branches, refiner)
    far = np.array([0.6, 0.1, 0.3])
    solutions = solver.solve(far, np.eye(3), max_solutions=2)
    assert not solutions.success and len(solutions) >= 1
    assert_honest(solutions, far, np.eye(3))
    # The nearest point the tool reaches is at the edge of the workspace, well short of 0.6 m.
    assert 0.1 < solutions.position_errors[0] < 0.4
    _, position_errors, _ = solver.solve_batch(far[None], np.eye(3)[None])
    assert position_errors[0] == pytest.approx(solutions.position_errors[0], abs=1e-9)


def test_zero_seed_errors_are_reported_honestly(refiner):
    solver = RefinedSolver(constant_proposer(np.zeros(4)), refiner)
    q = random_observed_joints(300, seed=34)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    joints, position_errors, orientation_errors = solver.solve_batch(positions, rotations)
    expected_position, expected_orientation = fk_errors(joints, positions, rotations)
    assert np.allclose(position_errors, expected_position, rtol=0, atol=1e-12)
    assert np.allclose(orientation_errors, expected_orientation, rtol=0, atol=1e-12)
    # From zero most poses are found; the rest are reported, not hidden.
    assert np.mean(position_errors <= 1e-9) > 0.8


@pytest.mark.parametrize('backend', ['analytic', 'refined', 'refined from zero'])
def test_batch_equals_single_calls(backend, analytic, refiner):
    # Two exact hypotheses per pose take the compiled first try; a lone zero seed restarts.
    solver: Solver = {
        'analytic': analytic,
        'refined': RefinedSolver(noisy_analytic(0.0, per_pose=1), refiner),
        'refined from zero': RefinedSolver(constant_proposer(np.zeros(4)), refiner),
    }[backend]
    q = random_observed_joints(100, seed=35)
    positions, rotations = forward_kinematics(OMX_CHAIN, q)
    joints, position_errors, orientation_errors = solver.solve_batch(positions, rotations)
    for index, (position, rotation) in enumerate(zip(positions, rotations, strict=True)):
        single = solver.solve(position, rotation)
        # The batch path refines the closest hypothesis first; where two exact hypotheses lie
        # within the duplicate tolerance it may keep the other one of the pair.
        assert np.abs(single.joints[0] - joints[index]).max() < 1e-9
        assert single.position_errors[0] == pytest.approx(position_errors[index], abs=1e-9)
        assert single.orientation_errors[0] == pytest.approx(orientation_errors[index], abs=1e-9)


def test_bad_inputs_are_refused(analytic, refiner):
    with pytest.raises(ValueError, match=r'\(4,\)'):
        analytic.solve(np.zeros(4), np.eye(3))
    with pytest.raises(ValueError, match=r'seed of shape \(4,\), got \(3,\)'):
        analytic.solve(np.zeros(3), np.eye(3), seed=np.zeros(3))
    with pytest.raises(ValueError, match='not finite'):
        analytic.solve(np.zeros(3), np.eye(3), seed=np.array([0.0, np.nan, 0.0, 0.0]))
    wrong = RefinedSolver(lambda positions, rotations: np.zeros((len(positions), 3)), refiner)
    with pytest.raises(ValueError, match=r'\(1, K >= 1, 4\), got \(1, 3\)'):
        wrong.solve(np.zeros(3), np.eye(3))
    empty = RefinedSolver(lambda positions, rotations: np.zeros((len(positions), 0, 4)), refiner)
    with pytest.raises(ValueError, match=r'got \(1, 0, 4\)'):
        empty.solve(np.zeros(3), np.eye(3))
    from_zero = RefinedSolver(lambda positions, _: np.zeros((len(positions), 1, 4)), refiner)
    for solver in (analytic, from_zero):
        # A fast-path target (C-contiguous float64) with a NaN or inf is refused too.
        for bad in (np.array([0.2, np.nan, 0.1]), np.array([0.2, 0.0, np.inf])):
            with pytest.raises(ValueError, match='is not finite'):
                solver.solve(bad, np.eye(3))
        with pytest.raises(ValueError, match='max_solutions must be at least 1, got 0'):
            solver.solve(np.zeros(3), np.eye(3), max_solutions=0)
        with pytest.raises(ValueError, match=r'max_solutions must be a whole number, got 2\.5'):
            solver.solve(np.zeros(3), np.eye(3), max_solutions=2.5)


def test_targets_in_any_array_layout_solve_alike(analytic):
    # check_pose passes C-contiguous native float64 targets through as they are (the server's
    # checked requests); every other layout is converted, and a wrong shape is refused.
    position, rotation = forward_kinematics(OMX_CHAIN, REFERENCE_JOINTS[:1])
    position, rotation = position[0], rotation[0]
    checked = check_pose(position, rotation)
    assert checked[0] is position and checked[1] is rotation
    expected = analytic.solve(position, rotation).joints
    layouts = [
        (position.tolist(), rotation.tolist()),
        (position.astype('>f8'), np.asfortranarray(rotation)),  # big-endian, column-major
        (np.repeat(position, 2)[::2], rotation.astype(np.float32)),  # strided, single precision
    ]
    for layout_position, layout_rotation in layouts:
        converted = check_pose(layout_position, layout_rotation)
        assert all(a.flags.c_contiguous and a.dtype == np.float64 for a in converted)
        found = analytic.solve(layout_position, layout_rotation).joints
        assert np.abs(found - expected).max() < 1e-5
    with pytest.raises(ValueError, match=r'\(3, 3\)'):
        analytic.solve(position, np.eye(4)[:3, :4].copy())
    with pytest.raises(ValueError, match=r'\(2,\)'):
        analytic.solve(position[:2].copy(), rotation)


@pytest.mark.parametrize('name', SOLVER_NAMES)
def test_every_solver_pickles_and_answers_alike_after(name):
    # Solvers go to worker processes (multiprocessing, a pool of servers) by pickling.
    import pickle

    from iknet_core.resources import DEFAULT_MODEL, shipped
    from iknet_core.solvers.factory import build_solver
    from iknet_core.solvers.network import NetworkProposer

    network = NetworkProposer(shipped(DEFAULT_MODEL)) if name in NETWORK_SOLVERS else None
    solver = build_solver(name, OMX_CHAIN, network)
    position, rotation = forward_kinematics(OMX_CHAIN, REFERENCE_JOINTS[0])
    copy = pickle.loads(pickle.dumps(solver))
    expected, found = solver.solve(position, rotation), copy.solve(position, rotation)
    np.testing.assert_array_equal(found.joints, expected.joints)


@pytest.mark.parametrize('name', SOLVER_NAMES)
def test_a_non_finite_row_of_a_batch_is_answered_as_a_miss_not_a_failure(name):
    from iknet_core.resources import DEFAULT_MODEL, shipped
    from iknet_core.solvers.factory import build_solver
    from iknet_core.solvers.network import NetworkProposer

    network = NetworkProposer(shipped(DEFAULT_MODEL)) if name in NETWORK_SOLVERS else None
    solver = build_solver(name, OMX_CHAIN, network)
    positions, rotations = forward_kinematics(OMX_CHAIN, REFERENCE_JOINTS[:3])
    positions = positions.copy()
    positions[1, 0] = np.nan
    joints, position_errors, _ = solver.solve_batch(positions, rotations)
    alone, alone_errors, _ = solver.solve_batch(positions[[0, 2]], rotations[[0, 2]])
    assert np.isnan(position_errors[1])
    np.testing.assert_array_equal(joints[[0, 2]], alone)
    np.testing.assert_array_equal(position_errors[[0, 2]], alone_errors)


def test_refine_from_zero_asked_for_several_solutions_finds_other_branches():
    # One seed finds one solution; asked for several, it refines seeds spread over the limits
    # too: a UR5's eight arm poses of a target (shoulder, elbow, wrist each two ways).
    from iknet_core.kinematics.robots import example_robots_dir, named_chain
    from iknet_core.metrics import distinct_solutions
    from iknet_core.solvers.policy import full_turn_joints

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    ur5 = named_chain('ur5')
    solver = build_solver('refine-from-zero', ur5, settings=SolverSettings(tolerance=EXACT))
    low, high = joint_bounds(ur5, 'limits')
    q = np.random.default_rng(1).uniform(low, high, (5, ur5.n_joints))
    positions, rotations = forward_kinematics(ur5, q)
    arms = []
    for position, rotation in zip(positions, rotations, strict=True):
        solutions = solver.solve(position, rotation, max_solutions=8)
        exact = solutions.joints[solutions.meets_tolerance & solutions.within_limits]
        arms.append(len(distinct_solutions(exact, full_turn_joints(ur5))))  # not turn twins
    assert np.mean(arms) >= 3, arms  # one seed: one arm
