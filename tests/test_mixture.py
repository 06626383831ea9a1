"""The mixture model (many solutions per pose): likelihood training, sampling, the solver stack
and iknet-sample-bench."""

import json
import math
from copy import deepcopy
from dataclasses import replace

import numpy as np
import pytest
import torch
from processes import NODE_START_S

from iknet.srv import SolveIK
from iknet_core.checkpoint import load_checkpoint, save_checkpoint
from iknet_core.kinematics.chain import Chain, Joint, model_chain_for
from iknet_core.kinematics.fk import joint_frames, pose_from_joints
from iknet_core.kinematics.robots import named_chain
from iknet_core.kinematics.transforms import axis_angle_matrix, matrix_from_quaternion, rpy_matrix
from iknet_core.metrics import distinct_solutions
from iknet_core.networks import (
    MixtureConfig,
    MixtureIKNet,
    SampledFrames,
    angle_features,
    build_model,
)
from iknet_core.onnx_graph import ExportedNetwork
from iknet_core.resources import installed_executable as executable
from iknet_core.solvers import refined
from iknet_core.solvers.factory import build_solver
from iknet_core.solvers.mixture_kernel import CompiledMixture
from iknet_core.solvers.network import COMPILED_MAX_SAMPLES, NetworkProposer
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.settings import SolverSettings
from iknet_train.losses import mixture_loss, sample_fk_error
from iknet_train.sample_bench import main, mmd_squared
from iknet_train.synthetic import limit_ranges, sample_joints

