"""Kinematic chains, forward kinematics, Jacobians and the OM-X closed-form IK."""

from iknet_core.kinematics.chain import OMX_CHAIN, OMX_HAND_GUIDED_RANGES, Chain, Joint
from iknet_core.kinematics.fk import forward_kinematics, pose_from_joints
from iknet_core.kinematics.jacobian import geometric_jacobian

__all__ = [
    'OMX_CHAIN',
    'OMX_HAND_GUIDED_RANGES',
    'Chain',
    'Joint',
    'forward_kinematics',
    'geometric_jacobian',
    'pose_from_joints',
]
