"""The pose exactly as the legacy ROBOTIS controller publishes it on /kinematics_pose."""

from __future__ import annotations

import numpy as np

from iknet_core.kinematics import OMX_CHAIN, Chain, forward_kinematics
from iknet_core.kinematics.transforms import quaternion_from_matrix


def legacy_pose(q: np.ndarray, chain: Chain = OMX_CHAIN) -> np.ndarray:
    """(..., n) rad -> (..., 7) x, y, z, qx, qy, qz, qw with the controller's quaternion sign.

    The controller converts the FK rotation with Eigen, which makes w positive when the trace is
    positive and otherwise the component of the largest diagonal entry; that is why about 5 % of
    real poses have w < 0. Matching it keeps simulated and real streams interchangeable.
    """
    position, rotation = forward_kinematics(chain, np.asarray(q, dtype=np.float64))
    quat = quaternion_from_matrix(rotation)
    diagonal = np.diagonal(rotation, axis1=-2, axis2=-1)
    d0, d1, d2 = diagonal[..., 0], diagonal[..., 1], diagonal[..., 2]
    # Eigen's tie-breaking: index 0, then 1 if strictly larger, then 2 if strictly larger.
    largest = np.where(d1 > d0, 1, 0)
    largest = np.where(d2 > np.maximum(d0, d1), 2, largest)
    positive = np.where(d0 + d1 + d2 > 0.0, 3, largest)
    sign = np.where(np.take_along_axis(quat, positive[..., None], -1) < 0.0, -1.0, 1.0)
    return np.concatenate([position, quat * sign], -1)