# Two links in a plane, reached in position only: every target has an elbow-up and an
# elbow-down solution, which a sampler must both find.
PLANAR = Chain(
    name='planar_2link',
    base_frame='base',
    tip_frame='tip',
    joints=(
        Joint(
            'shoulder', (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (-math.pi, math.pi), (-math.pi, math.pi)
        ),
        Joint('elbow', (0.2, 0.0, 0.0), (0.0, 0.0, 1.0), (-math.pi, math.pi), (-math.pi, math.pi)),
    ),
    tip_xyz=(0.15, 0.0, 0.0),
)


def planar_data(count: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    joints = np.random.default_rng(seed).uniform(-math.pi, math.pi, (count, 2))
    joints[:, 1] = np.clip(joints[:, 1], -3.0, 3.0)  # away from the folded arm
    poses = pose_from_joints(PLANAR, joints)
    return torch.as_tensor(poses, dtype=torch.float32), torch.as_tensor(
        joints, dtype=torch.float32
    )


def planar_chain(n_joints: int) -> Chain:
    """PLANAR's links, n of them (a 1- or 3-joint model needs a chain of its own)."""
    joints = tuple(
        Joint(
            f'joint{i}', (0.2 if i else 0.0, 0.0, 0.0), (0.0, 0.0, 1.0), (-3.0, 3.0), (-3.0, 3.0)
        )
        for i in range(n_joints)
    )
    return replace(PLANAR, name=f'planar_{n_joints}link', joints=joints)


def tiny_model(**config_overrides) -> MixtureIKNet:
    torch.manual_seed(0)
    config = {'n_joints': 2, 'width': 64, 'n_blocks': 1, 'head_width': 64, 'position_only': True}
    config |= config_overrides
    chain = PLANAR if config['n_joints'] == 2 else planar_chain(config['n_joints'])
    return build_model('mixture', config, chain)


@pytest.fixture(scope='module')
def planar_model() -> MixtureIKNet:
    poses, joints = planar_data(20_000)
    model = tiny_model()
    model.fit_normalization(poses)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(0)
    for _ in range(600):
        batch = torch.randint(len(poses), (512,), generator=generator)
        loss, _ = mixture_loss(model, PLANAR, poses[batch], joints[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def test_teacher_forced_likelihood_rises_on_a_fixed_batch():
    poses, joints = planar_data(256, seed=1)
    model = tiny_model()
    model.fit_normalization(poses)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(60):
        loss, figures = mixture_loss(model, PLANAR, poses, joints)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 1.0
    assert figures == {}  # training steps skip the sampled figure
    with torch.no_grad():
        _, figures = mixture_loss(model, PLANAR, poses, joints)
    assert figures['position_mm'].shape == (256,)
    # Mixed precision (iknet-train --amp bf16) trains and samples too.
    with torch.autocast('cpu', dtype=torch.bfloat16):
        loss, _ = mixture_loss(model, PLANAR, poses, joints)
        loss.backward()
        assert model.sample(poses[:2], 4).shape == (2, 4, 2)


@pytest.mark.parametrize('position_only', [True, False])
def test_the_fk_error_of_its_own_samples_trains_the_sampler(position_only):
    # iknet-train --sample-fk-weight W: the loss adds W times the samples' FK error.
    poses, joints = planar_data(256, seed=2)
    model = tiny_model(position_only=position_only)
    model.fit_normalization(poses)

    def error() -> torch.Tensor:
        torch.manual_seed(3)  # the same draws each time
        return sample_fk_error(model, PLANAR, poses)

    def loss(weight: float) -> torch.Tensor:
        torch.manual_seed(3)
        return mixture_loss(model, PLANAR, poses, joints, sample_fk_weight=weight)[0]

    torch.testing.assert_close(loss(10.0) - loss(0.0), 10.0 * error())
    with torch.no_grad():  # validation: fixed draws, whatever the global seed
        validation = mixture_loss(model, PLANAR, poses, joints, sample_fk_weight=10.0)[0]
        assert mixture_loss(model, PLANAR, poses, joints, sample_fk_weight=10.0)[0] == validation
        assert validation > mixture_loss(model, PLANAR, poses, joints)[0]
    # The elbow's draw depends on the shoulder's: its error reaches the shoulder's head.
    model.sample(poses[:8], 4)[..., 1].sum().backward()
    assert model.heads[0][-1].weight.grad.abs().sum() > 0.0
    model.zero_grad()
    before = error().item()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(40):
        optimizer.zero_grad()
        error().backward()
        optimizer.step()
    assert error().item() < 0.5 * before


def test_samples_recover_both_elbows_of_a_planar_arm(planar_model):
    joints = np.array([[0.3, 1.1], [-1.0, -0.7], [2.0, 1.8]])
    poses = torch.as_tensor(pose_from_joints(PLANAR, joints), dtype=torch.float32)
    with torch.no_grad():
        samples = planar_model.sample(poses, 64, temperature=0.5).numpy()
    solver = build_solver('refine-from-zero', PLANAR, settings=SolverSettings().position_only())
    refined = solver.refiner.refine(
        np.repeat(pose_from_joints(PLANAR, joints)[:, :3], 64, 0),
        np.repeat(np.eye(3)[None], 3 * 64, 0),
        samples.reshape(-1, 2),
    )
    assert refined.converged.mean() > 0.9
    elbows = refined.joints[:, 1].reshape(3, 64)
    converged = refined.converged.reshape(3, 64)
    for pose_elbows, reached, truth in zip(elbows, converged, joints[:, 1], strict=True):
        found = pose_elbows[reached]
        assert (np.abs(found - truth) < 1e-3).any(), 'the recorded elbow is missing'
        assert (np.abs(found + truth) < 1e-3).any(), 'the other elbow is missing'


def test_sampling_is_deterministic_under_a_seed(planar_model):
    poses, _ = planar_data(4, seed=2)
    with torch.no_grad():
        first, again, other = (
            planar_model.sample(poses, 32, 1.0, torch.Generator().manual_seed(seed))
            for seed in (7, 7, 8)
        )
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert first.shape == (4, 32, 2)
    with torch.no_grad():
        means = planar_model.sample(poses, 32, 0.0, torch.Generator().manual_seed(7))
    # Temperature 0: each sample is a component mean, so few distinct values per joint.
    assert len(torch.unique(means[0, :, 0])) <= planar_model.config.n_components


def test_oversampling_keeps_the_likeliest_of_more_draws(planar_model):
    """oversampling 2 keeps the 24 of the same 48 draws (one generator seed) that the
    teacher-forced likelihood ranks highest, likeliest first; the proposals follow the config."""
    poses, _ = planar_data(3, seed=5)
    with torch.no_grad():
        drawn = planar_model.sample(poses, 48, 1.0, torch.Generator().manual_seed(3))
        kept = planar_model.sample(
            poses, 24, 1.0, torch.Generator().manual_seed(3), oversampling=2.0
        )
        assert kept.shape == (3, 24, 2)
        drawn_ll = planar_model.log_likelihood(poses.repeat_interleave(48, 0), drawn.flatten(0, 1))
        kept_ll = planar_model.log_likelihood(poses.repeat_interleave(24, 0), kept.flatten(0, 1))
    drawn_ll, kept_ll = drawn_ll.view(3, 48), kept_ll.view(3, 24)
    expected = drawn_ll.topk(24, dim=1).values
    assert torch.allclose(kept_ll, expected, atol=1e-4)  # the same ones, in that order
    assert (kept_ll[:, 0] > drawn_ll.mean(1)).all()
    config = replace(planar_model.config, oversampling=2.0)
    proposing = deepcopy(planar_model)
    proposing.config = config
    with torch.no_grad():
        proposals = proposing.eval()(poses)
        expected = planar_model.sample(
            poses, 16, config.temperature, torch.Generator().manual_seed(0), oversampling=2.0
        )
    assert torch.equal(proposals, expected)
    for bad in (0.5, math.nan, math.inf):
        with pytest.raises(ValueError, match='oversampling must be a finite number >= 1'):
            planar_model.sample(poses, 4, oversampling=bad)
        with pytest.raises(ValueError, match='oversampling must be a finite number >= 1'):
            replace(planar_model.config, oversampling=bad)


@pytest.mark.parametrize('local_frames', [True, False])
def test_sampling_splits_each_heads_first_layer_into_its_pose_and_joint_parts(local_frames):
    # sample() applies a head's first layer to the pose once per pose and to the earlier
    # joints (and the target in the joint's frame) once per sample; the reference applies the
    # head to their concatenation, with the frame from FK of the planar chain.
    model = tiny_model(n_joints=3, local_frames=local_frames).eval()
    poses, _ = planar_data(5, seed=4)
    chain = planar_chain(3)
    with torch.no_grad():
        embedding = model.trunk(model.normalized_features(poses))
        heaviest: list[torch.Tensor] = []
        for j, head in enumerate(model.heads):
            previous = angle_features(torch.stack(heaviest, -1)) if heaviest else embedding[:, :0]
            inputs = [embedding, previous]
            if local_frames:
                # Joint j sits at the origin of the link after the joints before it, turned
                # by their sum about z: the target in its frame, over the stretched arm.
                before = torch.stack([*heaviest, *[torch.zeros(5)] * (3 - j)], -1)[:, :3]
                origin = joint_frames(chain, before.double())[1][j]
                turn = before[:, :j].sum(-1).double()
                offset = poses[:, :3].double() - origin
                local = torch.stack(
                    [
                        turn.cos() * offset[:, 0] + turn.sin() * offset[:, 1],
                        -turn.sin() * offset[:, 0] + turn.cos() * offset[:, 1],
                        offset[:, 2],
                    ],
                    -1,
                )
                inputs.append((local / 0.55).float())  # the stretched arm: 0.2 + 0.2 + 0.15 m
            logits, means, _ = head(torch.cat(inputs, -1)).chunk(3, -1)
            means = model.joint_center[j] + model.joint_half_range[j] * torch.tanh(means)
            heaviest.append(means.gather(1, logits.argmax(-1, keepdim=True))[:, 0])
        sampled = model.sample(poses, 3, temperature=0.0, component_temperature=0.0)
    assert sampled.shape == (5, 3, 3)
    for copy in range(3):
        torch.testing.assert_close(sampled[:, copy], torch.stack(heaviest, -1))


@pytest.mark.parametrize('n_joints', [1, 3])
def test_training_scores_joints_with_the_mixtures_the_sampler_draws_from(n_joints):
    # Training evaluates every head at once (teacher forcing); the sampler runs them one by
    # one: both must give the same mixture, or a model would not sample what it learned.
    model = tiny_model(n_joints=n_joints)
    poses, _ = planar_data(6, seed=5)
    joints = torch.as_tensor(np.random.default_rng(5).uniform(-3, 3, (6, n_joints)))
    joints = joints.float()
    embedding = model.trunk(model.normalized_features(poses))
    expected = torch.zeros(6)
    frames = SampledFrames(model, poses, joints[:, None])  # the sampler's frames, one sample
    for j in range(n_joints):
        previous = angle_features(joints[:, :j])
        local = frames.enter(j)[:, 0]
        frames.move(j, joints[:, None, j])
        log_weights, means, log_stds = model.mixture(
            model.pose_terms(embedding, j), previous, j, local
        )
        normal = torch.distributions.Normal(means, log_stds.exp())
        expected += torch.logsumexp(log_weights + normal.log_prob(joints[:, j : j + 1]), -1)
    likelihood = model.log_likelihood(poses, joints)
    torch.testing.assert_close(likelihood, expected)
    likelihood.sum().backward()
    assert all(p.grad is not None for p in model.heads.parameters())


def test_component_temperature_sharpens_the_choice_of_component(planar_model):
    poses, _ = planar_data(8, seed=3)
    with torch.no_grad():
        plain, sharp, heaviest = (
            planar_model.sample(poses, 256, 0.0, torch.Generator().manual_seed(5), sharpening)
            for sharpening in (1.0, 0.2, 0.0)
        )
        # A tiny temperature is the heaviest component too (no overflow to component 0).
        tiny = planar_model.sample(poses, 256, 0.0, torch.Generator().manual_seed(5), 1e-45)
        with pytest.raises(ValueError, match='must be finite numbers >= 0'):
            planar_model.sample(poses, 4, 1.0, None, -0.1)
        with pytest.raises(ValueError, match='must be finite numbers >= 0, got inf'):
            planar_model.sample(poses, 4, math.inf)
        with pytest.raises(ValueError, match='must be finite numbers >= 0, got inf'):
            MixtureConfig(n_joints=2, temperature=math.inf)
        # Poses as numpy float64 are taken as the model's float32 tensors.
        as_array = planar_model.sample(
            poses.double().numpy(), 256, 0.0, torch.Generator().manual_seed(5), 0.0
        )
    assert torch.equal(as_array, heaviest)
    assert torch.equal(tiny, heaviest)
    # With temperature 0 a sample is its components' means: 0 picks the heaviest for every
    # sample, so they all agree; sharper picks repeat the same components more often.
    assert torch.equal(heaviest, heaviest[:, :1].expand_as(heaviest))

    def distinct(samples: torch.Tensor) -> float:
        return float(np.mean([len(torch.unique(pose, dim=0)) for pose in samples]))

    assert distinct(heaviest) == 1 < distinct(sharp) < distinct(plain)


def test_checkpoints_keep_the_sampler_and_the_solver_stack_serves_distinct_solutions(
    planar_model, tmp_path
):
    path = save_checkpoint(tmp_path / 'planar.pt', planar_model, 'mixture', PLANAR, {})
    loaded = load_checkpoint(path)
    poses, _ = planar_data(3, seed=3)
    with torch.no_grad():
        assert torch.equal(loaded.model(poses), planar_model(poses))
    proposer = NetworkProposer(path, backend='torch')
    assert proposer.backend == 'torch' and 'mixture' in proposer.describe()
    # One draw per call for the whole batch: CPU blocks would repeat the draws block by block.
    import iknet_core.solvers.network as network

    many, _ = planar_data(12, seed=4)
    positions = many[:, :3].numpy().astype(np.float64)
    rotations = np.repeat(np.eye(3)[None], 12, 0)
    whole = proposer(positions, rotations)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(network, 'CPU_BLOCK_ROWS', 4)
        assert np.array_equal(proposer(positions, rotations), whole)
    with pytest.raises(ValueError, match='samples in torch, not onnxruntime'):
        NetworkProposer(path, backend='onnxruntime')
    with pytest.raises(ValueError, match='only K-head networks export'):
        ExportedNetwork(loaded.model)
    solver = build_solver('network+refine', PLANAR, proposer, SolverSettings().position_only())
    target = pose_from_joints(PLANAR, np.array([0.4, 1.2]))
    solutions = solver.solve(target[:3], np.eye(3), max_solutions=4)
    assert solutions.success and len(solutions) == 2  # both elbows, nothing else
    assert sorted(np.sign(solutions.joints[:, 1])) == [-1.0, 1.0]


def test_many_solutions_asked_of_a_sampler_on_an_arm_with_joints_to_spare_are_drawn(tmp_path):
    """A 4-link planar arm reaching positions has a continuum of solutions: max_solutions above
    the model's n_hypotheses draws more samples (refined.SAMPLES_PER_SOLUTION each) instead of
    stopping at n_hypotheses."""
    chain = planar_chain(4)
    model = tiny_model(n_joints=4).eval()
    joints = np.random.default_rng(0).uniform(-3.0, 3.0, (200, 4))
    model.fit_normalization(torch.as_tensor(pose_from_joints(chain, joints), dtype=torch.float32))
    path = save_checkpoint(tmp_path / 'four.pt', model, 'mixture', chain, {})
    proposer = NetworkProposer(path, device='cpu')
    assert proposer.samples and proposer.n_hypotheses == 16
    position = pose_from_joints(chain, np.array([0.3, 0.5, -0.4, 0.6]))[:3]
    assert proposer(position[None], np.eye(3)[None], 40).shape == (1, 40, 4)
    solver = build_solver('network+refine', chain, proposer, SolverSettings().position_only())
    solutions = solver.solve(position, np.eye(3), max_solutions=40)
    exact = solutions.meets_tolerance & solutions.within_limits
    assert exact.sum() > proposer.n_hypotheses
    assert len(distinct_solutions(solutions.joints[exact])) == exact.sum()
    # One solution is drawn as solve_batch draws it; many, two samples per solution.
    assert solver._sample_count(1) is None and solver._sample_count(40) == 80
    assert solver._sample_count(10**9) == refined.MAX_CANDIDATES
    # Joints that turn whole turns multiply the candidates (3 ** 4 variants each): fewer samples.
    turning = replace(
        chain,
        name='planar_4link_turning',
        joints=tuple(replace(j, limits=(-6.3, 6.3), reach=(-6.3, 6.3)) for j in chain.joints),
    )
    turning_model = build_model('mixture', dict(model.config.__dict__), turning)
    turning_model.set_normalization(model.normalization())
    turning_path = save_checkpoint(tmp_path / 'turning.pt', turning_model, 'mixture', turning, {})
    turning_solver = build_solver(
        'network+refine',
        turning,
        NetworkProposer(turning_path, device='cpu'),
        SolverSettings().position_only(),
    )
    assert turning_solver._sample_count(10**9) == refined.MAX_CANDIDATES // 81
    heads = build_model('iknet', {'n_joints': 2, 'width': 8, 'n_blocks': 1})
    heads_proposer = NetworkProposer(
        save_checkpoint(tmp_path / 'heads.pt', heads, 'iknet', PLANAR, {}), device='cpu'
    )
    assert not heads_proposer.samples
    with pytest.raises(ValueError, match='4 fixed hypotheses; only a mixture model samples 40'):
        heads_proposer(position[None], np.eye(3)[None], 40)


class RepeatingSampler:
    """A sampler whose seed-0 draw of a pose is one solution over and over (a pose whose samples
    all refine to the same arm), and whose other seeds' draws spread over the joints' range; the
    same count and seed draw the same samples, as NetworkProposer's."""

    samples = True
    n_hypotheses = 16

    def __init__(self, solution: np.ndarray) -> None:
        self.solution = solution
        self.calls: list[tuple[int, int]] = []

    def __call__(self, positions: np.ndarray, rotations: np.ndarray, count: int, seed: int = 0):
        self.calls.append((count, seed))
        if seed == 0:
            return np.tile(self.solution, (len(positions), count, 1))
        shape = (len(positions), count, len(self.solution))
        return np.random.default_rng(seed).uniform(-2.5, 2.5, shape)


def test_a_sampler_whose_samples_repeat_is_asked_for_more_until_max_solutions_are_found():
    """max_solutions: N gets N distinct exact solutions where the first draw's samples refine
    to few (refined._topped_up): more are drawn, from another seed, as many as the pose's yield
    so far says, within MAX_CANDIDATES in all."""
    chain = planar_chain(4)
    solution = np.array([0.3, 0.5, -0.4, 0.6])
    position = pose_from_joints(chain, solution)[:3]
    sampler = RepeatingSampler(solution)
    solver = refined.RefinedSolver(sampler, Refiner(chain, SolverSettings().position_only()))
    solutions = solver.solve(position, np.eye(3), max_solutions=40)
    exact = solutions.meets_tolerance & solutions.within_limits
    assert exact.sum() == 40
    found = solutions.joints[exact]
    apart = np.abs(found[:, None] - found[None]).max(-1) + np.eye(40)  # no two the same arm
    assert apart.min() > SolverSettings().duplicate_tolerance
    # 80 samples gave one solution: the next draw, of another seed, is sized by that yield.
    assert sampler.calls[:2] == [(80, 0), (math.ceil(1.25 * 39 * 80), 1)]
    # Asked for more than MAX_CANDIDATES allow, the first draw takes them all: no second.
    sampler.calls.clear()
    solver.solve(position, np.eye(3), max_solutions=refined.MAX_CANDIDATES)
    assert sampler.calls == [(refined.MAX_CANDIDATES, 0)]


def test_distinct_solutions_and_mmd():
    joints = np.array([[0.0, 1.0], [0.0, 1.0 + 1e-4], [0.0, -1.0]])
    assert len(distinct_solutions(joints)) == 2
    # A whole turn of a joint that turns whole turns is the same arm; of another, not.
    twins = np.array([[0.0, 1.0], [0.0, 1.0 - 2 * math.pi], [2 * math.pi, 1.0]])
    assert len(distinct_solutions(twins)) == 3
    assert len(distinct_solutions(twins, np.array([False, True]))) == 2
    assert len(distinct_solutions(twins, np.array([True, True]))) == 1
    rng = np.random.default_rng(0)
    same = rng.normal(0.0, 0.3, (200, 2))
    assert abs(mmd_squared(same[:100], same[100:])) < 0.02
    assert mmd_squared(same[:100], same[100:] + 2.0) > 0.1


def test_sample_bench_writes_its_report(planar_model, tmp_path, capsys):
    path = save_checkpoint(tmp_path / 'planar.pt', planar_model, 'mixture', PLANAR, {})
    heads = build_model('iknet', {'n_joints': 2, 'width': 8, 'n_blocks': 1})
    heads_path = save_checkpoint(tmp_path / 'heads.pt', heads, 'iknet', PLANAR, {})
    argv = [
        '--model', str(path), '--samples', '50', '--poses', '10',
        '--samples-per-pose', '64', '--mmd-poses', '3', '--reference-solutions', '50',
        '--position-only', '--compare-model', str(heads_path), '--out', str(tmp_path / 'out'),
        '--device', 'cpu', '--oversampling', '1.5',
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((tmp_path / 'out' / 'sample_bench.json').read_text())
    assert report['chain'] == 'planar_2link' and report['samples_per_pose'] == 64
    assert report['oversampling'] == 1.5 and report['temperature'] == 0.5
    assert report['refined_exact'] > 0.9
    assert report['distinct_solutions_per_pose']['median'] == 2  # the two elbows
    assert report['closed_form_coverage'] is None  # no closed form for this arm
    mmd = report['mmd']
    assert mmd['poses'] == 3 and mmd['compare_model'] == str(heads_path)
    # Samples cover both elbows as random restarts do: a sampler of one elbow is 0.2-0.44 from
    # them; this one measured 0.087 on one thread of an AMD host (the full run) and under 0.05 on
    # two, as the trained fixture's floats differ with the threads and the processor.
    assert abs(mmd['samples_to_reference']) < 0.15
    assert math.isfinite(mmd['compare_model_to_reference'])
    assert (tmp_path / 'out' / 'sample_bench.png').stat().st_size > 10_000
    # SolveIK's max_solutions: 64 on a planar arm finds its two elbows, not 64.
    solver = report['solver']
    assert solver['asked'] == 64 and solver['n_poses'] == 10 and solver['ms_median'] > 0
    assert 1.5 <= solver['distinct_exact']['mean'] <= 2.0 and solver['distinct_exact']['max'] == 2
    # Near the straight arm a few more meet the tolerance within 0.02 rad of each other.
    assert solver['returned_exact']['mean'] >= solver['distinct_exact']['mean']
    assert solver['returned_exact']['max'] < 64 and solver['all_returned'] == 0.0
    speed = report['speed']
    assert speed['samples'] == 64 and speed['single_query_samples'] == 16
    for figure in ('sample_ms', 'compiled_sample_ms', 'single_query_compiled_sample_ms'):
        assert speed[figure] > 0
    batched = report['batched']
    assert batched['device'] == 'cpu' and batched['threads'] == 1
    assert batched['samples'] == 10 * 64 and batched['samples_per_s'] > 0
    out = capsys.readouterr().out
    assert 'refined samples exact' in out and 'oversampling 1.5' in out
    assert 'network+refine asked for 64 solutions of one pose, one thread (10 poses)' in out
    assert 'of them 0.02 rad apart' in out
    assert 'all 640 raw samples, blocks of 640, on cpu, one thread' in out
    assert '16 samples of one pose (a single query), one thread' in out and 'compiled' in out


def test_sample_bench_refuses_oversampling_below_one(planar_model, tmp_path, capsys, monkeypatch):
    path = save_checkpoint(tmp_path / 'planar.pt', planar_model, 'mixture', PLANAR, {})
    argv = ['--model', str(path), '--oversampling', '0.5', '--out', str(tmp_path / 'out')]
    assert main(argv) == 1
    assert 'oversampling must be a finite number >= 1, got 0.5' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()

    # A --compare-model that is not there is refused before any sample is drawn.
    def draw(*args, **kwargs):
        raise AssertionError('samples were drawn before --compare-model was checked')

    monkeypatch.setattr('iknet_train.sample_bench.batched_samples', draw)
    missing = tmp_path / 'nope.pt'
    argv = ['--model', str(path), '--compare-model', str(missing), '--out', str(tmp_path / 'out')]
    assert main(argv) == 1
    assert f'no model file at {missing}' in capsys.readouterr().err
    assert not (tmp_path / 'out').exists()
    if not torch.cuda.is_available():  # a GPU there is not: refused before the model loads
        argv = ['--model', str(missing), '--device', 'cuda', '--out', str(tmp_path / 'out')]
        assert main(argv) == 1
        assert 'device cuda requested but torch sees no CUDA device' in capsys.readouterr().err


def test_sample_bench_refuses_a_model_that_does_not_sample(tmp_path, capsys):
    model = build_model('iknet', {'n_joints': 2, 'width': 8, 'n_blocks': 1})
    path = save_checkpoint(tmp_path / 'heads.pt', model, 'iknet', PLANAR, {})
    assert main(['--model', str(path), '--out', str(tmp_path / 'out')]) == 1
    assert 'sampling needs a mixture model' in capsys.readouterr().err


def test_the_server_answers_max_solutions_with_distinct_sampled_solutions(
    planar_model, processes, ros, tmp_path
):
    path = save_checkpoint(tmp_path / 'planar.pt', planar_model, 'mixture', PLANAR, {})
    log = tmp_path / 'server.log'
    processes.start(
        executable('ik_server'), '--ros-args', '-p', f'model_path:={path}',
        '-p', 'solver:=network+refine', '-p', 'command_interface:=none', log=log,
    )  # fmt: skip
    client = ros.node('mixture_client').create_client(SolveIK, '/ik_server/solve_ik')
    assert client.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    request = SolveIK.Request(max_solutions=16, position_only=True)
    request.target.header.frame_id = 'base'
    position = pose_from_joints(PLANAR, np.array([0.4, 1.2]))[:3]
    p = request.target.pose.position
    p.x, p.y, p.z = (float(v) for v in position)
    request.target.pose.orientation.w = 1.0
    response = ros.call(client, request, timeout_s=60.0)
    assert response.success, response.message
    assert [s.name for s in response.solutions] == [PLANAR.joint_names] * 2
    elbows = sorted(s.position[1] for s in response.solutions)
    assert elbows == pytest.approx([-1.2, 1.2], abs=1e-4)
    assert max(response.position_errors) <= 1e-6


def test_iknet_train_trains_a_mixture_model_for_an_arm_from_its_urdf(tmp_path):
    from iknet_core.kinematics.urdf import chain_to_urdf
    from iknet_train.train import main as train

    urdf = tmp_path / 'planar.urdf'
    urdf.write_text(chain_to_urdf(PLANAR))
    config = '{"width": 16, "n_blocks": 1, "head_width": 16, "position_only": true}'
    argv = [
        '--model', 'mixture', '--urdf', str(urdf), '--base', 'base', '--tip', 'tip', '--data',
        '--synthetic', '2000', '--epochs', '2', '--model-config', config, '--no-progress',
        '--save-model', str(tmp_path / 'planar.pt'), '--out', str(tmp_path / 'run'),
        '--sample-fk-weight', '1',
    ]  # fmt: skip
    assert train(argv) == 0
    checkpoint = load_checkpoint(tmp_path / 'planar.pt')
    assert checkpoint.training['sample_fk_weight'] == 1.0
    assert isinstance(checkpoint.model, MixtureIKNet)
    assert checkpoint.chain.joint_names == PLANAR.joint_names
    # Component means span each joint's reach, here a whole turn.
    assert checkpoint.model.config.joint_half_ranges == pytest.approx([math.pi, math.pi], abs=0.01)


@pytest.mark.parametrize(('model', 'whole_reach'), [('mixture', True), ('iknet', False)])
def test_a_generative_model_trains_on_the_omxs_whole_reach(model, whole_reach):
    # The OM-X's recordings stay within its hand-guided ranges (joint2 up to 0.76 rad), but
    # solutions of its poses lie out to its limits (joint2 up to 1.5): a model of every solution
    # is trained on them all; a K-head network where the arm is moved.
    from iknet_core.kinematics import OMX_CHAIN
    from iknet_core.kinematics.chain import OMX_HAND_GUIDED_RANGES
    from iknet_train.train import build_parser, split_data

    args = build_parser().parse_args(['--model', model, '--data', '--synthetic', '200'])
    (_, train_joints), (_, val_joints), counts = split_data(args, OMX_CHAIN, [])
    reach = [list(joint.reach) for joint in OMX_CHAIN.joints]
    expected = reach if whole_reach else [list(pair) for pair in OMX_HAND_GUIDED_RANGES]
    assert counts['synthetic_ranges'] == expected
    joint2 = np.concatenate([train_joints, val_joints])[:, 1]
    assert (joint2.max() > 0.76) == whole_reach


def homogeneous(rotation: np.ndarray, translation) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = rotation, translation
    return matrix


def test_each_head_sees_the_target_in_its_joints_frame():
    # Whole poses on the Panda (origins with rotations) with a tool offset and rotation: the
    # features of joint j are the target and the frame after the last joint (which the tip
    # pose fixes) in joint j's frame, here from 4 x 4 transforms joint after joint.
    chain = replace(named_chain('panda'), tip_xyz=(0.02, -0.03, 0.107), tip_rpy=(0.3, -0.2, 0.5))
    model = build_model('mixture', {'n_joints': 7, 'width': 8, 'head_width': 8}, chain)
    joints = np.random.default_rng(0).uniform(*limit_ranges(chain).T, (4, 7))
    poses = pose_from_joints(chain, joints)
    local = model.teacher_forced_local(torch.as_tensor(poses), torch.as_tensor(joints)).numpy()
    assert local.shape == (4, 7, 15)
    tip = homogeneous(rpy_matrix(chain.tip_rpy), chain.tip_xyz)
    length = chain.stretched_length
    for b in range(4):
        target = homogeneous(matrix_from_quaternion(poses[b, 3:]), poses[b, :3])
        after_last = target @ np.linalg.inv(tip)
        frame = np.eye(4)
        for j, joint in enumerate(chain.joints):
            frame = frame @ homogeneous(rpy_matrix(joint.origin_rpy), joint.origin_xyz)
            seen = np.linalg.inv(frame)
            expected = np.concatenate(
                [
                    (seen @ target)[:3, 3] / length,
                    (seen @ target)[:3, :3].ravel(),
                    (seen @ after_last)[:3, 3] / length,
                ]
            )
            np.testing.assert_allclose(local[b, j], expected, atol=2e-6)  # float32
            frame = frame @ homogeneous(axis_angle_matrix(joint.axis, joints[b, j]), np.zeros(3))
    # The last joint turns about its own origin, so the frame after it starts there.
    np.testing.assert_allclose(local[:, -1, 12:], 0.0, atol=2e-6)
    with pytest.raises(ValueError, match='needs the chain it is for'):
        build_model('mixture', {'n_joints': 7})
    with pytest.raises(ValueError, match="7-joint mixture model cannot use chain 'planar_2link'"):
        build_model('mixture', {'n_joints': 7}, PLANAR)


def test_training_and_sampling_see_the_same_frames_of_a_chain_with_a_slide():
    # Teacher forcing computes every joint's frame at once, the sampler one joint at a time
    # for (B, count) samples: the same features, on a chain with a slide and fixed rotations.
    slider = SLIDER
    model = build_model('mixture', {'n_joints': 3, 'width': 8, 'head_width': 8}, slider)
    joints = torch.as_tensor(
        np.random.default_rng(1).uniform(*limit_ranges(slider).T, (5, 3)), dtype=torch.float32
    )
    poses = torch.as_tensor(pose_from_joints(slider, joints.double().numpy()))
    forced = model.teacher_forced_local(poses, joints)
    copies = joints[:, None].expand(5, 3, 3)
    frames = SampledFrames(model, poses, copies)
    for j in range(3):
        drawn = frames.enter(j)
        assert drawn.shape == (5, 3, 15)
        for copy in range(3):
            torch.testing.assert_close(drawn[:, copy], forced[:, j])
        frames.move(j, copies[..., j])


SLIDER = Chain(
    name='slider', base_frame='base', tip_frame='tip',
    joints=(
        Joint('turn', (0.0, 0.0, 0.1), (0.0, 0.0, 1.0), (-3.0, 3.0), (-3.0, 3.0),
              origin_rpy=(0.3, 0.0, 0.0)),
        Joint('slide', (0.1, 0.0, 0.05), (1.0, 0.0, 0.0), (0.0, 0.3), (0.0, 0.3),
              origin_rpy=(0.0, 0.2, 0.0), kind='prismatic'),
        Joint('wrist', (0.0, 0.05, 0.0), (0.0, 1.0, 0.0), (-2.0, 2.0), (-2.0, 2.0)),
    ),
    tip_xyz=(0.05, 0.02, 0.1), tip_rpy=(0.1, -0.2, 0.3),
)  # fmt: skip


@pytest.mark.parametrize(
    'overrides',
    [
        {},
        {'position_only': True},
        {'local_frames': False},
        {'tool_frame_features': False, 'n_blocks': 0, 'n_components': 1},
        {'position_only': True, 'local_frames': False, 'tool_frame_features': False},
    ],
)
def test_the_compiled_sampler_draws_what_torch_draws(overrides):
    """CompiledMixture (the server's sampler for a few poses) against MixtureIKNet.sample on a
    chain with a slide and fixed rotations: the same heaviest-component path, the same
    likelihood ranking under oversampling, the same distribution of each joint."""
    config = {'n_joints': 3, 'width': 16, 'head_width': 16, **overrides}
    torch.manual_seed(2)
    model = build_model('mixture', config, SLIDER).eval()
    joints = np.random.default_rng(2).uniform(*limit_ranges(SLIDER).T, (64, 3))
    poses = torch.as_tensor(pose_from_joints(SLIDER, joints), dtype=torch.float32)
    model.fit_normalization(poses)
    compiled = CompiledMixture(model)
    positions = poses[:4, :3].double().numpy()
    rotations = matrix_from_quaternion(poses[:4, 3:].double().numpy())
    with torch.no_grad():
        heaviest = model.sample(poses[:4], 2, temperature=0.0, component_temperature=0.0)
    drawn = compiled(positions, rotations, 2, temperature=0.0, component_temperature=0.0)
    np.testing.assert_allclose(drawn, heaviest.numpy(), atol=1e-5)
    # Oversampling 2 keeps the 8 of the same 16 draws that torch's likelihood ranks highest.
    every = compiled(positions[:1], rotations[:1], 16, oversampling=1.0)[0]
    kept = compiled(positions[:1], rotations[:1], 8, oversampling=2.0)[0]
    with torch.no_grad():
        likelihood = model.log_likelihood(poses[:1].expand(16, 7), torch.as_tensor(every).float())
    np.testing.assert_array_equal(kept, every[likelihood.argsort(descending=True)[:8].numpy()])
    # Each joint's quantiles over 20,000 draws at full temperature (a component picked by any
    # rule but the weights', or a std misapplied, moves them by tenths).
    with torch.no_grad():
        reference = model.sample(poses[:1], 20_000, 1.0, torch.Generator().manual_seed(0))[0]
    ours = compiled(positions[:1], rotations[:1], 20_000, 1.0, 1.0, 1.0)[0]
    levels = [0.1, 0.3, 0.5, 0.7, 0.9]
    np.testing.assert_allclose(
        np.quantile(ours, levels, 0), np.quantile(reference.numpy(), levels, 0), atol=0.05
    )


def test_the_server_samples_a_few_poses_compiled_and_many_in_torch(tmp_path):
    model = tiny_model(n_joints=3).eval()
    path = save_checkpoint(tmp_path / 'three.pt', model, 'mixture', planar_chain(3), {})
    proposer, in_torch = NetworkProposer(path), NetworkProposer(path, backend='torch')
    assert proposer.backend == 'compiled' and in_torch.backend == 'torch'
    poses, _ = planar_data(2, seed=7)
    positions = poses[:, :3].double().numpy()
    rotations = np.repeat(np.eye(3)[None], 2, 0)
    few = proposer(positions, rotations)
    assert few.shape == (2, 16, 3)
    np.testing.assert_array_equal(few, CompiledMixture(model)(positions, rotations, 16))
    assert np.array_equal(proposer(positions, rotations), few)  # the same draws each call
    for served in (proposer, in_torch):  # another seed, another draw (refined._topped_up)
        again = served(positions, rotations, 16, seed=1)
        assert again.shape == few.shape
        assert not np.array_equal(again, served(positions, rotations, 16))
    for served in (proposer, in_torch):
        with pytest.raises(ValueError, match='need count >= 1'):
            served(positions, rotations, 0)
    many = proposer(positions, rotations, COMPILED_MAX_SAMPLES)
    np.testing.assert_array_equal(many, in_torch(positions, rotations, COMPILED_MAX_SAMPLES))
    # The knobs come from the model's config at each call (iknet-sample-bench sets them).
    for served in (proposer, in_torch):
        served.model.config = replace(model.config, temperature=0.0, component_temperature=0.0)
    np.testing.assert_allclose(
        proposer(positions, rotations), in_torch(positions, rotations), atol=1e-5
    )


def test_mixture_checkpoints_saved_before_local_frames_load_as_they_were(tmp_path):
    model = tiny_model(local_frames=False).eval()
    path = save_checkpoint(tmp_path / 'old.pt', model, 'mixture', PLANAR, {})
    content = torch.load(path, weights_only=True)
    del content['model_config']['local_frames']  # as a model saved before the field
    torch.save(content, path)
    loaded = load_checkpoint(path).model
    assert loaded.config.local_frames is False and loaded.chain is None
    poses, _ = planar_data(3, seed=6)
    with torch.no_grad():
        assert torch.equal(loaded(poses), model(poses))


def test_the_shipped_panda_sampler_draws_near_its_targets_and_refines_to_many_solutions(
    panda_model_path,
):
    """models/panda_mixture.pt, a 7-joint arm's sampler made by iknet-train (README): it is the
    Panda of --chain panda, its raw samples land near the target, and network+refine turns
    them into distinct exact solutions inside the limits."""
    proposer = NetworkProposer(panda_model_path, device='cpu')
    assert proposer.samples
    model_chain_for(named_chain('panda'), proposer.chain, panda_model_path)  # the same arm
    chain = proposer.chain
    joints = sample_joints(20, limit_ranges(chain), np.random.default_rng(7))
    poses = pose_from_joints(chain, joints)
    positions, rotations = poses[:, :3], matrix_from_quaternion(poses[:, 3:])
    samples = proposer(positions, rotations, 200)  # (20, 200, 7)
    reached = pose_from_joints(chain, samples)[..., :3]
    errors_mm = 1000.0 * np.linalg.norm(reached - positions[:, None], axis=-1)
    assert np.median(errors_mm) < 10.0  # an untrained sampler is hundreds of mm off
    solver = build_solver('network+refine', chain, proposer)
    for position, rotation in zip(positions[:5], rotations[:5], strict=True):
        solutions = solver.solve(position, rotation, max_solutions=32)
        exact = solutions.joints[solutions.meets_tolerance & solutions.within_limits]
        assert len(distinct_solutions(exact)) >= 16  # 26-29 of 32 when it was shipped
