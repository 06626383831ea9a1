"""IK network architectures: each maps poses (B, 7) to joint hypotheses (B, K, n_joints).

A model is rebuilt from its type name and config dict (`build_model`), which is what checkpoints
store, so inference never hard-codes sizes. Input normalization lives in non-persistent buffers
that the checkpoint fills from its own `normalization` entry.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import base_frame, enter_joint, move_joint
from iknet_core.kinematics.transforms import (
    constant,
    matrix_from_quaternion,
    rotation_features,
    rpy_matrix,
)

POSE_DIM = 7  # x, y, z (m), qx, qy, qz, qw as on /kinematics_pose
# Smallest input std used for normalization (m or unitless); features are O(0.1) to O(1).
MIN_FEATURE_STD = 1e-3


def check_poses(poses: torch.Tensor) -> None:
    """ValueError unless poses is (B, 7)."""
    if poses.ndim != 2 or poses.shape[-1] != POSE_DIM:
        raise ValueError(f'expected poses of shape (B, {POSE_DIM}), got {tuple(poses.shape)}')


def pose_features(poses: torch.Tensor, tool_frame: bool = True) -> torch.Tensor:
    """(B, 7) -> (B, 9 or 12): position, 6-D rotation, [position in the tool frame].

    q and -q give the same features. The tool-frame position R^T p is what the joints after the
    first see of the target; as an input it spares the network learning that product.
    """
    check_poses(poses)
    rotation = matrix_from_quaternion(poses[:, 3:])
    features = [poses[:, :3], rotation_features(rotation)]
    if tool_frame:
        features.append((rotation.transpose(-1, -2) @ poses[:, :3, None])[..., 0])
    return torch.cat(features, -1)


class IKNetwork(nn.Module):
    """Common interface: forward(poses (B, 7)) -> joint hypotheses (B, K, n_joints) rad.

    forward = features -> normalization -> trunk -> to_angles. Features and normalization stay
    float32 even when the trunk runs in half precision (export --fp16).
    """

    config_class: ClassVar[type]
    # Whether the model is built with the chain it is for (build_model passes it).
    uses_chain: ClassVar[bool] = False
    # Whether it samples the whole solution set (a generative model): then it is trained on every
    # joint's whole reach by default, not only where an arm's recordings are.
    samples_solution_set: ClassVar[bool] = False
    # Buffers that stay float32 under half precision: their rounding would reach the answer.
    float32_buffers: ClassVar[tuple[str, ...]] = ('input_mean', 'input_std')

    def __init__(self, n_features: int) -> None:
        super().__init__()
        self.n_features = n_features
        # Filled from the training data (or a checkpoint); identity until then.
        self.register_buffer('input_mean', torch.zeros(self.n_features), persistent=False)
        self.register_buffer('input_std', torch.ones(self.n_features), persistent=False)

    @property
    def n_hypotheses(self) -> int:
        raise NotImplementedError

    def features(self, poses: torch.Tensor) -> torch.Tensor:
        """(B, 7) -> (B, n_features), before normalization."""
        raise NotImplementedError

    def normalized_features(self, poses: torch.Tensor) -> torch.Tensor:
        return (self.features(poses) - self.input_mean) / self.input_std

    def trunk(self, features: torch.Tensor) -> torch.Tensor:
        """(B, n_features) normalized -> raw network output."""
        raise NotImplementedError

    def to_angles(self, raw: torch.Tensor) -> torch.Tensor:
        """Raw trunk output -> (B, K, n_joints) rad."""
        raise NotImplementedError

    def forward(self, poses: torch.Tensor) -> torch.Tensor:
        """poses (B, 7) -> (B, K, n_joints) rad."""
        return self.to_angles(self.trunk(self.normalized_features(poses)))

    def use_chain(self, chain: Chain) -> None:
        """Answer for chain from now on (a fine-tune on another arm); a model that computes
        nothing with its chain keeps none."""

    def fit_normalization(self, poses: torch.Tensor) -> None:
        """Input mean and std from training poses (B, 7)."""
        with torch.no_grad():
            features = self.features(poses)
            self.set_normalization(
                {
                    'input_mean': features.mean(0).tolist(),
                    # A feature constant up to rounding (R[2, 1] = 0 on the OM-X) must not have
                    # its float noise amplified into a signal.
                    'input_std': features.std(0).clamp_min(MIN_FEATURE_STD).tolist(),
                }
            )

    def normalization(self) -> dict[str, list[float]]:
        return {'input_mean': self.input_mean.tolist(), 'input_std': self.input_std.tolist()}

    def set_normalization(self, stats: dict[str, Any]) -> None:
        for key in ('input_mean', 'input_std'):
            value = torch.as_tensor(stats[key], dtype=torch.float32)
            if value.shape != (self.n_features,):
                raise ValueError(
                    f'normalization {key} must have shape ({self.n_features},), '
                    f'got {tuple(value.shape)}'
                )
            getattr(self, key).copy_(value)


@dataclass
class ReferenceConfig:
    """The IKNet these users know: 7-400-300-200-100-50-4, ReLU, dropout 0.1."""

    n_joints: int = 4
    hidden: tuple[int, ...] = (400, 300, 200, 100, 50)
    dropout: float = 0.1


class ReferenceIKNet(IKNetwork):
    """Position + raw quaternion in, joint angles out; kept for comparison only."""

    config_class = ReferenceConfig

    def __init__(self, config: ReferenceConfig) -> None:
        super().__init__(POSE_DIM)
        self.config = config
        layers: list[nn.Module] = []
        width = POSE_DIM
        for hidden in config.hidden:
            layers += [nn.Linear(width, hidden), nn.ReLU(), nn.Dropout(config.dropout)]
            width = hidden
        layers.append(nn.Linear(width, config.n_joints))
        self.mlp = nn.Sequential(*layers)

    @property
    def n_hypotheses(self) -> int:
        return 1

    def features(self, poses: torch.Tensor) -> torch.Tensor:
        check_poses(poses)
        return poses

    def trunk(self, features: torch.Tensor) -> torch.Tensor:
        """(B, 7) -> (B, n_joints) rad."""
        return self.mlp(features)

    def to_angles(self, raw: torch.Tensor) -> torch.Tensor:
        return raw[:, None, :]


@dataclass
class MultiHypothesisConfig:
    """Residual MLP with K heads; each joint as (cos, sin) so joint1 beyond pi is no jump."""

    n_joints: int = 4
    width: int = 128
    n_blocks: int = 3
    n_hypotheses: int = 4
    tool_frame_features: bool = True
    # Each joint's output circle spans this arc (rad): angle = center + half_range * atan2 / pi.
    # Empty: the whole circle (-pi, pi] for every joint, as models before this field. A joint
    # limited to less than a turn gets its limits' arc, so no hypothesis leaves them.
    joint_centers: tuple[float, ...] = ()
    joint_half_ranges: tuple[float, ...] = ()


def joint_arcs(low: Sequence[float], high: Sequence[float]) -> dict[str, list[float]]:
    """MultiHypothesisConfig fields mapping each output circle onto [low, high] (rad); a joint
    with a turn or more of range keeps the whole circle."""
    centers, half_ranges = [], []
    for lower, upper in zip(low, high, strict=True):
        lower, upper = float(lower), float(upper)  # a checkpoint's config holds plain floats
        limited = upper - lower < 2.0 * math.pi
        centers.append(0.5 * (lower + upper) if limited else 0.0)
        half_ranges.append(0.5 * (upper - lower) if limited else math.pi)
    return {'joint_centers': centers, 'joint_half_ranges': half_ranges}


def output_ranges(config, within_a_turn: bool) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """A config's joint_centers and joint_half_ranges (rad; empty: 0 and pi for every joint),
    checked: one per joint, each half range > 0, and at most pi when within_a_turn (an
    output circle spans at most a turn)."""
    n = config.n_joints
    centers = config.joint_centers or (0.0,) * n
    half_ranges = config.joint_half_ranges or (math.pi,) * n
    if not len(centers) == len(half_ranges) == n:
        raise ValueError(
            f'joint_centers and joint_half_ranges need {n} values each, got '
            f'{len(centers)} and {len(half_ranges)}'
        )
    largest = math.pi if within_a_turn else math.inf
    if not all(0.0 < h <= largest for h in half_ranges):
        bound = 'in (0, pi]' if within_a_turn else '> 0'
        raise ValueError(f'joint_half_ranges must be {bound}, got {half_ranges}')
    return tuple(centers), tuple(half_ranges)


class ResidualBlock(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(self.act(self.fc1(self.act(self.norm(x)))))


class MultiHypothesisIKNet(IKNetwork):
    """Position + sign-free rotation features in, K joint hypotheses out (elbow up/down, ...)."""

    config_class = MultiHypothesisConfig
    float32_buffers = (*IKNetwork.float32_buffers, 'joint_center', 'joint_scale')

    def __init__(self, config: MultiHypothesisConfig) -> None:
        super().__init__(12 if config.tool_frame_features else 9)
        self.config = config
        self.stem = nn.Linear(self.n_features, config.width)
        self.blocks = nn.Sequential(*(ResidualBlock(config.width) for _ in range(config.n_blocks)))
        self.norm = nn.LayerNorm(config.width)
        self.head = nn.Linear(config.width, config.n_hypotheses * config.n_joints * 2)
        centers, half_ranges = output_ranges(config, within_a_turn=True)
        self.register_buffer('joint_center', torch.tensor(centers), persistent=False)
        self.register_buffer('joint_scale', torch.tensor(half_ranges) / math.pi, persistent=False)

    @property
    def n_hypotheses(self) -> int:
        return self.config.n_hypotheses

    def features(self, poses: torch.Tensor) -> torch.Tensor:
        return pose_features(poses, self.config.tool_frame_features)

    def trunk(self, features: torch.Tensor) -> torch.Tensor:
        """(B, n_features) -> (B, K, n_joints, 2) raw (cos, sin) pairs, not yet unit length."""
        x = self.blocks(self.stem(features))
        out = self.head(torch.nn.functional.silu(self.norm(x)))
        return out.view(-1, self.config.n_hypotheses, self.config.n_joints, 2)

    def unit_vectors(self, poses: torch.Tensor) -> torch.Tensor:
        """poses (B, 7) -> (B, K, n_joints, 2) raw (cos, sin) pairs."""
        return self.trunk(self.normalized_features(poses))

    def to_angles(self, raw: torch.Tensor) -> torch.Tensor:
        """(B, K, n_joints, 2) -> (B, K, n_joints) rad on each joint's arc."""
        return self.joint_center + self.joint_scale * torch.atan2(raw[..., 1], raw[..., 0])

    def circle_angles(self, joints: torch.Tensor) -> torch.Tensor:
        """Joints (..., n_joints) rad -> the angles on the output circles that give them."""
        return (joints - self.joint_center) / self.joint_scale


