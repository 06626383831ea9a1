"""The geometric Jacobian, for damped-least-squares refinement and singularity checks."""

from __future__ import annotations

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import joint_frames
from iknet_core.kinematics.transforms import Array, array_module


def geometric_jacobian(chain: Chain, q: Array) -> Array:
    """q (..., n) -> (..., 6, n): rows 0-2 tip linear velocity (m/rad), 3-5 angular velocity."""
    xp = array_module(q)
    axes, origins, tip, _ = joint_frames(chain, q)
    columns = []
    for axis, origin in zip(axes, origins, strict=True):
        linear = _cross(xp, axis, tip - origin)
        columns.append(xp.concatenate([linear, axis], -1))
    return xp.stack(columns, -1)


def _cross(xp, a: Array, b: Array) -> Array:
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return xp.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)
