import dataclasses
import math
import threading

import numpy as np
import pytest
from golden import random_observed_joints

from iknet_core.kinematics import OMX_CHAIN, Chain, forward_kinematics, geometric_jacobian
from iknet_core.kinematics.transforms import axis_angle_matrix, rotation_angle_between
from iknet_core.solvers import Refiner, SolverSettings, Tolerance, kernels
from iknet_core.solvers.kernels import CompiledChain
from iknet_core.solvers.parallel import run_in_blocks

EXACT = Tolerance(position=1e-9, orientation=1e-9)
# joint3 value (rad) at which the OM-X elbow is straight: the upper link is (0.024, 0, 0.128).
STRAIGHT_ELBOW = -math.atan2(0.128, 0.024)


@pytest.fixture(scope='module')
def refiner() -> Refiner:
    return Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT))


def targets(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return forward_kinematics(OMX_CHAIN, q)


def fk_errors(q: np.ndarray, position: np.ndarray, rotation: np.ndarray):
    reached, turned = forward_kinematics(OMX_CHAIN, q)
    return np.linalg.norm(reached - position, axis=-1), rotation_angle_between(turned, rotation)


def tilted_chain() -> Chain:
    """A chain with rotated joint origins, a rotated tip and an x axis, unlike OM-X."""
    data = OMX_CHAIN.to_dict()
    data['joints'][1]['origin_rpy'] = (0.1, -0.2, 0.3)
    data['joints'][2]['axis'] = (1.0, 0.0, 0.0)
    data['tip_rpy'] = (0.4, 0.0, -0.5)
    return Chain.from_dict(data)


@pytest.mark.parametrize('chain', [OMX_CHAIN, tilted_chain()], ids=['omx', 'tilted'])
def test_compiled_fk_and_jacobian_equal_the_generic_ones(chain):
    q = random_observed_joints(2_000, seed=11)
    positions, rotations, jacobians = CompiledChain(chain).pose_jacobian(q)
    expected_positions, expected_rotations = forward_kinematics(chain, q)
    assert np.abs(positions - expected_positions).max() < 1e-14
    assert np.abs(rotations - expected_rotations).max() < 1e-14
    assert np.abs(jacobians - geometric_jacobian(chain, q)).max() < 1e-14


def test_a_chains_arrays_are_built_once_and_follow_its_description():
    tilted = kernels.ChainArrays.from_chain(tilted_chain())
    assert kernels.ChainArrays.from_chain(tilted_chain()) is tilted  # an equal chain: the same
    omx = kernels.ChainArrays.from_chain(OMX_CHAIN)
    assert not np.array_equal(omx.joints, tilted.joints)
    assert not np.array_equal(omx.tip, tilted.tip)
    # A chain made with a list is not hashable: its arrays are built, each time.
    listed = dataclasses.replace(tilted_chain(), tip_xyz=list(OMX_CHAIN.tip_xyz))
    built = kernels.ChainArrays.from_chain(listed)
    assert built is not kernels.ChainArrays.from_chain(listed)
    np.testing.assert_array_equal(built.joints, tilted.joints)
    np.testing.assert_array_equal(built.tip, tilted.tip)


@pytest.mark.parametrize('chain', [OMX_CHAIN, tilted_chain()], ids=['omx', 'tilted'])
def test_the_null_space_basis_is_orthonormal_and_moves_no_task_row(chain):
    arrays = kernels.ChainArrays.from_chain(chain)
    work, scratch = kernels.workspace(4), np.empty((4, 6))
    straight = np.array([0.3, 0.0, STRAIGHT_ELBOW, 0.0])  # the position rows lose a rank
    for q in [*random_observed_joints(50, seed=5), straight]:
        jacobian = geometric_jacobian(chain, q)
        for rows in (2, 3):  # 2 or 1 joints to spare
            basis = np.empty((4, 4 - rows))
            kernels.null_space_basis(q, arrays.joints, arrays.tip, rows, work, scratch, basis)
            np.testing.assert_allclose(basis.T @ basis, np.eye(4 - rows), atol=1e-12)
            assert np.abs(jacobian[:rows] @ basis).max() < 1e-12


def test_compiled_pose_errors_equal_fk_errors():
    q = random_observed_joints(500, seed=12)
    other = random_observed_joints(500, seed=13)
    position, rotation = targets(other)
    position_errors, orientation_errors = CompiledChain(OMX_CHAIN).pose_errors(
        q, position, rotation
    )
    expected_position, expected_orientation = fk_errors(q, position, rotation)
    assert np.abs(position_errors - expected_position).max() < 1e-14
    assert np.abs(orientation_errors - expected_orientation).max() < 1e-12


def test_reaches_1e_9_m_from_noisy_seeds_on_1000_reachable_poses(refiner):
    q = random_observed_joints(1_000, seed=21)
    position, rotation = targets(q)
    seeds = q + np.random.default_rng(21).normal(0.0, 0.05, q.shape)
    result = refiner.refine(position, rotation, seeds)
    assert result.converged.all()
    position_errors, orientation_errors = fk_errors(result.joints, position, rotation)
    assert position_errors.max() <= 1e-9
    assert orientation_errors.max() <= 1e-9
    # The reported errors are those of FK of the returned joints.
    assert np.abs(result.position_errors - position_errors).max() < 1e-14
    # Quadratic convergence: a handful of iterations.
    assert np.median(result.iterations) <= 4
    assert np.quantile(result.iterations, 0.99) <= 10


def test_stops_as_soon_as_the_tolerance_is_met():
    q = random_observed_joints(200, seed=22)
    position, rotation = targets(q)
    exact = Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT)).refine(position, rotation, q)
    assert (exact.iterations == 0).all()
    seeds = q + 0.05
    loose = Refiner(OMX_CHAIN, SolverSettings(tolerance=Tolerance(1e-3, 1e-2))).refine(
        position, rotation, seeds
    )
    tight = Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT)).refine(position, rotation, seeds)
    assert loose.converged.all() and tight.converged.all()
    assert (loose.iterations <= tight.iterations).all()
    assert loose.iterations.sum() < tight.iterations.sum()


