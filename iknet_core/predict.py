"""Pose -> joints with a trained network: load once, answer many queries.

The network proposes K hypotheses per pose; FK (cheap) ranks them, so the answer is the one that
lands closest to the target, and the others are the further solutions (elbow up/down).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iknet_core.checkpoint import load_checkpoint
from iknet_core.kinematics.chain import Chain
from iknet_core.metrics import pose_errors
from iknet_core.resources import DEFAULT_MODEL, shipped

# Ranking weight of orientation against position error (m per rad): 1 degree counts as 0.17 mm.
ORIENTATION_WEIGHT_M_PER_RAD = 0.01
DEVICES = ('auto', 'cpu', 'cuda')


def resolve_device(name: str) -> torch.device:
    """'auto' -> CUDA when present, else CPU; 'cuda' without a GPU is a ValueError."""
    if name not in DEVICES:
        raise ValueError(f'device must be one of {DEVICES}, got {name!r}')
    if name == 'auto':
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
    if name == 'cuda' and not torch.cuda.is_available():
        raise ValueError('device cuda requested but torch sees no CUDA device')
    return torch.device(name)


def rank_hypotheses(
    chain: Chain, hypotheses: np.ndarray, poses: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Order (B, K, n) hypotheses by FK error to poses (B, 7); returns them and scores (B, K).

    numpy float64: for one query its small-array overhead is a fraction of torch's.
    """
    targets = np.broadcast_to(poses[:, None, :], (*hypotheses.shape[:2], 7))
    position_error, angle = pose_errors(chain, hypotheses, targets)
    score = position_error + ORIENTATION_WEIGHT_M_PER_RAD * angle
    order = np.argsort(score, axis=1, kind='stable')
    ranked = np.take_along_axis(hypotheses, order[..., None], axis=1)
    return ranked, np.take_along_axis(score, order, axis=1)


class IKPredictor:
    """A checkpoint loaded once; maps poses (B, 7) to joints (B, n) rad (numpy in, numpy out)."""

    def __init__(self, model_path: Path | str | None = None, device: str = 'auto') -> None:
        self.model_path = Path(model_path) if model_path else shipped(DEFAULT_MODEL)
        checkpoint = load_checkpoint(self.model_path)
        self.device = resolve_device(device)
        self.model = checkpoint.model.to(self.device).eval()
        self.model_type = checkpoint.model_type
        self.chain = checkpoint.chain
        self.joint_names = checkpoint.joint_names
        self.training = checkpoint.training

    @property
    def n_hypotheses(self) -> int:
        return self.model.n_hypotheses

    def hypotheses(self, poses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """poses (B, 7) -> every hypothesis (B, K, n) rad, best first, and its score (B, K).

        score = position error (m) + 0.01 m/rad * orientation error (rad), through FK.
        """
        poses = np.asarray(poses, dtype=np.float64)
        if poses.ndim != 2 or poses.shape[1] != 7:
            raise ValueError(f'expected poses of shape (B, 7), got {poses.shape}')
        with torch.inference_mode():
            targets = torch.from_numpy(poses.astype(np.float32)).to(self.device)
            hypotheses = self.model(targets).cpu().numpy().astype(np.float64)
        return rank_hypotheses(self.chain, hypotheses, poses)

    def solve(self, poses: np.ndarray) -> np.ndarray:
        """poses (B, 7) -> the best hypothesis per pose, (B, n) rad."""
        return self.hypotheses(poses)[0][:, 0]
