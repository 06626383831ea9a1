"""Closed-form IK for OM-X-like arms (yaw joint, then three pitch joints): every solution.

Used as the test oracle and as the `analytic` solver. The numbers come from the chain, so an arm
with the same structure and other link lengths works too.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.transforms import axis_angle_matrix, rotation_angle_between

_Z = (0.0, 0.0, 1.0)
_Y = (0.0, 1.0, 0.0)
# Slack (rad) when keeping 2*pi-shifted joint values inside a joint's reach.
_RANGE_SLACK = 1e-9


class OmxAnalyticIK:
    """Solves yaw-pitch-pitch-pitch chains exactly; raises ValueError for other chains."""

    def __init__(self, chain: Chain = OMX_CHAIN) -> None:
        axes = tuple(joint.axis for joint in chain.joints)
        offsets = [joint.origin_xyz for joint in chain.joints[1:]] + [chain.tip_xyz]
        rotated = any(any(j.origin_rpy) for j in chain.joints) or any(chain.tip_rpy)
        if axes != (_Z, _Y, _Y, _Y) or rotated or any(abs(o[1]) > 1e-12 for o in offsets):
            raise ValueError(
                f'chain {chain.name!r} is not a yaw-pitch-pitch-pitch arm with planar links; '
                'the closed-form OM-X solver does not apply'
            )
        self.chain = chain
        base = chain.joints[0].origin_xyz
        shoulder, upper, fore, tip = offsets
        self._axis_xy = np.array(base[:2])
        # Planar coordinates (u along the arm, v up) of joint2, relative to the joint1 axis.
        self._shoulder = complex(shoulder[0], base[2] + shoulder[2])
        self._upper = complex(upper[0], upper[2])
        self._fore = complex(fore[0], fore[2])
        self._tip = complex(tip[0], tip[2])
        self._reach = np.array([joint.reach for joint in chain.joints])

    def branches(self, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Elbow-up and elbow-down solutions: (B, 3), (B, 3, 3) -> (B, 2, 4) rad in (-pi, pi].

        Unreachable targets get the nearest stretched or folded arm, so check FK of the result.
        """
        position = np.asarray(position, dtype=np.float64)
        rotation = np.asarray(rotation, dtype=np.float64)
        q1 = self._yaw(position, rotation)
        c1, s1 = np.cos(q1), np.sin(q1)
        # Pitch of the tool: rotation = Rz(q1) Ry(pitch) for reachable targets.
        m00 = c1 * rotation[:, 0, 0] + s1 * rotation[:, 1, 0]
        m02 = c1 * rotation[:, 0, 2] + s1 * rotation[:, 1, 2]
        pitch = np.arctan2(m02 - rotation[:, 2, 0], m00 + rotation[:, 2, 2])
        dx = position[:, 0] - self._axis_xy[0]
        dy = position[:, 1] - self._axis_xy[1]
        # In the arm plane, Ry(angle) turns a vector by -angle: multiply by exp(-1j * angle).
        target = (c1 * dx + s1 * dy) + 1j * position[:, 2]
        wrist = target - self._shoulder - self._tip * np.exp(-1j * pitch)
        upper, fore = abs(self._upper), abs(self._fore)
        cos_elbow = (np.abs(wrist) ** 2 - upper**2 - fore**2) / (2.0 * upper * fore)
        elbow = np.arccos(np.clip(cos_elbow, -1.0, 1.0))
        twist = np.angle(self._upper) - np.angle(self._fore)
        solutions = []
        for sign in (1.0, -1.0):
            q3 = sign * elbow - twist
            q2 = np.angle(self._upper + self._fore * np.exp(-1j * q3)) - np.angle(wrist)
            q4 = pitch - q2 - q3
            solutions.append(np.stack([q1, q2, q3, q4], -1))
        return _wrap(np.stack(solutions, 1))

    def solve(self, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Every solution of one pose within the joints' reach, (3,), (3, 3) -> (k, 4), best first.

        Includes both elbows and each 2*pi-shifted value a joint can take (joint1 beyond pi).
        """
        branches = self.branches(np.asarray(position)[None], np.asarray(rotation)[None])[0]
        candidates = []
        for branch in branches:
            per_joint = [self._in_reach(index, value) for index, value in enumerate(branch)]
            candidates.extend(itertools.product(*per_joint))
        if not candidates:
            return np.zeros((0, 4))
        solutions = np.unique(np.round(np.array(candidates), 12), axis=0)
        position_fk, rotation_fk = forward_kinematics(self.chain, solutions)
        error = np.linalg.norm(position_fk - position, axis=-1) + 0.01 * rotation_angle_between(
            rotation_fk, np.broadcast_to(rotation, rotation_fk.shape)
        )
        return solutions[np.argsort(error, kind='stable')]

    def pointing_rotation(self, position: np.ndarray, pitch: float) -> np.ndarray:
        """Tool orientation Rz(yaw) Ry(pitch) that faces a position (3,): what the arm can reach.

        Lets users ask for a position and a tool pitch (rad, positive = pointing down) only.
        """
        dx, dy = np.asarray(position, dtype=np.float64)[:2] - self._axis_xy
        yaw = math.atan2(dy, dx) if math.hypot(dx, dy) > 1e-9 else 0.0
        z_axis, y_axis = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)
        return axis_angle_matrix(z_axis, np.float64(yaw)) @ axis_angle_matrix(
            y_axis, np.float64(pitch)
        )

    def _yaw(self, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """joint1 from the target's direction, on the side its orientation faces."""
        yaw_tool = np.arctan2(-rotation[:, 0, 1], rotation[:, 1, 1])
        tool_defined = np.hypot(rotation[:, 0, 1], rotation[:, 1, 1]) > 1e-9
        dx = position[:, 0] - self._axis_xy[0]
        dy = position[:, 1] - self._axis_xy[1]
        yaw_position = np.arctan2(dy, dx)
        facing_away = np.cos(yaw_position - yaw_tool) < 0.0
        yaw_position = np.where(tool_defined & facing_away, yaw_position + math.pi, yaw_position)
        on_axis = np.hypot(dx, dy) < 1e-9
        return np.where(on_axis & tool_defined, yaw_tool, yaw_position)

    def _in_reach(self, index: int, value: float) -> list[float]:
        low, high = self._reach[index]
        first = math.ceil((low - _RANGE_SLACK - value) / (2 * math.pi))
        last = math.floor((high + _RANGE_SLACK - value) / (2 * math.pi))
        return [value + 2 * math.pi * k for k in range(first, last + 1)]


def _wrap(angle: np.ndarray) -> np.ndarray:
    """Angles to (-pi, pi]."""
    return math.pi - np.mod(math.pi - angle, 2 * math.pi)