@dataclass
class MixtureConfig:
    """Many solutions per pose: joint by joint, a Gaussian mixture over the angle conditioned on
    the pose and on the joints sampled before it (the sequential model of the "Neural Inverse
    Kinematics" paper, with one small MLP per joint where the paper has a hypernetwork)."""

    n_joints: int = 4
    width: int = 256
    n_blocks: int = 2
    head_width: int = 128
    n_components: int = 8
    # What forward() proposes to the refinement: this many samples, std scaled by temperature,
    # components picked with their weights sharpened by component_temperature, the likeliest of
    # oversampling times as many draws (sample()).
    n_hypotheses: int = 16
    temperature: float = 0.5
    component_temperature: float = 1.0
    oversampling: float = 1.0
    position_only: bool = False
    tool_frame_features: bool = True
    # Head j also sees the target in joint j's own frame, from FK of the joints before it
    # (target_features): what the joints from j on must still do, whatever the earlier ones
    # did, so later joints make up for an earlier joint's error instead of inheriting it. Models
    # saved before this field lack it (checkpoint.LEGACY_MODEL_CONFIG: off).
    local_frames: bool = True
    # Component means stay on center +- half_range (rad) per joint; empty: +- pi.
    joint_centers: tuple[float, ...] = ()
    joint_half_ranges: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        check_temperatures(self.temperature, self.component_temperature)
        check_oversampling(self.oversampling)


