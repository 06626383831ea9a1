"""Shared by the benchmark and test-command tests: a small untrained model and a recording."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from iknet_core.checkpoint import save_checkpoint
from iknet_core.kinematics import OMX_CHAIN
from iknet_core.networks import build_model
from iknet_train.synthetic import synthetic_samples, write_recording


def tiny_model_and_recording(root: Path, seed: int, count: int = 300) -> tuple[Path, Path]:
    """An untrained width-32 model normalised for `count` reachable poses (FK of random joints),
    and those poses recorded at 100 Hz in root/rec: (model file, recording directory)."""
    poses, joints = synthetic_samples(OMX_CHAIN, count, seed=seed)
    write_recording(root / 'rec', 10**18 + 10_000_000 * np.arange(count), joints, OMX_CHAIN)
    model = build_model('iknet', {'width': 32, 'n_blocks': 1})
    model.fit_normalization(torch.as_tensor(poses, dtype=torch.float32))
    return save_checkpoint(root / 'model.pt', model, 'iknet', OMX_CHAIN), root / 'rec'
