"""Rotations and quaternions for numpy arrays and torch tensors alike.

Quaternions are (x, y, z, w) as in geometry_msgs. Functions pick numpy or torch from their input,
so one implementation serves the recorder (numpy, no torch import) and training (autograd, CUDA).
"""

from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

import numpy as np

Array = Any  # numpy.ndarray or torch.Tensor with the same shape conventions


def array_module(x: Array) -> ModuleType:
    """numpy or torch, whichever x belongs to, without importing torch for numpy callers."""
    if type(x).__module__.startswith('torch'):
        import torch

        return torch
    return np


def as_real(x: Any) -> Array:
    """x as a floating-point array (a list as numpy's): constant() takes x's dtype, so integer
    or boolean joints would make every length of the chain a whole number of metres."""
    if array_module(x) is np:
        x = np.asarray(x)
        return x if x.dtype.kind == 'f' else x.astype(np.float64)
    import torch

    return x if x.is_floating_point() else x.to(torch.float64)


def constant(value: Any, like: Array) -> Array:
    """A constant in the array library, dtype and device of `like` (never to be written to)."""
    xp = array_module(like)
    if xp is np:
        return np.asarray(value, dtype=like.dtype)
    array = np.array(value)
    if like.device.type == 'cpu':
        return xp.as_tensor(array, dtype=like.dtype)
    # On an accelerator a new tensor from the host is a copy that waits for the device's queue,
    # ~4 per joint per FK call: the chain's few constants are made there once.
    return _device_constant(array.tobytes(), array.shape, array.dtype.str, like.dtype, like.device)


@functools.lru_cache(maxsize=512)
def _device_constant(
    data: bytes, shape: tuple[int, ...], numpy_dtype: str, dtype: Any, device: Any
) -> Any:
    import torch

    array = np.frombuffer(data, dtype=numpy_dtype).reshape(shape)
    return torch.as_tensor(array.copy(), dtype=dtype, device=device)


def axis_angle_matrix(axis: tuple[float, float, float], angle: Array) -> Array:
    """Rotation matrices about a fixed unit axis: angle (...,) -> (..., 3, 3) (Rodrigues)."""
    xp = array_module(angle)
    x, y, z = axis
    skew = constant([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]], angle)
    eye = constant(np.eye(3), angle)
    s = xp.sin(angle)[..., None, None]
    c = xp.cos(angle)[..., None, None]
    return eye + s * skew + (1.0 - c) * (skew @ skew)


def rpy_matrix(rpy: tuple[float, float, float]) -> np.ndarray:
    """URDF fixed-axis roll-pitch-yaw to a rotation matrix: Rz(yaw) Ry(pitch) Rx(roll)."""
    roll, pitch, yaw = (np.asarray(a, dtype=np.float64) for a in rpy)
    return (
        axis_angle_matrix((0.0, 0.0, 1.0), yaw)
        @ axis_angle_matrix((0.0, 1.0, 0.0), pitch)
        @ axis_angle_matrix((1.0, 0.0, 0.0), roll)
    )


def rpy_from_matrix(rotation: np.ndarray) -> tuple[float, float, float]:
    """The URDF roll, pitch, yaw of a rotation matrix (3, 3); rpy_matrix's inverse. At pitch
    +-pi/2 only roll + yaw (or roll - yaw) is defined: yaw is 0 there."""
    r = np.asarray(rotation, dtype=np.float64)
    cos_pitch = math.hypot(r[0, 0], r[1, 0])
    pitch = math.atan2(-r[2, 0], cos_pitch)
    if cos_pitch > 1e-12:
        roll, yaw = math.atan2(r[2, 1], r[2, 2]), math.atan2(r[1, 0], r[0, 0])
    else:
        roll, yaw = math.atan2(-r[1, 2], r[1, 1]), 0.0
    return (roll + 0.0, pitch + 0.0, yaw + 0.0)  # + 0.0: no -0.0 in written files


