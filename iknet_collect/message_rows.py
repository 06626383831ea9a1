"""Messages to CSV rows, refusing what would poison a dataset (the reason names the skip)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from iknet_core.csv_schema import format_value

NS_PER_S = 10**9
# |q| of a pose quaternion may differ from 1 by this much (float32 publishers, rounding).
QUATERNION_NORM_TOLERANCE = 1e-3


class BadMessageError(ValueError):
    """A message the recorder skips; `reason` is the key it is counted under."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f'{reason}: {detail}')
        self.reason = reason


@dataclass(frozen=True)
class JointRecord:
    stamp_ns: int
    row: list[str]
    names: tuple[str, ...]
    chain_positions: np.ndarray  # (n_chain_joints,) rad, in chain order
    # Written in the first message's joints, not its own (joint_state_record says why).
    joints_changed: bool = False


def has_header(message_type: type) -> bool:
    """Whether a message class carries a std_msgs/Header (KinematicsPose comes in both kinds):
    an rclpy message class, or a rosbags one (a dataclass) read from a bag."""
    fields = getattr(message_type, 'get_fields_and_field_types', None)
    return 'header' in (fields() if fields else getattr(message_type, '__dataclass_fields__', {}))


def stamp_to_ns(stamp: Any) -> int:
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


def message_stamp_ns(message: Any, receipt_ns: int) -> int:
    """The message's own stamp if it has a nonzero one, else the time it was received."""
    if has_header(type(message)):
        stamp = stamp_to_ns(message.header.stamp)
        if stamp > 0:
            return stamp
    return receipt_ns


def stamp_fields(stamp_ns: int) -> list[str]:
    return [str(stamp_ns // NS_PER_S), str(stamp_ns % NS_PER_S)]


def _finite(label: str, values: Sequence[float]) -> None:
    if not all(math.isfinite(v) for v in values):
        raise BadMessageError('not_finite', f'{label} holds NaN or inf: {list(values)}')


def joint_state_record(
    message: Any,
    receipt_ns: int,
    chain_joints: Sequence[str],
    expected_names: tuple[str, ...] | None,
) -> JointRecord:
    """Row of joint_states.csv; empty velocity or effort arrays leave their columns empty, and
    so does any value that is NaN or inf but a chain joint's position: ros2_control's
    joint_state_broadcaster publishes NaN for an interface a joint lacks (an arm without effort
    sensing: every message), and a gripper's values are not the chain's."""
    names = tuple(message.name)
    n = len(names)
    if n == 0 or len(set(names)) != n:
        raise BadMessageError('bad_joint_names', f'names {list(names)}')
    position = list(message.position)
    if len(position) != n:
        raise BadMessageError('wrong_length', f'{len(position)} positions for {n} names')
    blocks = [position]
    for label in ('velocity', 'effort'):
        values = list(getattr(message, label))
        if len(values) not in (0, n):
            raise BadMessageError('wrong_length', f'{len(values)} {label} values for {n} names')
        blocks.append(values)
    missing = [name for name in chain_joints if name not in names]
    if missing:
        raise BadMessageError('missing_joints', f'{missing} not in {list(names)}')
    chain_positions = np.array([position[names.index(name)] for name in chain_joints])
    _finite(f'the position of {list(chain_joints)}', chain_positions.tolist())
    # The same joints in another order are written as they come: each row names its joints.
    # Another set (a gripper's driver gone or back) is written in the first message's joints,
    # the header's: one it lacks with empty values, one it adds left out. The chain's are all
    # there; skipped, every joint state from there on was lost.
    changed = expected_names is not None and sorted(names) != sorted(expected_names)
    if changed:
        index = {name: i for i, name in enumerate(names)}
        blocks = [
            [values[index[name]] if name in index else math.nan for name in expected_names]
            if values
            else []
            for values in blocks
        ]
        names, n = expected_names, len(expected_names)
    stamp = message_stamp_ns(message, receipt_ns)
    fields = [*stamp_fields(stamp), message.header.frame_id, *names]
    for values in blocks:
        fields += [_field(v) for v in values] if values else [''] * n
    return JointRecord(stamp, fields, names, chain_positions, changed)


def _field(value: float) -> str:
    """A joint state value as CSV text; NaN or inf (no such value) as an empty field."""
    return format_value(float(value)) if math.isfinite(value) else ''


def kinematics_pose_values(message: Any) -> list[float]:
    """x, y, z, qx, qy, qz, qw and the three scaling fields of a KinematicsPose, checked."""
    p, o = message.pose.position, message.pose.orientation
    pose = [p.x, p.y, p.z, o.x, o.y, o.z, o.w]
    extra = [
        message.max_accelerations_scaling_factor,
        message.max_velocity_scaling_factor,
        message.tolerance,
    ]
    _finite('pose', pose + extra)
    norm = math.sqrt(sum(v * v for v in pose[3:]))
    if abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE:
        raise BadMessageError('bad_quaternion', f'orientation norm {norm:.6f} is not 1')
    return pose + extra


def pose_row(stamp_ns: int, frame_id: str, values: Sequence[float]) -> list[str]:
    """Row of kinematics_pose.csv: stamp, frame, 7 pose values, 3 scaling/tolerance fields."""
    return [*stamp_fields(stamp_ns), frame_id, *(format_value(float(v)) for v in values)]