def test_a_seed_near_the_straight_elbow_keeps_its_branch(refiner):
    rng = np.random.default_rng(23)
    count = 200
    q = random_observed_joints(count, seed=23)
    side = rng.choice([-1.0, 1.0], count)
    # Elbow 0.02-0.06 rad from straight, the seed a further 0-0.015 rad towards straight.
    bend = rng.uniform(0.02, 0.06, count)
    q[:, 2] = STRAIGHT_ELBOW + side * bend
    seeds = q + rng.normal(0.0, 0.005, q.shape)
    seeds[:, 2] = STRAIGHT_ELBOW + side * (bend - rng.uniform(0.0, 0.015, count))
    position, rotation = targets(q)
    result = refiner.refine(position, rotation, seeds)
    assert result.converged.all()
    assert np.all(np.sign(result.joints[:, 2] - STRAIGHT_ELBOW) == side)
    assert np.abs(result.joints - q).max() < 1e-6


def test_unreachable_position_gives_the_nearest_stretched_arm_and_its_error(refiner):
    # Stretch the arm straight and level, then ask for 5 cm further along the arm.
    q = np.array([[0.4, 0.0, STRAIGHT_ELBOW, 0.0]])
    q[0, 1] = -STRAIGHT_ELBOW  # the straight upper arm + forearm tilted down to level
    position, rotation = targets(q)
    direction = rotation[0, :, 0]
    # Tool, forearm and upper link all point along the tool x axis here.
    far = position + 0.05 * direction
    result = refiner.refine(far, rotation, q + 0.1)
    assert not result.converged[0]
    # At the stretched (singular) arm with a residual, convergence is linear: close, not exact.
    assert result.position_errors[0] == pytest.approx(0.05, abs=1e-6)
    assert result.orientation_errors[0] < 1e-4
    position_errors, orientation_errors = fk_errors(result.joints, far, rotation)
    assert position_errors[0] == pytest.approx(result.position_errors[0], abs=1e-12)
    assert orientation_errors[0] == pytest.approx(result.orientation_errors[0], abs=1e-12)