def check_temperatures(temperature: float, component_temperature: float) -> None:
    """ValueError unless both are finite numbers >= 0 (0: the components' means, the heaviest
    component), in a model's config or one sample() call."""
    if not all(0.0 <= t < math.inf for t in (temperature, component_temperature)):
        raise ValueError(
            'temperature and component_temperature must be finite numbers >= 0, got '
            f'{temperature} and {component_temperature}'
        )


def check_oversampling(oversampling: float) -> None:
    """ValueError unless oversampling is a finite number >= 1 (draws per sample kept)."""
    if not (1.0 <= oversampling < math.inf):
        raise ValueError(f'oversampling must be a finite number >= 1, got {oversampling}')


def check_sampling(
    count: int, temperature: float, component_temperature: float, oversampling: float
) -> None:
    """ValueError unless sample()'s arguments make sense, whichever sampler draws (torch, or
    mixture_kernel's compiled one)."""
    if count < 1:
        raise ValueError(f'need count >= 1, got {count}')
    check_temperatures(temperature, component_temperature)
    check_oversampling(oversampling)


def mixture_log_density(
    values: torch.Tensor, log_weights: torch.Tensor, means: torch.Tensor, log_stds: torch.Tensor
) -> torch.Tensor:
    """log density of values (...) rad under Gaussian mixtures (..., M) (log weights, means,
    log stds): (...)."""
    z = (values[..., None] - means) * torch.exp(-log_stds)
    log_normal = -0.5 * z.square() - log_stds - 0.5 * math.log(2.0 * math.pi)
    return torch.logsumexp(log_weights + log_normal, -1)


