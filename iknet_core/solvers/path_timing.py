"""Time stamps for joint waypoints under velocity and acceleration limits.

A JointTrajectory of positions alone is interpolated between its points, so what the arm feels
is the finite differences of the points: each segment's velocity, and at each point the change
of velocity over the time around it. time_stamps keeps both within the limits, corners and
reversals included, starting and ending at rest. A speed profile along the path (forward and
backward passes, the speed at each corner capped) gives the stamps; a check of the finite
differences then slows any segment pair still over the acceleration limit. Hand-written: the
libraries that do this (toppra, MoveIt's time parameterizations) need compiled builds or ROS
packages that a training machine does not have, and the profile is a few array operations.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import Chain

# Defaults for the joint speed (rad/s) and acceleration (rad/s^2) limits, and the shortest
# segment (s), so repeated waypoints still get increasing stamps.
DEFAULT_MAX_VELOCITY = 1.0
DEFAULT_MAX_ACCELERATION = 2.0
MIN_SEGMENT_S = 1e-3
# A prismatic joint's speed and acceleration limits are the revolute joints' times this (m/rad):
# at the default 1 rad/s a slide moves at up to 0.1 m/s (TIAGo's URDF gives its torso lift 0.07).
SLIDE_METRES_PER_RAD = 0.1
# Passes of the profile and its finite-difference check, each lowering the speed caps around
# every point still over the acceleration limit by the square root of the excess and CAP_MARGIN;
# after them (a path that never settled), the whole trajectory is slowed evenly by what is left
# over, which scales every acceleration down by its square. On 200 random Panda curves of 100
# waypoints (iknet-path-bench's) a margin of 0.99 settled every one within 11 passes (1.0: up to
# 92, an approach from above), at 0.1 % more time than 1.0.
ACCELERATION_PASSES = 100
CAP_MARGIN = 0.99
# Relative slack on the acceleration limit that the check allows for rounding.
_SLACK = 1e-9


def slide_units(chain: Chain) -> np.ndarray:
    """(n,) what one rad/s of a speed limit is for each joint: 1 rad/s, or SLIDE_METRES_PER_RAD
    m/s for a prismatic joint."""
    return np.array([SLIDE_METRES_PER_RAD if joint.prismatic else 1.0 for joint in chain.joints])


def velocity_limits(chain: Chain) -> np.ndarray:
    """(n,) each joint's own velocity_limit (rad/s, m/s; its URDF's), inf where it has none."""
    return np.array([joint.velocity_limit or np.inf for joint in chain.joints])


def speed_units(chain: Chain, max_velocity: float = DEFAULT_MAX_VELOCITY) -> np.ndarray:
    """(n,) what one rad/s of the speed limit max_velocity is for each joint: slide_units, less
    where the joint's own velocity limit is lower. Joint values divided by it share the one
    limit max_velocity (their speeds; not their accelerations, which slide_units scale)."""
    return np.minimum(slide_units(chain), velocity_limits(chain) / max_velocity)


def chain_timing(chain: Chain) -> dict[str, np.ndarray]:
    """time_stamps' units and velocity_limits for chain's joints."""
    return {'units': slide_units(chain), 'velocity_limits': velocity_limits(chain)}


def time_stamps(
    joints: np.ndarray,
    max_velocity: float = DEFAULT_MAX_VELOCITY,
    max_acceleration: float = DEFAULT_MAX_ACCELERATION,
    units: np.ndarray | None = None,
    velocity_limits: np.ndarray | None = None,
) -> np.ndarray:
    """Seconds from the start (T,) for joint waypoints (T, n), starting and ending at rest;
    units (n,): what one rad of both limits is for each joint (slide_units: a prismatic joint's
    m); velocity_limits (n,): each joint's own speed limit (rad/s, m/s; inf: none), which caps
    it below max_velocity times its unit, its acceleration limit staying max_acceleration times
    its unit (chain_timing(chain) gives both; default: every joint in rad, no limits of its own).
    A higher max_velocity never slows a path: a joint's own limit lowered the acceleration limit
    with it while the two shared one scale (a PR2 torso path took 19 s at 10 rad/s, 14.5 at 1).

    Every joint's finite-difference velocity (a segment's change over its time) is at most
    max_velocity, and its finite-difference acceleration (at a point, the change of velocity
    over half the two segments' time; from rest before the first point and to rest after the
    last) at most max_acceleration: the arm slows for a corner or a reversal, and stands still
    at a repeated waypoint, at least MIN_SEGMENT_S after the last.
    """
    max_velocity, max_acceleration = float(max_velocity), float(max_acceleration)
    if not (max_velocity > 0.0 and max_acceleration > 0.0):
        raise ValueError(
            f'velocity and acceleration limits must be > 0, got {max_velocity} rad/s and '
            f'{max_acceleration} rad/s^2'
        )
    joints = np.asarray(joints, dtype=np.float64)
    if joints.ndim != 2 or not len(joints):
        raise ValueError(f'time_stamps needs joint waypoints (T >= 1, n), got {joints.shape}')
    if not np.isfinite(joints).all():
        raise ValueError(
            'time_stamps needs finite joint waypoints: a path that stopped is NaN from '
            'failed_at on; time the waypoints it reached, result.joints[: result.reached]'
        )
    if len(joints) == 1:
        return np.zeros(1)
    scaled = joints if units is None else joints / units
    steps = np.diff(scaled, axis=0)  # (T - 1, n)
    lengths = np.abs(steps).max(-1)  # the largest joint's travel per segment
    top = _top_speeds(steps, lengths, max_velocity, units, velocity_limits)
    caps = _speed_caps(steps, lengths, top, max_acceleration)
    for _ in range(ACCELERATION_PASSES):
        speeds = _reachable_speeds(caps, lengths, max_acceleration)
        durations = _segment_durations(lengths, speeds, top, max_acceleration)
        excess = _acceleration_excess(steps, durations, max_acceleration)
        over = np.flatnonzero(excess > 1.0 + _SLACK)
        if not len(over):
            break
        # Slower through each point over the limit and its neighbours: the squares of the
        # speeds set the accelerations.
        slower = CAP_MARGIN / np.sqrt(excess[over])
        for shift in (-1, 0, 1):
            around = np.clip(over + shift, 0, len(caps) - 1)
            caps[around] = np.minimum(caps[around], speeds[around] * slower)
    else:  # never settled: slowed evenly by what is left over
        durations = durations * np.sqrt(excess.max()) * (1.0 + _SLACK)
    return np.concatenate([[0.0], np.cumsum(durations)])


def _top_speeds(
    steps: np.ndarray,
    lengths: np.ndarray,
    max_velocity: float,
    units: np.ndarray | None,
    velocity_limits: np.ndarray | None,
) -> np.ndarray:
    """(T - 1,) each segment's top speed (its fastest joint's, in units): max_velocity, less
    where a joint moving with it would pass its own velocity limit."""
    top = np.full(len(lengths), max_velocity)
    if velocity_limits is None:
        return top
    own = np.asarray(velocity_limits, dtype=np.float64) / (1.0 if units is None else units)
    if not (own > 0.0).all():
        raise ValueError(f'velocity limits must be > 0 (inf: none), got {velocity_limits}')
    share = np.abs(steps) / np.where(lengths > 0.0, lengths, 1.0)[:, None]  # of the fastest's
    with np.errstate(divide='ignore'):
        caps = np.where(share > 0.0, own / share, np.inf)  # a joint at rest caps nothing
    return np.minimum(top, caps.min(-1, initial=np.inf))


def _speed_caps(
    steps: np.ndarray, lengths: np.ndarray, top: np.ndarray, max_acceleration: float
) -> np.ndarray:
    """(T,) the highest speed (the fastest joint's) at each waypoint: 0 at both ends and where
    a segment has no length (a repeated waypoint: the arm stands still), at a corner what keeps
    the change of direction within max_acceleration over the two segments' time, else the top
    speed of the segments on either side."""
    caps = np.full(len(lengths) + 1, np.inf)
    caps[:-1] = top
    caps[1:] = np.minimum(caps[1:], top)
    caps[[0, -1]] = 0.0
    moving = lengths > 0.0
    caps[1:-1][~(moving[:-1] & moving[1:])] = 0.0
    directions = steps / np.where(moving, lengths, 1.0)[:, None]
    turns = np.abs(np.diff(directions, axis=0)).max(-1, initial=0.0)  # (T - 2,)
    around = lengths[:-1] + lengths[1:]
    # At speed v the velocity turns by v |du| in the time (L0 + L1) / (2 v) around the point.
    corner = np.sqrt(max_acceleration * around / (2.0 * np.maximum(turns, 1e-300)))
    caps[1:-1] = np.minimum(caps[1:-1], corner)
    return caps


@njit(cache=True, nogil=True)
def _reachable_speeds(caps, lengths, max_acceleration):
    """(T,) the speeds under caps that each waypoint can reach from the one before and stop
    from by the one after at max_acceleration: a forward and a backward pass."""
    speeds = caps.copy()
    reach = 2.0 * max_acceleration * lengths
    for k in range(1, len(speeds)):
        speeds[k] = min(speeds[k], math.sqrt(speeds[k - 1] ** 2 + reach[k - 1]))
    for k in range(len(speeds) - 2, -1, -1):
        speeds[k] = min(speeds[k], math.sqrt(speeds[k + 1] ** 2 + reach[k]))
    return speeds


def _segment_durations(
    lengths: np.ndarray, speeds: np.ndarray, top: np.ndarray, max_acceleration: float
) -> np.ndarray:
    """(T - 1,) each segment's time from the speed at its start to the speed at its end: up at
    max_acceleration to a peak (at most its top speed), cruising, down at max_acceleration; at
    least MIN_SEGMENT_S."""
    start, end = speeds[:-1], speeds[1:]
    peak = np.minimum(top, np.sqrt(max_acceleration * lengths + 0.5 * (start**2 + end**2)))
    ramps = (2.0 * peak - start - end) / max_acceleration
    ramp_lengths = (2.0 * peak**2 - start**2 - end**2) / (2.0 * max_acceleration)
    cruise = np.maximum(lengths - ramp_lengths, 0.0) / np.where(peak > 0.0, peak, 1.0)
    return np.maximum(ramps + cruise, MIN_SEGMENT_S)


def _acceleration_excess(
    steps: np.ndarray, durations: np.ndarray, max_acceleration: float
) -> np.ndarray:
    """(T,) each point's largest finite-difference joint acceleration over max_acceleration:
    from rest before the first point and to rest after the last."""
    n = steps.shape[1]
    velocities = np.concatenate([np.zeros((1, n)), steps / durations[:, None], np.zeros((1, n))])
    padded = np.concatenate([[0.0], durations, [0.0]])
    around = 0.5 * (padded[:-1] + padded[1:])
    change = np.abs(np.diff(velocities, axis=0)).max(-1)
    return change / around / max_acceleration