def test_unreachable_orientation_gives_the_weighted_compromise(refiner):
    # A 4-DOF arm cannot roll its tool: the roll is traded against position by the weight.
    q = random_observed_joints(100, seed=24)
    position, rotation = targets(q)
    roll = 0.2
    rolled = rotation @ axis_angle_matrix((1.0, 0.0, 0.0), np.full(100, roll))
    result = refiner.refine(position, rolled, q + 0.02)
    assert not result.converged.any()
    position_errors, orientation_errors = fk_errors(result.joints, position, rolled)
    assert np.abs(result.position_errors - position_errors).max() < 1e-14
    assert np.abs(result.orientation_errors - orientation_errors).max() < 1e-12
    # No worse than the joints that meet the position and leave the whole roll as error.
    cost = position_errors**2 + (0.1 * orientation_errors) ** 2
    assert np.all(cost <= (0.1 * roll) ** 2 + 1e-15)
    # The weight is the knob: the less orientation counts, the closer the position.
    errors = [
        Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT, orientation_weight=weight))
        .refine(position, rolled, q + 0.02)
        .position_errors
        for weight in (0.1, 0.01, 0.0)
    ]
    assert errors[0].mean() > errors[1].mean() > 1e-9 > errors[2].max()


def test_far_unreachable_targets_end_no_worse_than_random_configurations(refiner):
    # The compromise is a local optimum of the weighted cost: compare with a dense random sample.
    rng = np.random.default_rng(25)
    far = rng.normal(size=(20, 3))
    far = far / np.linalg.norm(far, axis=1, keepdims=True) * 0.8
    rotation = np.broadcast_to(np.eye(3), (20, 3, 3))
    result = refiner.refine(far, rotation, np.zeros((20, 4)))
    assert not result.converged.any()
    cost = result.position_errors**2 + (0.1 * result.orientation_errors) ** 2
    sample = random_observed_joints(20_000, seed=25)
    for target, best in zip(far, cost, strict=True):
        sample_position, sample_rotation = fk_errors(sample, target, np.eye(3))
        assert best <= (sample_position**2 + (0.1 * sample_rotation) ** 2).min() + 1e-9


def test_bounds_keep_joints_inside_reach_or_limits():
    q = random_observed_joints(300, seed=26)
    position, rotation = targets(q)
    seeds = q + np.random.default_rng(26).normal(0.0, 0.3, q.shape)
    for bounds in ('reach', 'limits'):
        joints = Refiner(OMX_CHAIN, bounds=bounds).refine(position, rotation, seeds).joints
        low, high = np.array([getattr(joint, bounds) for joint in OMX_CHAIN.joints]).T
        assert np.all((joints >= low) & (joints <= high)), bounds


def test_a_joint_pushed_against_its_limit_is_held_while_the_others_converge():
    from iknet_core.kinematics.robots import example_robots_dir, named_chain
    from iknet_core.solvers.policy import joint_bounds

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    # Panda seeds 0.3 rad off random solutions inside its limits, many clamped onto a limit:
    # clamping alone (the step computed as if that joint moved) reached 96.8 % of them in ~10
    # iterations; holding the joint there and solving the step for the others, 99.6 % in ~5.
    panda = named_chain('panda')
    low, high = joint_bounds(panda, 'limits')
    rng = np.random.default_rng(0)
    q = rng.uniform(low, high, (500, 7))
    seeds = np.clip(q + rng.normal(0.0, 0.3, q.shape), low, high)
    settings = SolverSettings(Tolerance(1e-6, 1e-5), restarts=0)
    result = Refiner(panda, settings, bounds='limits').refine(*forward_kinematics(panda, q), seeds)
    assert result.converged.mean() >= 0.99
    assert result.iterations.mean() <= 7.0
    assert ((result.joints >= low) & (result.joints <= high)).all()


def test_joint1_wraps_instead_of_clamping(refiner):
    # Seed joint1 just below -pi (outside the reach): it is moved by a turn, not clamped.
    q = np.array([[3.1, -0.3, 0.4, 0.5]])
    position, rotation = targets(q)
    seed = q - np.array([[2 * math.pi + 0.02, 0.0, 0.0, 0.0]])
    result = refiner.refine(position, rotation, seed)
    assert result.converged[0]
    assert result.joints[0, 0] == pytest.approx(3.1, abs=1e-9)


def test_batch_equals_single_calls(refiner):
    q = random_observed_joints(50, seed=27)
    position, rotation = targets(q)
    seeds = q + np.random.default_rng(27).normal(0.0, 0.05, q.shape)
    batch = refiner.refine(position, rotation, seeds)
    for index in range(len(q)):
        single = refiner.refine(
            position[index : index + 1], rotation[index : index + 1], seeds[index : index + 1]
        )
        assert np.array_equal(single.joints[0], batch.joints[index])
        assert single.position_errors[0] == batch.position_errors[index]
        assert single.iterations[0] == batch.iterations[index]