def joint_ranges(low: Sequence[float], high: Sequence[float]) -> dict[str, list[float]]:
    """MixtureConfig fields keeping every component mean in [low, high] (rad): unlike the
    K-head network's circles, a mixture describes a joint beyond a turn (UR5's +-2 pi) as it is."""
    low, high = [float(a) for a in low], [float(b) for b in high]  # plain floats, as above
    return {
        'joint_centers': [0.5 * (a + b) for a, b in zip(low, high, strict=True)],
        'joint_half_ranges': [0.5 * (b - a) for a, b in zip(low, high, strict=True)],
    }


# Smallest and largest component std (rad): below ~1e-4 rad the likelihood rewards collapse.
MIXTURE_LOG_STD = (math.log(1e-4), math.log(1.0))


class MixtureIKNet(IKNetwork):
    """Pose in, a distribution over joints out: `sample(poses, count)`; `log_likelihood` trains
    it on (pose, joints) pairs with teacher forcing."""

    config_class = MixtureConfig
    uses_chain = True
    samples_solution_set = True
    float32_buffers = (*IKNetwork.float32_buffers, 'joint_center', 'joint_half_range')

    def __init__(self, config: MixtureConfig, chain: Chain | None = None) -> None:
        features = 3 if config.position_only else 12 if config.tool_frame_features else 9
        super().__init__(features)
        self.config = config
        n, width = config.n_joints, config.width
        # The chain whose frames local_frames needs; None without them.
        self.chain = _local_frames_chain(config, chain)
        self.n_local = (
            0 if self.chain is None else LOCAL_POSITION if config.position_only else LOCAL_POSE
        )
        self.stem = nn.Linear(self.n_features, width)
        self.blocks = nn.Sequential(*(ResidualBlock(width) for _ in range(config.n_blocks)))
        self.norm = nn.LayerNorm(width)
        # Head j sees the pose embedding, (cos, sin) of joints 0..j-1 and, with local_frames,
        # the target in joint j's frame (target_features).
        self.heads = nn.ModuleList(
            nn.Sequential(
                nn.Linear(width + 2 * j + self.n_local, config.head_width),
                nn.SiLU(),
                nn.Linear(config.head_width, config.head_width),
                nn.SiLU(),
                nn.Linear(config.head_width, 3 * config.n_components),
            )
            for j in range(n)
        )
        centers, half_ranges = output_ranges(config, within_a_turn=False)
        self.register_buffer('joint_center', torch.tensor(centers), persistent=False)
        self.register_buffer('joint_half_range', torch.tensor(half_ranges), persistent=False)

    @property
    def n_hypotheses(self) -> int:
        return self.config.n_hypotheses

    def use_chain(self, chain: Chain) -> None:
        """Local frames from chain's FK from now on (ValueError for another joint count)."""
        if self.chain is not None:
            self.chain = _local_frames_chain(self.config, chain)

    def features(self, poses: torch.Tensor) -> torch.Tensor:
        if self.config.position_only:
            check_poses(poses)
            return poses[:, :3]
        return pose_features(poses, self.config.tool_frame_features)

    def trunk(self, features: torch.Tensor) -> torch.Tensor:
        """(B, n_features) normalized -> (B, width) pose embedding."""
        return nn.functional.silu(self.norm(self.blocks(self.stem(features))))

    def pose_terms(self, embedding: torch.Tensor, joint: int) -> torch.Tensor:
        """Head `joint`'s first layer on the pose embedding (B, width) alone, with its bias:
        (B, head_width). Sampling computes it once per pose rather than once per sample (the
        layer is linear, so the pose's share and the earlier joints' share add)."""
        first = self.heads[joint][0]
        return nn.functional.linear(embedding, first.weight[:, : self.config.width], first.bias)

    def mixture(
        self,
        pose_terms: torch.Tensor,
        previous: torch.Tensor,
        joint: int,
        local: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Joint `joint`'s mixture given its pose terms (pose_terms(), B or (B, count) leading
        dims), (cos, sin) of the joints before it (same leading dims, 2 * joint) and, with
        local_frames, the target in its frame (target_features, n_local): log weights, means
        (rad), log stds, each (..., M)."""
        head = self.heads[joint]
        if local is not None:
            previous = torch.cat([previous, local.to(previous.dtype)], -1)
        earlier = nn.functional.linear(previous, head[0].weight[:, self.config.width :])
        raw = head[1:](pose_terms + earlier)
        return self.components(raw, self.joint_center[joint], self.joint_half_range[joint])

    def targets(self, poses: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """What target_features expresses in each joint's frame, from poses (B, 7), in float32:
        the target position (B, 3) and, for whole poses, its rotation (B, 3, 3) and where the
        frame after the last joint's motion must be (B, 3): the tip pose fixes it, and for a
        last joint that turns, it is that joint's origin, the point the joints before it must
        place."""
        poses = poses.float()
        if self.config.position_only:
            return (poses[:, :3],)
        rotation = matrix_from_quaternion(poses[:, 3:])
        chain = self.chain
        tip = constant(rpy_matrix(chain.tip_rpy).T @ np.asarray(chain.tip_xyz), poses)
        return poses[:, :3], rotation, poses[:, :3] - (rotation @ tip[:, None])[..., 0]

    def target_features(
        self, rotation: torch.Tensor, position: torch.Tensor, targets: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        """The targets (targets(), broadcast) in a joint's frame (rotation (..., 3, 3), position
        (..., 3)): (..., n_local), lengths over the stretched arm's (in m where a chain of bare
        slides has none)."""
        inverse = rotation.transpose(-1, -2)
        scale = 1.0 / (self.chain.stretched_length or 1.0)
        target_position = (inverse @ (targets[0] - position)[..., None])[..., 0] * scale
        if self.config.position_only:
            return target_position
        _, target_rotation, last_origin = targets
        last = (inverse @ (last_origin - position)[..., None])[..., 0] * scale
        return torch.cat([target_position, (inverse @ target_rotation).flatten(-2), last], -1)

    def teacher_forced_local(self, poses: torch.Tensor, joints: torch.Tensor) -> torch.Tensor:
        """(B, n, n_local): each joint's target_features with the true joints before it. The FK
        runs in float32 (a chain of half-precision products would blur the millimetres the heads
        are to learn); under --amp the features then meet the head's precision as any input."""
        with torch.autocast(poses.device.type, enabled=False):
            joints = joints.float()
            targets = self.targets(poses)
            rotation, position = base_frame(joints)
            local = []
            for j, joint in enumerate(self.chain.joints):
                rotation, position = enter_joint(joint, rotation, position)
                local.append(self.target_features(rotation, position, targets))
                rotation, position = move_joint(joint, rotation, position, joints[:, j])
            return torch.stack(local, 1)

    def components(
        self, raw: torch.Tensor, center: torch.Tensor, half_range: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """A head's raw output (..., 3M) -> log weights, means (rad, within center +-
        half_range), log stds."""
        logits, means, log_stds = raw.float().chunk(3, -1)
        means = center + half_range * torch.tanh(means)
        return logits.log_softmax(-1), means, log_stds.clamp(*MIXTURE_LOG_STD)

    def teacher_forced_mixtures(
        self, embedding: torch.Tensor, poses: torch.Tensor, joints: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every joint's mixture given the true joints before it, all heads in one batched
        product per layer rather than one small product per head (training runs one step per
        batch, and on a GPU the count of small kernels, not arithmetic, sets its time):
        log weights, means, log stds, each (B, n, M)."""
        n, width = self.config.n_joints, self.config.width
        heads = list(self.heads)
        previous = angle_features(joints[:, :-1]).to(embedding.dtype)  # half under autocast
        # Head j sees the first 2j columns of previous: zero weights for the rest.
        earlier_weights = torch.stack(
            [
                nn.functional.pad(head[0].weight[:, width : width + 2 * j], (0, 2 * (n - 1 - j)))
                for j, head in enumerate(heads)
            ]
        )
        pose_weights = torch.stack([head[0].weight[:, :width] for head in heads])
        hidden = (
            torch.einsum('bw,nhw->bnh', embedding, pose_weights)
            + torch.einsum('bk,nhk->bnh', previous, earlier_weights)
            + torch.stack([head[0].bias for head in heads])
        )
        if self.n_local:
            local = self.teacher_forced_local(poses, joints).to(embedding.dtype)
            local_weights = torch.stack(
                [head[0].weight[:, width + 2 * j :] for j, head in enumerate(heads)]
            )
            hidden = hidden + torch.einsum('bnf,nhf->bnh', local, local_weights)
        for layer in (2, 4):  # the heads' later Linear layers, each after a SiLU
            weights = torch.stack([head[layer].weight for head in heads])
            biases = torch.stack([head[layer].bias for head in heads])
            hidden = torch.einsum('bnh,ngh->bng', nn.functional.silu(hidden), weights) + biases
        return self.components(hidden, self.joint_center[:, None], self.joint_half_range[:, None])

    def log_likelihood(self, poses: torch.Tensor, joints: torch.Tensor) -> torch.Tensor:
        """log p(joints (B, n) | poses (B, 7)) (B,), every joint's term at once (teacher
        forcing: each head sees the true joints before its own)."""
        embedding = self.trunk(self.normalized_features(poses))
        log_weights, means, log_stds = self.teacher_forced_mixtures(embedding, poses, joints)
        return mixture_log_density(joints, log_weights, means, log_stds).sum(-1)

    def sample(
        self,
        poses: torch.Tensor,
        count: int,
        temperature: float = 1.0,
        generator: torch.Generator | None = None,
        component_temperature: float = 1.0,
        oversampling: float = 1.0,
    ) -> torch.Tensor:
        """count joint vectors per pose: (B, 7) -> (B, count, n) rad, joint after joint; the
        components' stds are scaled by temperature (0: their means), and each component is
        picked with probability weight ** (1 / component_temperature), renormalized (0: the
        heaviest); with oversampling > 1, ceil(oversampling * count) are drawn and the count
        likeliest under the model (log_likelihood, summed as they are drawn) kept, likeliest
        first. All three trade diversity for accuracy (a light component picked for an early
        joint is what sends a sample far off, and its likelihood is low). Deterministic for a
        seeded generator; differentiable in the picked components' means and stds where
        gradients are on (losses.mixture_loss trains on the FK error of the samples)."""
        check_sampling(count, temperature, component_temperature, oversampling)
        # As the features are (float32 whatever the weights), from numpy or float64 poses too.
        poses = torch.as_tensor(poses, dtype=self.input_mean.dtype, device=self.input_mean.device)
        kept = count
        count = math.ceil(oversampling * count)
        embedding = self.trunk(self.normalized_features(poses))
        shape = (len(poses), count)
        joints = []
        log_likelihood = torch.zeros(shape, device=poses.device) if count > kept else None
        previous = embedding.new_zeros(*shape, 0)
        like = torch.zeros(*shape, 0, device=poses.device)  # float32 frames, as training's
        frames = SampledFrames(self, poses, like) if self.chain is not None else None
        for j in range(self.config.n_joints):
            # (B, 1, head_width) broadcast over the count samples of each pose.
            pose_terms = self.pose_terms(embedding, j)[:, None]
            local = frames.enter(j) if frames is not None else None
            log_weights, means, log_stds = self.mixture(pose_terms, previous, j, local)
            noise = torch.rand(log_weights.shape, generator=generator, device=poses.device)
            # Gumbel-max picks a component with probability its (sharpened) weight.
            gumbel = -torch.log(-torch.log(noise.clamp_min(1e-12)))
            if component_temperature > 0.0:
                # From the heaviest (0): a tiny temperature cannot overflow every weight to -inf.
                shifted = log_weights - log_weights.amax(-1, keepdim=True)
                component = (shifted / component_temperature + gumbel).argmax(-1)
            else:
                component = log_weights.argmax(-1)
            pick = component[..., None]
            std = torch.exp(log_stds.gather(-1, pick))[..., 0]
            normal = torch.randn(shape, generator=generator, device=poses.device)
            joints.append(means.gather(-1, pick)[..., 0] + temperature * std * normal)
            if log_likelihood is not None:
                log_likelihood += mixture_log_density(joints[j], log_weights, means, log_stds)
            angles = angle_features(joints[j][..., None]).to(previous.dtype)
            previous = torch.cat([previous, angles], -1)
            if frames is not None:
                frames.move(j, joints[j])
        drawn = torch.stack(joints, -1)
        if log_likelihood is None:
            return drawn
        likeliest = log_likelihood.topk(kept, dim=1).indices
        return drawn.gather(1, likeliest[..., None].expand(-1, -1, drawn.shape[-1]))

    def forward(
        self, poses: torch.Tensor, count: int | None = None, seed: int = 0
    ) -> torch.Tensor:
        """The proposal for refinement: count (default n_hypotheses) samples at the config's
        temperature, the same for the same batch of poses, count and seed (a fixed generator; a
        pose alone and the same pose in a batch draw different samples)."""
        generator = torch.Generator(device=poses.device).manual_seed(seed)
        return self.sample(
            poses,
            self.config.n_hypotheses if count is None else count,
            temperature=self.config.temperature,
            generator=generator,
            component_temperature=self.config.component_temperature,
            oversampling=self.config.oversampling,
        )


# What target_features gives a head: the target position in the joint's frame (3) and, for
# whole poses, the target rotation in it (9) and the last joint's origin in it (3).
LOCAL_POSITION = 3
LOCAL_POSE = 15


def _local_frames_chain(config: MixtureConfig, chain: Chain | None) -> Chain | None:
    """The chain a model with local_frames computes its frames on (ValueError where it is
    missing or has another joint count); None for a model without them."""
    if not config.local_frames:
        return None
    if chain is None:
        raise ValueError(
            'a mixture model with local_frames needs the chain it is for: '
            "build_model('mixture', config, chain)"
        )
    if chain.n_joints != config.n_joints:
        raise ValueError(
            f'a {config.n_joints}-joint mixture model cannot use chain {chain.name!r} '
            f'({chain.n_joints} joints)'
        )
    return chain


class SampledFrames:
    """Joint frames of the samples being drawn, one joint at a time, in float32: enter(j) gives
    joint j's target_features from the joints drawn before it, move(j, values) applies joint j
    at the values drawn for it."""

    def __init__(self, model: MixtureIKNet, poses: torch.Tensor, like: torch.Tensor) -> None:
        self.model = model
        self.device = poses.device.type
        with torch.autocast(self.device, enabled=False):
            # (B, 1, ...): broadcast over the count samples of each pose.
            self.targets = tuple(t[:, None] for t in model.targets(poses))
            # like (B, count, k): the frames' leading dimensions.
            self.rotation, self.position = base_frame(like)

    def enter(self, j: int) -> torch.Tensor:
        joint = self.model.chain.joints[j]
        with torch.autocast(self.device, enabled=False):
            self.rotation, self.position = enter_joint(joint, self.rotation, self.position)
            return self.model.target_features(self.rotation, self.position, self.targets)

    def move(self, j: int, values: torch.Tensor) -> None:
        joint = self.model.chain.joints[j]
        with torch.autocast(self.device, enabled=False):
            self.rotation, self.position = move_joint(
                joint, self.rotation, self.position, values.float()
            )


def angle_features(joints: torch.Tensor) -> torch.Tensor:
    """(..., k) rad -> (..., 2k) as (cos, sin) per joint: a turn more or less is the same arm."""
    return torch.stack([joints.cos(), joints.sin()], -1).flatten(-2)


MODELS: dict[str, type[IKNetwork]] = {
    'iknet': MultiHypothesisIKNet,
    'reference': ReferenceIKNet,
    'mixture': MixtureIKNet,
}
DEFAULT_MODEL_TYPE = 'iknet'


# Config fields that count something a network is built of: at least one (a block count may be
# 0: the stem feeds the heads).
COUNT_FIELDS = ('n_joints', 'width', 'head_width', 'n_components', 'n_hypotheses', 'hidden')


def config_from_dict(model_type: str, config: dict[str, Any]) -> Any:
    """The model's @dataclass config from a plain dict; ValueError on unknown keys, on a value
    of another type than the field's (JSON's "false" is a string, and a true one), and on
    counts below one."""
    model_class = model_class_of(model_type)
    defaults = {f.name: f.default for f in fields(model_class.config_class)}
    unknown = sorted(set(config) - set(defaults))
    if unknown:
        raise ValueError(f'unknown config keys {unknown} for model {model_type!r}')
    for name, value in config.items():
        check_config_value(model_type, name, value, defaults[name])
    values = {
        k: tuple(v) if isinstance(v, list) else bool(v) if isinstance(defaults[k], bool) else v
        for k, v in config.items()
    }
    return model_class.config_class(**values)


def check_config_value(model_type: str, name: str, value: Any, default: Any) -> None:
    """ValueError naming the field unless value is of default's kind (a count a whole number
    >= 1, a block count >= 0)."""

    def number(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    def whole(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    least = 1 if name in COUNT_FIELDS else 0 if name == 'n_blocks' else None
    at_least = '' if least is None else f' >= {least}'
    if isinstance(default, bool):  # 0 and 1 as well: JSON configs written with them load
        kind, fits = 'true or false', isinstance(value, bool) or (whole(value) and value in (0, 1))
    elif isinstance(default, int):
        fits = whole(value) and (least is None or value >= least)
        kind = f'a whole number{at_least}'
    elif isinstance(default, float):
        kind, fits = 'a number', number(value)
    elif isinstance(default, tuple):
        items = value if isinstance(value, list | tuple) else [None]
        if least is None:
            kind, fits = 'a list of numbers', all(number(v) for v in items)
        else:
            kind = f'a list of whole numbers{at_least}'
            fits = all(whole(v) and v >= least for v in items)
    else:
        return
    if not fits:
        raise ValueError(f'{model_type} model config {name} must be {kind}, got {value!r}')


def config_to_dict(config: Any) -> dict[str, Any]:
    """Plain JSON-able form of a model config (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def model_class_of(model_type: str) -> type[IKNetwork]:
    try:
        return MODELS[model_type]
    except KeyError:
        raise ValueError(f'unknown model type {model_type!r}; known: {sorted(MODELS)}') from None


def build_model(
    model_type: str, config: dict[str, Any] | None = None, chain: Chain | None = None
) -> IKNetwork:
    """A fresh model from its type name and (partial) config dict, for chain (what a mixture
    model's local_frames compute on; other models need none)."""
    model_class = model_class_of(model_type)
    model_config = config_from_dict(model_type, config or {})
    return (
        model_class(model_config, chain) if model_class.uses_chain else model_class(model_config)
    )
