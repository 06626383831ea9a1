"""Checks on IK requests: what a caller sent, turned into arrays or refused with a reason.

Kept free of rclpy so the rules are tested without DDS and shared by every service of the server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from iknet_core.kinematics.transforms import matrix_from_quaternion

# Most alternative starts a SolvePath request may ask for: each is a whole path followed.
MAX_ALTERNATIVES = 64
# Quaternions this close to unit length are normalised; the rest are refused as malformed.
QUATERNION_NORM_TOLERANCE = 1e-2


class RequestError(ValueError):
    """A request the server refuses; the message is sent back to the caller."""


@dataclass(frozen=True)
class Target:
    """A checked target pose: position (3,) m, rotation (3, 3), unit quaternion (4,) x, y, z, w."""

    position: np.ndarray
    rotation: np.ndarray
    quaternion: np.ndarray


def check_target(
    position: Sequence[float], quaternion: Sequence[float], frame_id: str, base_frame: str
) -> Target:
    """A target pose in the base frame, or RequestError saying what is wrong with it."""
    if frame_id not in ('', base_frame):
        raise RequestError(
            f'target frame {frame_id!r} is not the base frame {base_frame!r}; '
            'transform the pose first'
        )
    # Plain floats: a request holds one pose, and numpy's per-call cost would dominate its checks.
    position = [float(v) for v in position]
    quaternion = [float(v) for v in quaternion]
    if not all(map(math.isfinite, position)):
        raise RequestError(f'target position {position} is not finite')
    if not all(map(math.isfinite, quaternion)):
        raise RequestError(f'target orientation {quaternion} is not finite')
    norm = math.sqrt(sum(v * v for v in quaternion))
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        raise RequestError(
            f'target orientation has norm {norm:.6g}; a unit quaternion (x, y, z, w) is needed'
        )
    unit = np.array(quaternion) / norm
    return Target(np.array(position), matrix_from_quaternion(unit), unit)


def check_seed(
    names: Sequence[str],
    positions: Sequence[float],
    joint_names: Sequence[str],
    field: str = 'seed',
) -> np.ndarray | None:
    """Seed joints in chain order (n,) rad; None for an empty seed; RequestError if malformed.

    Extra joints (a gripper in /joint_states) are ignored; every chain joint must be present.
    field: what the errors call the joints (SolveIK's seed, SolvePath's start).
    """
    if not names and not positions:
        return None
    if len(names) != len(positions):
        raise RequestError(f'{field} has {len(names)} names but {len(positions)} positions')
    by_name = dict(zip(names, positions, strict=True))
    twice = sorted({name for name in names if name in joint_names and names.count(name) > 1})
    if twice:
        raise RequestError(f'{field} names {twice} more than once: which position is meant?')
    missing = [name for name in joint_names if name not in by_name]
    if missing:
        raise RequestError(
            f'{field} lacks joints {missing}; expected names {list(joint_names)}, got '
            f'{list(names)}'
        )
    seed = np.array([by_name[name] for name in joint_names], dtype=np.float64)
    if not np.all(np.isfinite(seed)):
        named = dict(zip(joint_names, seed.tolist(), strict=True))
        raise RequestError(f'{field} positions {named} are not finite')
    return seed


def arm_joints(latest: Mapping[str, float], joint_names: Sequence[str]) -> np.ndarray | None:
    """The arm's joints (n,) rad in chain order from the latest joint states by name (a gripper's
    beside them ignored); None until every chain joint has come. RequestError for a joint that is
    not finite: a driver that reports NaN is named, not taken for one that has not spoken yet."""
    if not all(name in latest for name in joint_names):
        return None
    return check_seed(list(latest), list(latest.values()), joint_names, "the arm's joint")


def check_path_time(path_time: float) -> float:
    """Duration (s) of a commanded move; RequestError unless finite and positive."""
    if not math.isfinite(path_time) or path_time <= 0.0:
        raise RequestError(f'path_time must be a positive number of seconds, got {path_time}')
    return float(path_time)
