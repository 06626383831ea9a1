"""The geometric Jacobian, for damped-least-squares refinement and singularity checks."""

from __future__ import annotations

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.fk import joint_frames
from iknet_core.kinematics.transforms import Array, array_module


def geometric_jacobian(chain: Chain, q: Array) -> Array:
    """q (..., n) -> (..., 6, n): rows 0-2 tip linear velocity (m/rad, or m/m for a prismatic
    joint), 3-5 angular velocity (none for a prismatic joint)."""
    xp = array_module(q)
    axes, origins, tip, _ = joint_frames(chain, q)
    columns = []
    for joint, axis, origin in zip(chain.joints, axes, origins, strict=True):
        if joint.prismatic:
            columns.append(xp.concatenate([axis, 0.0 * axis], -1))
            continue
        linear = _cross(xp, axis, tip - origin)
        columns.append(xp.concatenate([linear, axis], -1))
    return xp.stack(columns, -1)


def _cross(xp, a: Array, b: Array) -> Array:
    ax, ay, az = a[..., 0], a[..., 1], a[..., 2]
    bx, by, bz = b[..., 0], b[..., 1], b[..., 2]
    return xp.stack([ay * bz - az * by, az * bx - ax * bz, ax * by - ay * bx], -1)
