"""The network backends (compiled, torch, onnxruntime) and the solvers built on them."""

from dataclasses import replace

import numpy as np
import pytest
import torch
from golden import random_observed_joints
from model_helpers import condition_head

from iknet_core.checkpoint import save_checkpoint
from iknet_core.kinematics import OMX_CHAIN, forward_kinematics
from iknet_core.metrics import wrapped_difference
from iknet_core.networks import build_model, joint_arcs
from iknet_core.solvers import SolverSettings, Tolerance
from iknet_core.solvers.factory import build_solver
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.network_kernel import CompiledNetwork
from iknet_core.solvers.policy import joint_bounds


@pytest.fixture(scope='module')
def model_path(tmp_path_factory):
    """An untrained but non-trivial network: random weights, normalization from real poses."""
    torch.manual_seed(0)
    # Output arcs from the reach, so every backend maps the circles onto them alike.
    arcs = joint_arcs(*(bounds.tolist() for bounds in joint_bounds(OMX_CHAIN, 'reach')))
    model = build_model('iknet', {'width': 64, 'n_blocks': 2, **arcs})
    position, rotation = forward_kinematics(OMX_CHAIN, random_observed_joints(512, seed=11))
    from iknet_core.kinematics.transforms import quaternion_from_matrix

    poses = np.concatenate([position, quaternion_from_matrix(rotation)], -1)
    model.fit_normalization(torch.tensor(poses, dtype=torch.float32))
    condition_head(model, 0.7)  # pairs of length 0.45 or more, spread 0.13 rad
    return save_checkpoint(tmp_path_factory.mktemp('model') / 'm.pt', model, 'iknet', OMX_CHAIN)


@pytest.fixture(scope='module')
def targets():
    return forward_kinematics(OMX_CHAIN, random_observed_joints(40, seed=12))


def test_backends_propose_the_same_hypotheses(model_path, targets):
    positions, rotations = targets
    proposals = {
        backend: NetworkProposer(model_path, 'cpu', backend)(positions, rotations)
        for backend in ('compiled', 'torch', 'onnxruntime')
    }
    # compiled answers batches above its size limit with torch: check its own kernel too.
    compiled = NetworkProposer(model_path, 'cpu', 'compiled')
    single = np.concatenate([compiled(p[None], r[None]) for p, r in zip(*targets, strict=True)])
    for name, hypotheses in {**proposals, 'compiled single': single}.items():
        assert hypotheses.shape == (40, 4, 4), name
        difference = wrapped_difference(hypotheses, proposals['torch'])
        assert np.abs(difference).max() < 1e-4, name


def test_cpu_batches_in_blocks_propose_what_one_call_does(model_path, targets, monkeypatch):
    import iknet_core.solvers.network as network

    positions, rotations = targets
    proposer = NetworkProposer(model_path, 'cpu', 'torch')
    whole = proposer(positions, rotations)
    monkeypatch.setattr(network, 'CPU_BLOCK_ROWS', 7)  # 40 poses: 6 blocks, the last short
    # float32 sums in another order (the matrix products are blocked differently): ~1e-6 rad.
    blocked = proposer(positions, rotations)
    assert np.abs(wrapped_difference(blocked, whole)).max() < 1e-5
    assert proposer(positions[:0], rotations[:0]).shape == (0, 4, 4)


def test_refined_solutions_agree_across_backends_within_1e_5_rad(model_path, targets):
    positions, rotations = targets
    tolerance = Tolerance(1e-9, 1e-9)
    answers = {}
    for backend in ('compiled', 'torch', 'onnxruntime'):
        network = NetworkProposer(model_path, 'cpu', backend)
        solver = build_solver('network+refine', OMX_CHAIN, network, SolverSettings(tolerance))
        answers[backend] = [solver.solve(p, r) for p, r in zip(positions, rotations, strict=True)]
    for index in range(len(positions)):
        reference = answers['torch'][index]
        for backend in ('compiled', 'onnxruntime'):
            other = answers[backend][index]
            assert other.success == reference.success
            if reference.success:
                difference = wrapped_difference(other.joints[0], reference.joints[0])
                assert np.abs(difference).max() < 1e-5, (backend, index)


