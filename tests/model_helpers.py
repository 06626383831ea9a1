"""Shared by the tests: a small untrained model and a recording; a head conditioned as trained."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iknet_core.checkpoint import save_checkpoint
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.networks import MultiHypothesisIKNet, build_model
from iknet_train.synthetic import synthetic_samples, write_recording


def tiny_model_and_recording(root: Path, seed: int, count: int = 300) -> tuple[Path, Path]:
    """An untrained width-32 model normalised for `count` reachable poses (FK of random joints),
    and those poses recorded at 100 Hz in root/rec: (model file, recording directory)."""
    poses, joints = synthetic_samples(OMX_CHAIN, count, seed=seed)
    write_recording(root / 'rec', 10**18 + 10_000_000 * np.arange(count), joints, OMX_CHAIN)
    torch.manual_seed(seed)
    model = build_model('iknet', {'width': 32, 'n_blocks': 1})
    model.fit_normalization(torch.as_tensor(poses, dtype=torch.float32))
    return save_checkpoint(root / 'model.pt', model, 'iknet', OMX_CHAIN), root / 'rec'


def condition_head(model: MultiHypothesisIKNet, weight_scale: float) -> None:
    """Give an untrained network's (cos, sin) pairs a length near 1, as training does.

    At random weights a pair's length falls to 0.01 for some poses, where atan2 turns float32
    rounding alone into 5e-4 rad between two runtimes; backends would differ by noise."""
    with torch.no_grad():
        model.head.weight.mul_(weight_scale)
        model.head.bias.copy_(torch.tensor([0.8, 0.6]).repeat(model.head.out_features // 2))
