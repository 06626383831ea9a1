"""Where networks run: CUDA when present (PC or Jetson), else the CPU."""

from __future__ import annotations

import torch

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


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a host clock times it."""
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
