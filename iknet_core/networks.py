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

import torch
from torch import nn

from iknet_core.kinematics.transforms import matrix_from_quaternion, rotation_features

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
        limited = upper - lower < 2.0 * math.pi
        centers.append(0.5 * (lower + upper) if limited else 0.0)
        half_ranges.append(0.5 * (upper - lower) if limited else math.pi)
    return {'joint_centers': centers, 'joint_half_ranges': half_ranges}


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
        centers = config.joint_centers or (0.0,) * config.n_joints
        half_ranges = config.joint_half_ranges or (math.pi,) * config.n_joints
        if not len(centers) == len(half_ranges) == config.n_joints:
            raise ValueError(
                f'joint_centers and joint_half_ranges need {config.n_joints} values each, got '
                f'{len(centers)} and {len(half_ranges)}'
            )
        if not all(0.0 < h <= math.pi for h in half_ranges):
            raise ValueError(f'joint_half_ranges must be in (0, pi], got {half_ranges}')
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


MODELS: dict[str, type[IKNetwork]] = {
    'iknet': MultiHypothesisIKNet,
    'reference': ReferenceIKNet,
}
DEFAULT_MODEL_TYPE = 'iknet'


def config_from_dict(model_type: str, config: dict[str, Any]) -> Any:
    """The model's @dataclass config from a plain dict; ValueError on unknown keys or types."""
    model_class = model_class_of(model_type)
    known = {f.name for f in fields(model_class.config_class)}
    unknown = sorted(set(config) - known)
    if unknown:
        raise ValueError(f'unknown config keys {unknown} for model {model_type!r}')
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in config.items()}
    return model_class.config_class(**values)


def config_to_dict(config: Any) -> dict[str, Any]:
    """Plain JSON-able form of a model config (tuples become lists)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def model_class_of(model_type: str) -> type[IKNetwork]:
    try:
        return MODELS[model_type]
    except KeyError:
        raise ValueError(f'unknown model type {model_type!r}; known: {sorted(MODELS)}') from None


def build_model(model_type: str, config: dict[str, Any] | None = None) -> IKNetwork:
    """A fresh model from its type name and (partial) config dict."""
    model_class = model_class_of(model_type)
    return model_class(config_from_dict(model_type, config or {}))
