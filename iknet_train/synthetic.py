"""Synthetic samples: joints drawn in ranges, poses by FK. Free, exact, and cover the workspace.

Also writes them as a recording (the two CSV files), which the tests use to exercise the loader.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from iknet_core.csv_schema import (
    JOINT_STATES_FILE,
    KINEMATICS_POSE_COLUMNS,
    KINEMATICS_POSE_FILE,
    format_value,
    joint_states_columns,
)
from iknet_core.kinematics.chain import OMX_CHAIN, OMX_HAND_GUIDED_RANGES, Chain
from iknet_core.kinematics.fk import pose_from_joints


def default_ranges(chain: Chain, whole_reach: bool = False) -> np.ndarray:
    """(n, 2) sampling ranges: the hand-guided ones for the OM-X (unless whole_reach: for a model
    of every solution, some of which lie beyond them), else each joint's reach."""
    if chain == OMX_CHAIN and not whole_reach:
        return np.array(OMX_HAND_GUIDED_RANGES)
    return np.array([joint.reach for joint in chain.joints])


def limit_ranges(chain: Chain) -> np.ndarray:
    """(n, 2) each joint's software limits (rad): where test poses of an arm are drawn."""
    return np.array([joint.limits for joint in chain.joints], dtype=np.float64)


def sample_joints(n: int, ranges: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """n joint vectors uniform in ranges (n_joints, 2) rad -> (n, n_joints)."""
    ranges = np.asarray(ranges, dtype=np.float64)
    if ranges.ndim != 2 or ranges.shape[1] != 2 or np.any(ranges[:, 0] >= ranges[:, 1]):
        raise ValueError(f'ranges must be (n_joints, 2) of increasing pairs, got {ranges}')
    return rng.uniform(ranges[:, 0], ranges[:, 1], size=(n, len(ranges)))


def synthetic_samples(
    chain: Chain,
    n: int,
    seed: int = 0,
    ranges: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """n (poses (n, 7), joints (n, n_joints)) pairs; ranges default to default_ranges(chain)."""
    if n < 0:
        raise ValueError(f'number of synthetic samples must be >= 0, got {n}')
    ranges = default_ranges(chain) if ranges is None else ranges
    if len(ranges) != chain.n_joints:
        raise ValueError(
            f'{chain.n_joints} joints need {chain.n_joints} ranges, got {len(ranges)}'
        )
    joints = sample_joints(n, ranges, np.random.default_rng(seed))
    return pose_from_joints(chain, joints), joints


def parse_ranges(text: str, chain: Chain, whole_reach: bool = False) -> np.ndarray:
    """'joint1=-3:3,joint3=-1:1' -> (n, 2) ranges; unnamed joints keep default_ranges(chain,
    whole_reach), or, where the text starts with 'reach' or 'limits' ('reach,joint2=-1:1'),
    every joint's reach or software limits (the OM-X's differ from its hand-guided default)."""
    items = [part.strip() for part in text.split(',') if part.strip()]
    if items and items[0] in ('reach', 'limits'):
        base = items.pop(0)
        ranges = limit_ranges(chain) if base == 'limits' else default_ranges(chain, True)
    else:
        ranges = default_ranges(chain, whole_reach)
    for item in items:
        try:
            name, bounds = item.split('=')
            low, high = (float(v) for v in bounds.split(':'))
            index = chain.joint_names.index(name)
        except ValueError:
            raise ValueError(
                f'bad range {item!r}: expected NAME=LOW:HIGH with NAME in {chain.joint_names}, '
                "after an optional 'reach' or 'limits' first"
            ) from None
        joint = chain.joints[index]
        reach_low, reach_high = joint.reach
        if not low < high:
            raise ValueError(f'bad range {item!r}: LOW must be below HIGH')
        if low < reach_low - 1e-9 or high > reach_high + 1e-9:
            raise ValueError(
                f'bad range {item!r}: {name} reaches [{reach_low:g}, {reach_high:g}] '
                f'{joint.unit}; samples beyond it are poses the arm cannot take'
            )
        ranges[index] = (low, high)
    return ranges


def write_recording(
    directory: Path | str,
    stamps_ns: np.ndarray,
    joints: np.ndarray,
    chain: Chain,
    extra_joints: Mapping[str, float] | None = None,
    joint_stamps_ns: np.ndarray | None = None,
) -> tuple[Path, Path]:
    """kinematics_pose.csv and joint_states.csv as the recorder writes them.

    stamps_ns (N,) int ns, joints (N, n) rad; extra_joints (e.g. {'gripper': 0.01}) are appended
    to every joint state; joint_stamps_ns (default stamps_ns) stamps the joint states.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    poses = pose_from_joints(chain, np.asarray(joints, dtype=np.float64))
    joint_stamps_ns = stamps_ns if joint_stamps_ns is None else joint_stamps_ns
    extra = dict(extra_joints or {})
    names = [*chain.joint_names, *extra]
    pose_path = directory / KINEMATICS_POSE_FILE
    joint_path = directory / JOINT_STATES_FILE
    with pose_path.open('w') as out:
        out.write(','.join(KINEMATICS_POSE_COLUMNS) + '\n')
        for stamp, pose in zip(stamps_ns, poses, strict=True):
            fields = [*_stamp_fields(stamp), '', *map(float, pose), 0.0, 0.0, 0.0]
            out.write(','.join(format_value(v) for v in fields) + '\n')
    with joint_path.open('w') as out:
        out.write(','.join(joint_states_columns(len(names))) + '\n')
        for stamp, q in zip(joint_stamps_ns, joints, strict=True):
            positions = [*map(float, q), *map(float, extra.values())]
            zeros = [0.0] * len(names)
            fields = [*_stamp_fields(stamp), '', *names, *positions, *zeros, *zeros]
            out.write(','.join(format_value(v) for v in fields) + '\n')
    return pose_path, joint_path


def _stamp_fields(stamp_ns: int) -> tuple[int, int]:
    return int(stamp_ns) // 1_000_000_000, int(stamp_ns) % 1_000_000_000