def test_non_finite_targets_fail_without_raising(refiner):
    position = np.array([[np.nan, 0.1, 0.1]])
    result = refiner.refine(position, np.eye(3)[None], np.zeros((1, 4)))
    assert not result.converged[0]
    assert np.isnan(result.position_errors[0])


def test_bad_shapes_are_refused(refiner):
    with pytest.raises(ValueError, match=r'\(2, 4\).*\(2, 3\)'):
        refiner.refine(np.zeros((2, 3)), np.tile(np.eye(3), (2, 1, 1)), np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r'\(4, 3\)'):
        refiner.refine(np.zeros((4, 3)), np.eye(3)[None], np.zeros((4, 4)))
    with pytest.raises(ValueError, match='orientation_weight'):
        SolverSettings(orientation_weight=-1.0)
    with pytest.raises(ValueError, match='bounds'):
        Refiner(OMX_CHAIN, bounds='soft')


@pytest.mark.parametrize('angle', [1e-12, 0.5, 2.9, 3.0, 3.1, math.pi - 1e-9])
def test_rotation_residual_is_the_rotation_vector_up_to_a_half_turn(angle):
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    rotation = axis_angle_matrix((0.0, 0.0, 1.0), np.array(0.7))
    turn = axis_angle_matrix(tuple(axis), np.array(angle))
    residual = np.empty(6)
    position_error, orientation_error = kernels._residual(
        np.zeros(3), rotation, np.ones(3), turn @ rotation, 2.0, residual
    )
    assert position_error == pytest.approx(math.sqrt(3.0), abs=1e-15)
    assert orientation_error == pytest.approx(angle, abs=1e-12)
    assert np.allclose(residual[3:], 2.0 * angle * axis, rtol=0, atol=1e-7)


def test_a_seed_facing_the_other_way_still_converges(refiner):
    q = np.array([[3.0, -0.3, 0.4, 0.5]])
    position, rotation = targets(q)
    result = refiner.refine(position, rotation, np.array([[-0.12, -0.3, 0.4, 0.5]]))
    assert result.converged[0]


def test_batches_on_threads_give_the_one_thread_answer_bit_for_bit():
    q = random_observed_joints(1_000, seed=31)
    position, rotation = targets(q)
    seeds = q + np.random.default_rng(31).normal(0.0, 0.5, q.shape)
    one, four = (
        Refiner(OMX_CHAIN, SolverSettings(tolerance=EXACT, batch_threads=threads)).refine(
            position, rotation, seeds, restarts=True
        )
        for threads in (1, 4)
    )
    for field in ('joints', 'position_errors', 'orientation_errors', 'iterations'):
        assert np.array_equal(getattr(one, field), getattr(four, field)), field


def test_row_blocks_cover_every_row_once_off_the_callers_thread():
    seen = np.zeros(1_000, dtype=int)
    blocks = []

    def run(rows: slice) -> None:
        blocks.append((rows, threading.current_thread().name))
        seen[rows] += 1

    run_in_blocks(len(seen), 3, run)
    assert (seen == 1).all()
    assert len(blocks) == 3
    assert all(name.startswith('iknet-batch') for _, name in blocks)
    with pytest.raises(ZeroDivisionError):
        run_in_blocks(1_000, 2, lambda rows: 1 / 0)


def test_a_stalling_seed_is_given_up_early_only_when_asked(refiner):
    # Far out of reach: the cost settles within a few iterations and then crawls.
    position, rotation = np.array([[0.9, 0.4, 0.3]]), np.eye(3)[None]
    seed = np.zeros((1, 4))
    crawl = refiner.refine(position, rotation, seed)
    given_up = refiner.refine(position, rotation, seed, stop_on_stall=True)
    assert not crawl.converged.any() and not given_up.converged.any()
    assert given_up.iterations[0] < crawl.iterations[0]
    start = np.linalg.norm(forward_kinematics(OMX_CHAIN, seed)[0] - position)
    assert given_up.position_errors[0] < start - 0.1  # it still moved towards the target
