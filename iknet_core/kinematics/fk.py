"""Forward kinematics of a serial chain, batched, for numpy arrays or torch tensors."""

from __future__ import annotations

import numpy as np

from iknet_core.kinematics.chain import Chain, Joint
from iknet_core.kinematics.transforms import (
    Array,
    array_module,
    as_real,
    axis_angle_matrix,
    constant,
    quaternion_from_matrix,
    rpy_matrix,
)


def base_frame(like: Array) -> tuple[Array, Array]:
    """The base frame as a rotation (..., 3, 3) and position (..., 3), shaped like `like`
    (..., k) without its last dimension."""
    # Broadcast views of one constant: a sampler's (B, count) batch on a GPU copies 36 bytes,
    # not B x count matrices, from the host.
    xp, batch = array_module(like), tuple(like.shape[:-1])
    rotation = xp.broadcast_to(constant(np.eye(3), like), (*batch, 3, 3))
    return rotation, xp.broadcast_to(constant(np.zeros(3), like), (*batch, 3))


def enter_joint(joint: Joint, rotation: Array, position: Array) -> tuple[Array, Array]:
    """The frame the joint moves in (before its own motion), from the frame before it."""
    position = position + (rotation @ constant(joint.origin_xyz, position)[:, None])[..., 0]
    if any(joint.origin_rpy):
        rotation = rotation @ constant(rpy_matrix(joint.origin_rpy), position)
    return rotation, position


def move_joint(
    joint: Joint, rotation: Array, position: Array, value: Array
) -> tuple[Array, Array]:
    """The frame after the joint turns (rad) or slides (m) by value (...,), from enter_joint's."""
    if joint.prismatic:
        axis = (rotation @ constant(joint.axis, position)[:, None])[..., 0]
        return rotation, position + axis * value[..., None]
    return rotation @ axis_angle_matrix(joint.axis, value), position


def tip_pose(chain: Chain, rotation: Array, position: Array) -> tuple[Array, Array]:
    """The tip's position and rotation from the frame after the last joint's motion."""
    position = position + (rotation @ constant(chain.tip_xyz, position)[:, None])[..., 0]
    if any(chain.tip_rpy):
        rotation = rotation @ constant(rpy_matrix(chain.tip_rpy), position)
    return position, rotation


def joint_frames(chain: Chain, q: Array) -> tuple[list[Array], list[Array], Array, Array]:
    """World axes and origins of every joint, then the tip position and rotation.

    q: (..., n_joints) rad (m for a prismatic joint). Returns per joint (..., 3) axes and (..., 3)
    origins (before its own motion), tip (..., 3) and (..., 3, 3). Differentiable when q is a
    torch tensor.
    """
    q = as_real(q)
    if q.shape[-1] != chain.n_joints:
        raise ValueError(
            f'expected joints of shape (..., {chain.n_joints}) for {chain.name}, '
            f'got {tuple(q.shape)}'
        )
    rotation, position = base_frame(q)
    axes, origins = [], []
    for index, joint in enumerate(chain.joints):
        rotation, position = enter_joint(joint, rotation, position)
        axes.append((rotation @ constant(joint.axis, q)[:, None])[..., 0])
        origins.append(position)
        rotation, position = move_joint(joint, rotation, position, q[..., index])
    position, rotation = tip_pose(chain, rotation, position)
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