@pytest.mark.parametrize('backend', ['compiled', 'torch', 'onnxruntime'])
def test_one_solver_answers_two_threads_at_once_as_it_answers_one(model_path, targets, backend):
    # The server answers ~/solve_ik on its executor thread while a path (its alternative
    # starts: the same solver) is solved on its worker thread.
    from concurrent.futures import ThreadPoolExecutor

    network = NetworkProposer(model_path, 'cpu', backend)
    solver = build_solver('network+refine', OMX_CHAIN, network, SolverSettings())
    poses = list(zip(*targets, strict=True)) * 5

    def answer_all(_: int) -> list[np.ndarray]:
        return [solver.solve(p, r, max_solutions=4).joints for p, r in poses]

    alone = answer_all(0)
    with ThreadPoolExecutor(max_workers=2) as pool:
        together = list(pool.map(answer_all, range(2)))
    for answers in together:
        for one, other in zip(alone, answers, strict=True):
            np.testing.assert_array_equal(one, other)


@pytest.mark.parametrize('solver_name', ['network', 'network+refine'])
def test_single_query_kernel_answers_as_the_network_called_apart(tmp_path, targets, solver_name):
    """The compiled backend runs the network inside the first try's kernel; torch's proposals
    take the separate path. One hypothesis (the lone-seed case) and the unrefined solver too."""
    torch.manual_seed(1)
    arcs = joint_arcs(*(bounds.tolist() for bounds in joint_bounds(OMX_CHAIN, 'reach')))
    model = build_model('iknet', {'width': 32, 'n_blocks': 1, 'n_hypotheses': 1, **arcs})
    condition_head(model, 0.7)
    path = save_checkpoint(tmp_path / 'one.pt', model, 'iknet', OMX_CHAIN)
    fused, apart = (
        build_solver(solver_name, OMX_CHAIN, NetworkProposer(path, 'cpu', backend))
        for backend in ('compiled', 'torch')
    )
    assert fused._network is not None and apart._network is None  # compiled_network
    for position, rotation in zip(*targets, strict=True):
        one, other = fused.solve(position, rotation), apart.solve(position, rotation)
        assert one.success == other.success
        assert np.abs(wrapped_difference(one.joints, other.joints)).max() < 1e-5
        # float32 sums in another order: ~1e-6 rad apart before refinement.
        np.testing.assert_allclose(
            one.position_errors, other.position_errors, rtol=1e-5, atol=1e-7
        )


def test_four_hypotheses_answer_alike_fused_or_apart_at_the_default_tolerance(model_path, targets):
    # Most poses are answered by the fused kernel's first try here (the 1e-9 tolerance above
    # sends them on to every hypothesis): a fallback refines again.
    fused, apart = (
        build_solver('network+refine', OMX_CHAIN, NetworkProposer(model_path, 'cpu', backend))
        for backend in ('compiled', 'torch')
    )
    fallbacks = []
    refine = fused.refiner.refine
    fused.refiner.refine = lambda *a, **k: fallbacks.append(1) or refine(*a, **k)
    for position, rotation in zip(*targets, strict=True):
        one, other = fused.solve(position, rotation), apart.solve(position, rotation)
        assert one.success == other.success
        assert np.abs(wrapped_difference(one.joints, other.joints)).max() < 1e-5
    assert len(fallbacks) < len(targets[0]) / 2
    with pytest.raises(ValueError, match='the network answers 4 joints'):
        from iknet_core.solvers.refine import Refiner
        from iknet_core.solvers.refined import RefinedSolver

        planar = _planar_chain()
        RefinedSolver(NetworkProposer(model_path, 'cpu', 'compiled'), Refiner(planar))


def _planar_chain():
    from iknet_core.kinematics.chain import Chain, Joint

    joints = tuple(
        Joint(f'j{i}', (0.1 * i, 0.0, 0.0), (0.0, 0.0, 1.0), (-3.0, 3.0), (-3.0, 3.0))
        for i in range(2)
    )
    return Chain('planar', 'base', 'tip', joints, tip_xyz=(0.1, 0.0, 0.0))


def test_compiled_network_refuses_other_architectures():
    with pytest.raises(ValueError, match='only MultiHypothesisIKNet compiles'):
        CompiledNetwork(build_model('reference'))


def test_a_reference_model_on_the_compiled_backend_runs_in_torch(tmp_path):
    # The reference IKNet, a baseline `iknet-train --model reference` offers, has no kernel:
    # iknet-test and iknet-bench (compiled by default) refused it.
    path = save_checkpoint(tmp_path / 'ref.pt', build_model('reference'), 'reference', OMX_CHAIN)
    proposer = NetworkProposer(path, 'cpu', 'compiled')
    assert proposer.backend == 'torch' and 'on torch' in proposer.describe()
    positions, rotations = forward_kinematics(OMX_CHAIN, np.zeros((3, 4)))
    assert proposer(positions, rotations).shape == (3, 1, 4)


