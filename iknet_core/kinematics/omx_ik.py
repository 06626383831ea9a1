"""Closed-form IK for OM-X-like arms (yaw joint, then three pitch joints): every solution.

Used as the test oracle and as the `analytic` solver. The numbers come from the chain, so an arm
with the same structure and other link lengths works too.
"""

from __future__ import annotations

import cmath
import itertools
import math
from typing import NamedTuple

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.transforms import axis_angle_matrix, rotation_angle_between

_Z = (0.0, 0.0, 1.0)
_Y = (0.0, 1.0, 0.0)
# Slack (rad) when keeping 2*pi-shifted joint values inside a joint's reach.
_RANGE_SLACK = 1e-9
# Below this (m, or sine of an angle) a direction is undefined: the target on the joint1 axis,
# or a tool pointing straight up or down.
_DEGENERATE = 1e-9


class OmxGeometry(NamedTuple):
    """The arm's constants for the compiled closed form: the joint1 axis (m) in the base frame,
    and joint2, the upper arm, the forearm and the tool as planar vectors (u along the arm,
    v up; m)."""

    axis_x: float
    axis_y: float
    shoulder: complex
    upper: complex
    fore: complex
    tip: complex


@njit(cache=True)
def _wrap(angle: float) -> float:
    """An angle to (-pi, pi]."""
    return math.pi - (math.pi - angle) % (2.0 * math.pi)


@njit(cache=True)
def branches_of_pose(position, rotation, geometry, out):
    """Both elbows of one pose (3,) m, (3, 3) into out (2, 4) rad; compiled, a few us.

    joint1 faces the target, on the side its orientation faces; the tool pitch follows from
    rotation = Rz(q1) Ry(pitch); the elbow from the wrist's distance (law of cosines).
    """
    dx = position[0] - geometry.axis_x
    dy = position[1] - geometry.axis_y
    yaw_tool = math.atan2(-rotation[0, 1], rotation[1, 1])
    tool_defined = math.hypot(rotation[0, 1], rotation[1, 1]) > _DEGENERATE
    q1 = math.atan2(dy, dx)
    if tool_defined and math.cos(q1 - yaw_tool) < 0.0:
        q1 += math.pi
    if tool_defined and math.hypot(dx, dy) < _DEGENERATE:
        q1 = yaw_tool
    c1, s1 = math.cos(q1), math.sin(q1)
    m00 = c1 * rotation[0, 0] + s1 * rotation[1, 0]
    m02 = c1 * rotation[0, 2] + s1 * rotation[1, 2]
    pitch = math.atan2(m02 - rotation[2, 0], m00 + rotation[2, 2])
    # In the arm plane, Ry(angle) turns a vector by -angle: multiply by exp(-1j * angle).
    target = complex(c1 * dx + s1 * dy, position[2])
    wrist = target - geometry.shoulder - geometry.tip * cmath.exp(-1j * pitch)
    upper, fore = abs(geometry.upper), abs(geometry.fore)
    cos_elbow = (abs(wrist) ** 2 - upper * upper - fore * fore) / (2.0 * upper * fore)
    elbow = math.acos(min(max(cos_elbow, -1.0), 1.0))
    twist = cmath.phase(geometry.upper) - cmath.phase(geometry.fore)
    for row in range(2):
        sign = 1.0 if row == 0 else -1.0
        q3 = sign * elbow - twist
        q2 = cmath.phase(geometry.upper + geometry.fore * cmath.exp(-1j * q3)) - cmath.phase(wrist)
        out[row, 0] = _wrap(q1)
        out[row, 1] = _wrap(q2)
        out[row, 2] = _wrap(q3)
        out[row, 3] = _wrap(pitch - q2 - q3)


@njit(cache=True)
def branches_batch(positions, rotations, geometry, out):
    """branches_of_pose for every pose: (B, 3), (B, 3, 3) into out (B, 2, 4)."""
    for b in range(positions.shape[0]):
        branches_of_pose(positions[b], rotations[b], geometry, out[b])


class OmxAnalyticIK:
    """Solves yaw-pitch-pitch-pitch chains exactly; raises ValueError for other chains."""

    def __init__(self, chain: Chain = OMX_CHAIN) -> None:
        axes = tuple(joint.axis for joint in chain.joints)
        offsets = [joint.origin_xyz for joint in chain.joints[1:]] + [chain.tip_xyz]
        rotated = any(any(j.origin_rpy) for j in chain.joints) or any(chain.tip_rpy)
        slides = any(joint.prismatic for joint in chain.joints)
        if (
            axes != (_Z, _Y, _Y, _Y)
            or rotated
            or slides
            or any(abs(o[1]) > 1e-12 for o in offsets)
        ):
            raise ValueError(
                f'chain {chain.name!r} is not a yaw-pitch-pitch-pitch arm of revolute joints with '
                'planar links; '
                'the closed-form OM-X solver does not apply'
            )
        self.chain = chain
        base = chain.joints[0].origin_xyz
        shoulder, upper, fore, tip = offsets
        self._axis_xy = np.array(base[:2])
        self.geometry = OmxGeometry(
            axis_x=float(base[0]),
            axis_y=float(base[1]),
            shoulder=complex(shoulder[0], base[2] + shoulder[2]),
            upper=complex(upper[0], upper[2]),
            fore=complex(fore[0], fore[2]),
            tip=complex(tip[0], tip[2]),
        )
        self._reach = np.array([joint.reach for joint in chain.joints])

    def branches(self, position: np.ndarray, rotation: np.ndarray) -> np.ndarray:
        """Elbow-up and elbow-down solutions: (B, 3), (B, 3, 3) -> (B, 2, 4) rad in (-pi, pi].

        Unreachable targets get the nearest stretched or folded arm, so check FK of the result.
        """
        position = np.ascontiguousarray(position, dtype=np.float64)
        rotation = np.ascontiguousarray(rotation, dtype=np.float64)
        out = np.empty((len(position), 2, 4))
        branches_batch(position, rotation, self.geometry, out)
        return out

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
        yaw = math.atan2(dy, dx) if math.hypot(dx, dy) > _DEGENERATE else 0.0
        z_axis, y_axis = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)
        return axis_angle_matrix(z_axis, np.float64(yaw)) @ axis_angle_matrix(
            y_axis, np.float64(pitch)
        )

    def _in_reach(self, index: int, value: float) -> list[float]:
        low, high = self._reach[index]
        first = math.ceil((low - _RANGE_SLACK - value) / (2 * math.pi))
        last = math.floor((high + _RANGE_SLACK - value) / (2 * math.pi))
        return [value + 2 * math.pi * k for k in range(first, last + 1)]