def quaternion_from_matrix(rotation: Array) -> Array:
    """(..., 3, 3) -> (..., 4) unit quaternions (x, y, z, w) with w >= 0 (Shepperd's method)."""
    xp = array_module(rotation)
    r = rotation
    r00, r01, r02 = r[..., 0, 0], r[..., 0, 1], r[..., 0, 2]
    r10, r11, r12 = r[..., 1, 0], r[..., 1, 1], r[..., 1, 2]
    r20, r21, r22 = r[..., 2, 0], r[..., 2, 1], r[..., 2, 2]
    t_w = 1.0 + r00 + r11 + r22
    t_x = 1.0 + r00 - r11 - r22
    t_y = 1.0 - r00 + r11 - r22
    t_z = 1.0 - r00 - r11 + r22
    tiny = xp.zeros_like(t_w) + 1e-30
    candidates = [
        (xp.stack([r21 - r12, r02 - r20, r10 - r01, t_w], -1), t_w),
        (xp.stack([t_x, r01 + r10, r02 + r20, r21 - r12], -1), t_x),
        (xp.stack([r01 + r10, t_y, r12 + r21, r02 - r20], -1), t_y),
        (xp.stack([r02 + r20, r12 + r21, t_z, r10 - r01], -1), t_z),
    ]
    largest = xp.maximum(xp.maximum(t_w, t_x), xp.maximum(t_y, t_z))
    quat, _ = candidates[3]
    quat = quat / (2.0 * xp.sqrt(xp.maximum(t_z, tiny)))[..., None]
    for cand, t in reversed(candidates[:3]):
        scaled = cand / (2.0 * xp.sqrt(xp.maximum(t, tiny)))[..., None]
        quat = xp.where((t >= largest)[..., None], scaled, quat)
    return canonical_quaternion(quat)


def canonical_quaternion(quat: Array) -> Array:
    """q and -q are one rotation; pick the one with w >= 0 so comparisons are sign-free."""
    xp = array_module(quat)
    return xp.where(quat[..., 3:4] < 0.0, -quat, quat)


def matrix_from_quaternion(quat: Array) -> Array:
    """(..., 4) quaternions (x, y, z, w), normalised here, -> (..., 3, 3) rotation matrices."""
    xp = array_module(quat)
    if xp is np and np.ndim(quat) == 1:
        # One pose per service request: Python floats cost a tenth of 0-d numpy operations.
        x, y, z, w = (float(v) for v in quat)
        norm = math.sqrt(x * x + y * y + z * z + w * w)
        return np.array(_rotation_entries(x / norm, y / norm, z / norm, w / norm)).reshape(3, 3)
    q = quat / xp.sqrt((quat * quat).sum(-1))[..., None]
    entries = _rotation_entries(q[..., 0], q[..., 1], q[..., 2], q[..., 3])
    return xp.stack(entries, -1).reshape(*q.shape[:-1], 3, 3)


def _rotation_entries(x: Array, y: Array, z: Array, w: Array) -> tuple[Array, ...]:
    """The nine entries, row by row, of the rotation of unit quaternion (x, y, z, w)."""
    return (
        1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
        2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
        2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y),
    )  # fmt: skip


def rotation_features(rotation: Array) -> Array:
    """(..., 3, 3) -> (..., 6): the first two columns, a continuous, quaternion-sign-free input."""
    xp = array_module(rotation)
    return xp.stack([rotation[..., :, 0], rotation[..., :, 1]], -1).reshape(
        *rotation.shape[:-2], 6
    )


def rotation_angle_between(a: Array, b: Array) -> Array:
    """Angle (rad) of the rotation taking a to b: (..., 3, 3) x2 -> (...,)."""
    xp = array_module(a)
    # atan2 of the axis-angle sine and cosine stays accurate for tiny angles, unlike arccos(trace).
    relative = xp.swapaxes(a, -1, -2) @ b
    trace = relative[..., 0, 0] + relative[..., 1, 1] + relative[..., 2, 2]
    vee = xp.stack(
        [
            relative[..., 2, 1] - relative[..., 1, 2],
            relative[..., 0, 2] - relative[..., 2, 0],
            relative[..., 1, 0] - relative[..., 0, 1],
        ],
        -1,
    )
    sine = xp.sqrt((vee * vee).sum(-1))
    return xp.arctan2(sine, trace - 1.0)