def test_unknown_backend_and_solver_are_clear_errors(model_path):
    with pytest.raises(ValueError, match='backend must be one of'):
        NetworkProposer(model_path, 'cpu', 'tensorrt')
    with pytest.raises(ValueError, match='solver must be one of'):
        build_solver('magic', OMX_CHAIN)
    with pytest.raises(ValueError, match="solver 'network' needs a trained model"):
        build_solver('network', OMX_CHAIN)


def test_network_alone_reports_its_own_error(model_path, targets):
    positions, rotations = targets
    solver = build_solver('network', OMX_CHAIN, NetworkProposer(model_path, 'cpu', 'compiled'))
    solutions = solver.solve(positions[0], rotations[0], max_solutions=4)
    fk_position, _ = forward_kinematics(OMX_CHAIN, solutions.joints)
    np.testing.assert_allclose(
        solutions.position_errors, np.linalg.norm(fk_position - positions[0], axis=-1), atol=1e-12
    )


def test_each_learned_solver_loads_its_shipped_model_unless_one_is_given(model_path):
    from iknet_core.resources import shipped
    from iknet_core.solvers.network import SHIPPED_MODELS, load_networks

    try:
        defaults = load_networks(None, ['analytic', 'network', 'network+refine'], 'cpu')
    except FileNotFoundError as error:
        pytest.skip(str(error))
    assert set(defaults) == {'network', 'network+refine'}  # not the closed form
    for name, network in defaults.items():
        assert network.model_path == shipped(SHIPPED_MODELS[name])
        assert network.chain == OMX_CHAIN
    # The seed is the cheaper network: fewer weights to read per query.
    sizes = {name: sum(p.numel() for p in n.model.parameters()) for name, n in defaults.items()}
    assert sizes['network+refine'] < sizes['network'] / 4
    assert load_networks(None, ['analytic', 'refine-from-zero']) == {}  # nothing to load
    other_arm = replace(OMX_CHAIN, name='other_arm', tip_xyz=(0.2, 0.0, 0.0))
    assert load_networks(None, ['network'], arm=other_arm) == {}  # the shipped serve the OM-X
    assert set(load_networks(None, ['network'], 'cpu', arm=OMX_CHAIN)) == {'network'}
    given = load_networks(model_path, ['network', 'network+refine'], 'cpu')
    assert given['network'] is given['network+refine']  # one file, loaded once
    assert given['network'].model_path == model_path


def test_a_network_short_of_the_solutions_asked_for_adds_spread_seeds(tmp_path):
    """Four fixed hypotheses give four solutions at most: a Panda's positions have a continuum,
    and network+refine asked for 16 now finds them as refine-from-zero does (it gave 4)."""
    from iknet_core.kinematics.robots import named_chain

    chain = named_chain('panda')
    torch.manual_seed(2)
    arcs = joint_arcs(*(bounds.tolist() for bounds in joint_bounds(chain, 'reach')))
    model = build_model('iknet', {'n_joints': 7, 'width': 16, 'n_blocks': 1, **arcs}, chain)
    path = save_checkpoint(tmp_path / 'panda.pt', model, 'iknet', chain)
    settings = SolverSettings().position_only()
    solver = build_solver('network+refine', chain, NetworkProposer(path, 'cpu'), settings)
    position, _ = forward_kinematics(chain, np.full(7, 0.3))
    solutions = solver.solve(position, np.eye(3), max_solutions=16)
    exact = solutions.joints[solutions.meets_tolerance & solutions.within_limits]
    assert len(exact) == 16
    assert (
        min(np.abs(a - b).max() for i, a in enumerate(exact) for b in exact[i + 1 :]) > 1e-3
    )  # distinct


def test_on_an_arm_with_no_joints_to_spare_no_spread_seeds_are_added(model_path, targets):
    """An OM-X pose has a few branches, which the hypotheses find: the spread seeds found no
    more and cost 15 times the query."""
    solver = build_solver('network+refine', OMX_CHAIN, NetworkProposer(model_path, 'cpu'))
    refined = []
    seeds_refined = solver._seeds_refined
    solver._seeds_refined = lambda *args, **kwargs: (
        refined.append(1) or seeds_refined(*args, **kwargs)
    )
    solver.solve(targets[0][0], targets[1][0], max_solutions=16)
    assert len(refined) == 1
