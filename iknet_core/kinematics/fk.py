"""Forward kinematics of a serial chain, batched, for numpy arrays or torch tensors."""

from __future__ import annotations

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.transforms import (
    Array,
    array_module,
    axis_angle_matrix,
    constant,
    quaternion_from_matrix,
    rpy_matrix,
)


def joint_frames(chain: Chain, q: Array) -> tuple[list[Array], list[Array], Array, Array]:
    """World axes and origins of every joint, then the tip position and rotation.

    q: (..., n_joints) rad (m for a prismatic joint). Returns per joint (..., 3) axes and (..., 3)
    origins (before its own motion), tip (..., 3) and (..., 3, 3). Differentiable when q is a
    torch tensor.
    """
    if q.shape[-1] != chain.n_joints:
        raise ValueError(
            f'expected joints of shape (..., {chain.n_joints}) for {chain.name}, '
            f'got {tuple(q.shape)}'
        )
    batch = q.shape[:-1]
    rotation = constant(np.broadcast_to(np.eye(3), (*batch, 3, 3)), q)
    position = constant(np.zeros((*batch, 3)), q)
    axes, origins = [], []
    for index, joint in enumerate(chain.joints):
        position = position + (rotation @ constant(joint.origin_xyz, q)[:, None])[..., 0]
        if any(joint.origin_rpy):
            rotation = rotation @ constant(rpy_matrix(joint.origin_rpy), q)
        axis = (rotation @ constant(joint.axis, q)[:, None])[..., 0]
        axes.append(axis)
        origins.append(position)
        if joint.prismatic:
            position = position + axis * q[..., index, None]
        else:
            rotation = rotation @ axis_angle_matrix(joint.axis, q[..., index])
    position = position + (rotation @ constant(chain.tip_xyz, q)[:, None])[..., 0]
    if any(chain.tip_rpy):
        rotation = rotation @ constant(rpy_matrix(chain.tip_rpy), q)
    return axes, origins, position, rotation


def forward_kinematics(chain: Chain, q: Array) -> tuple[Array, Array]:
    """Tip pose in the base frame: q (..., n) -> position (..., 3) m, rotation (..., 3, 3)."""
    _, _, position, rotation = joint_frames(chain, q)
    return position, rotation


def pose_from_joints(chain: Chain, q: Array) -> Array:
    """Tip pose as on /kinematics_pose: (..., n) -> (..., 7) = x, y, z, qx, qy, qz, qw."""
    position, rotation = forward_kinematics(chain, q)
    xp = array_module(q)
    return xp.concatenate([position, quaternion_from_matrix(rotation)], -1)
