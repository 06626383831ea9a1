"""Checks a controller makes before it moves: known joints, finite values, software limits."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from iknet_core.kinematics import Chain


class GoalRejectedError(ValueError):
    """A goal the arm must not try; the message is the reason logged and reported."""


def joint_goal(
    chain: Chain, names: Sequence[str], positions: Sequence[float], present: np.ndarray
) -> np.ndarray:
    """Full goal (n_joints,) rad: named joints set, the others kept at `present`."""
    if len(names) != len(positions):
        raise GoalRejectedError(f'{len(names)} joint names but {len(positions)} positions')
    if not names:
        raise GoalRejectedError('no joints in the goal')
    index = {name: i for i, name in enumerate(chain.joint_names)}
    unknown = [name for name in names if name not in index]
    if unknown:
        raise GoalRejectedError(f'unknown joint names {unknown}; this arm has {chain.joint_names}')
    if len(set(names)) != len(names):
        raise GoalRejectedError(f'joint named twice in {list(names)}')
    goal = np.array(present, dtype=np.float64)
    for name, value in zip(names, positions, strict=True):
        joint = chain.joints[index[name]]
        if not math.isfinite(value):
            raise GoalRejectedError(f'{name} goal {value} is not a finite number')
        low, high = joint.limits
        if not low <= value <= high:
            raise GoalRejectedError(f'{name} goal {value:.4f} rad is outside [{low}, {high}]')
        goal[index[name]] = value
    return goal


def path_time(value: float) -> float:
    """A move duration (s) the controller can plan."""
    if not math.isfinite(value) or value <= 0.0:
        raise GoalRejectedError(f'path_time {value} s is not a positive number')
    return float(value)
