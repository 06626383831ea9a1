"""The server's `~/solve_path`: a SolvePath request checked, followed with `follow_path`, and
answered as a timed JointTrajectory with per-waypoint errors."""

from __future__ import annotations

import math

import numpy as np
from trajectory_msgs.msg import JointTrajectoryPoint

from iknet.srv import SolvePath
from iknet_core.kinematics.chain import Chain
from iknet_core.solvers.base import Solver
from iknet_core.solvers.path import (
    alternative_paths,
    check_start,
    follow_path,
    has_joints_to_spare,
    start_in_reach,
    start_solutions,
)
from iknet_core.solvers.path_timing import (
    DEFAULT_MAX_ACCELERATION,
    DEFAULT_MAX_VELOCITY,
    chain_timing,
    slide_units,
    speed_units,
    time_stamps,
    velocity_limits,
)
from iknet_core.solvers.settings import SolverSettings
from iknet_ros.arm_command import duration_msg
from iknet_ros.requests import (
    MAX_ALTERNATIVES,
    RequestError,
    arm_joints,
    check_seed,
    check_target,
)

# A trajectory longer than this (s) is a slip (stamps, or a speed limit in the wrong unit), not
# a path: the arm would be given goals for it, long after whoever asked has gone.
LONGEST_PATH_S = 86_400.0
# How far (rad; a slide's SLIDE_METRES_PER_RAD times it, in m) the arm's joint states may be from
# a path's start joints for it to be executed; farther, its first goal would jump.
START_TOLERANCE_RAD = 0.02


def start_distance(chain: Chain, a: np.ndarray, b: np.ndarray) -> float:
    """The largest joint difference of a and b (n,) in rad, a slide's in slide_units (2 mm of a
    torso lift is 0.02 rad's worth, not 19 mm)."""
    return float((np.abs(a - b) / slide_units(chain)).max())


def solve_path(
    request: SolvePath.Request,
    chain: Chain,
    base_frame: str,
    settings: SolverSettings,
    current_joints: dict[str, float],
    solver: Solver | None = None,
) -> SolvePath.Response:
    """The answer to one request; RequestError for a request that cannot be followed at all.
    solver: the server's, whose solutions of the first waypoint are alternative starts."""
    targets, times = path_targets(request, base_frame)
    start = check_seed(request.start.name, request.start.position, chain.joint_names, 'start')
    needed = start is None or request.execute  # else the arm's states play no part
    present = arm_joints(current_joints, chain.joint_names) if needed else None
    if start is None and present is None:
        raise RequestError(
            'no start joints: give start, or let the server receive the joint states'
        )
    if request.execute:
        if present is None:
            raise RequestError("execute needs the arm's joint states, and none has come")
        if start is not None and start_distance(chain, start, present) > START_TOLERANCE_RAD:
            raise RequestError(
                f'execute: the arm is at {np.round(present, 4).tolist()}, not at the start joints '
                f'{np.round(start, 4).tolist()}; move it there first'
            )
    # Searched and followed from the start as follow_path takes it (a joint that turns whole
    # turns back into its reach: a UR5's state counted past 2 pi; clamped into the limits), timed
    # from where the arm is (executed: its joint states): past a software limit, the move into
    # it takes its time (timed from the clamped start, a PR2's shoulder got 145 rad/s).
    given = present if start is None else start
    try:
        start = check_start(chain, given)
        origin = start_in_reach(chain, present if request.execute else given)
    except ValueError as error:
        raise RequestError(str(error)) from error
    limits = [request.max_velocity or DEFAULT_MAX_VELOCITY]
    limits.append(request.max_acceleration or DEFAULT_MAX_ACCELERATION)
    if not all(math.isfinite(v) and v > 0.0 for v in limits):
        raise RequestError(f'max_velocity and max_acceleration must be > 0, got {limits}')
    if not (math.isfinite(request.max_step) and request.max_step >= 0.0):
        raise RequestError(
            f'max_step must be >= 0 rad (0: from the spacing), got {request.max_step}'
        )
    if request.alternatives > MAX_ALTERNATIVES:
        raise RequestError(
            f'alternatives must be at most {MAX_ALTERNATIVES}, got {request.alternatives}'
        )
    starts = 1
    try:
        if request.alternatives:
            others = start_solutions(
                chain, targets[0], request.alternatives, settings, solver=solver, avoid=start
            )
            # A timed path's first stamp must leave the time to move to another start.
            keep = np.ones(len(others), dtype=bool)
            if times is not None:
                moves = np.abs(others - origin) / speed_units(chain, limits[0])
                keep = moves.max(-1) <= limits[0] * times[0]
            starts += int(keep.sum())
            result = alternative_paths(
                chain, targets, np.concatenate([start[None], others[keep]]), settings,
                request.max_step or None, origin=start, tighten=request.tighten,
            )[0]  # fmt: skip
        else:
            result = follow_path(
                chain, targets, start, settings, request.max_step or None, tighten=request.tighten
            )
    except ValueError as error:
        raise RequestError(str(error)) from error
    reached = result.joints[: result.failed_at]
    if times is None:
        from_origin = np.concatenate([origin[None], reached])
        stamps = time_stamps(from_origin, *limits, **chain_timing(chain))[1:]
        if len(stamps) and stamps[-1] > LONGEST_PATH_S:
            raise RequestError(
                f'at max_velocity {limits[0]:g} rad/s and max_acceleration {limits[1]:g} '
                f'rad/s^2 the trajectory would take {stamps[-1]:.3g} s, more than a day'
            )
    else:
        stamps = times[: len(reached)]
        if result.success:  # a failed path says why it failed
            from_origin = np.concatenate([origin[None], reached])
            check_speed(from_origin, stamps, limits[0], chain, given=bool(request.max_velocity))
    response = SolvePath.Response(success=result.success)
    response.failed_at = -1 if result.failed_at is None else result.failed_at
    response.trajectory.header.frame_id = base_frame
    response.trajectory.joint_names = list(chain.joint_names)
    for joints, seconds in zip(reached, stamps, strict=True):
        point = JointTrajectoryPoint(
            positions=joints.tolist(), time_from_start=duration_msg(seconds)
        )
        response.trajectory.points.append(point)
    response.position_errors = result.position_errors.tolist()
    response.orientation_errors = result.orientation_errors.tolist()
    timing = 'at the limits' if times is None else "on the path's times"
    response.message = (
        f'{len(targets)} waypoint{"s" if len(targets) != 1 else ""} reached, '
        f'{stamps[-1]:.3g} s {timing}'
        if result.success
        else result.reason
    )
    if request.tighten and not has_joints_to_spare(chain, targets, settings):
        response.message += '; not tightened: the arm has no joints to spare for this path'
    if request.alternatives:
        # Fewer other starts than asked for: no more solutions, or (timed) none more in time.
        found = ' found' + (' in time for its first stamp' if times is not None else '')
        response.message += (
            f"; the best of {starts} paths (the start joints' and {starts - 1} from other "
            f'solutions of the first waypoint{found if starts - 1 < request.alternatives else ""})'
        )
        if len(reached):
            move = np.abs(reached[0] - start).sum()
            response.message += (
                f', {move:.3g} rad of joint travel (summed over the joints) from the start '
                'joints to its first point'
            )
    return response


def describe_request(request: SolvePath.Request) -> str:
    """What a request asks, in a few words, for the server's log as it starts on it."""
    count = len(request.path.poses) + len(request.timed_path.poses)
    asks = [f'{count} waypoint{"s" if count != 1 else ""}']
    if request.alternatives:
        asks.append(f'{request.alternatives} alternatives')
    asks += [word for word, asked in [('tighten', request.tighten), ('execute', request.execute)]
             if asked]  # fmt: skip
    return ', '.join(asks)


def path_targets(
    request: SolvePath.Request, base_frame: str
) -> tuple[np.ndarray, np.ndarray | None]:
    """The path as (T, 7) = x, y, z, qx, qy, qz, qw, each pose checked as SolveIK's target, or
    positions (T, 3) alone (their orientations unchecked) for a position_only request; and a
    timed_path's times (T,) s after the start, None when it has none."""
    if request.path.poses and request.timed_path.poses:
        raise RequestError('give one of path and timed_path, not both')
    timed = bool(request.timed_path.poses)
    frame = (request.timed_path if timed else request.path).header.frame_id
    poses = [stamped.pose for stamped in request.timed_path.poses] if timed else request.path.poses
    if not poses:
        raise RequestError('the path is empty')
    if timed:
        # A pose's own frame: empty, or the path's ('' in either is the base frame).
        same = {'', frame, frame or base_frame}
        for index, stamped in enumerate(request.timed_path.poses):
            if stamped.header.frame_id not in same:
                raise RequestError(
                    f"waypoint {index}: frame {stamped.header.frame_id!r} is not the path's "
                    f'{frame!r}'
                )
    position_only = request.position_only
    targets = []
    for index, pose in enumerate(poses):
        p, o = pose.position, pose.orientation
        quaternion = (0.0, 0.0, 0.0, 1.0) if position_only else (o.x, o.y, o.z, o.w)
        try:
            target = check_target([p.x, p.y, p.z], quaternion, frame, base_frame)
        except RequestError as error:
            raise RequestError(f'waypoint {index}: {error}') from error
        targets.append(np.concatenate([target.position, target.quaternion]))
    targets = np.array(targets)
    return targets[:, :3] if position_only else targets, path_times(request) if timed else None


def path_times(request: SolvePath.Request) -> np.ndarray | None:
    """A timed_path's waypoint times (T,) s after its header stamp (the start joints); None when
    it has no times of its own (every stamp zero, or all equal to the header's, as many
    planners stamp them); RequestError unless they increase from the header's."""
    start = request.timed_path.header.stamp
    stamps = [pose.header.stamp for pose in request.timed_path.poses]
    distinct = {(s.sec, s.nanosec) for s in stamps}
    if len(distinct) <= 1 and distinct <= {(0, 0), (start.sec, start.nanosec)}:
        return None
    # In integers first: float seconds since 1970 keep only ~0.2 us.
    times = np.array([(s.sec - start.sec) + (s.nanosec - start.nanosec) * 1e-9 for s in stamps])
    previous = 0.0
    for index, time in enumerate(times):
        if not time > previous:
            before = 'the header stamp (the start)' if index == 0 else f'waypoint {index - 1}'
            raise RequestError(
                f'timed_path: the times must increase, and waypoint {index} at {time:.9f} s '
                f'after the header stamp does not come after {before} at {previous:.9f} s'
            )
        previous = time
    if times[-1] > LONGEST_PATH_S:
        raise RequestError(
            f'timed_path: its last waypoint is {times[-1]:.3g} s after the header stamp (the '
            'start), more than a day: stamp the header with the time the arm is at the start '
            'joints (a header left at 0 under clock-time stamps reads so)'
        )
    return times


def check_speed(
    joints: np.ndarray, stamps: np.ndarray, max_velocity: float, chain: Chain, given: bool
) -> None:
    """RequestError when joints (T + 1, n) from the start, reached at stamps (T,) s, need a
    joint faster than it may go between two of them: max_velocity (rad/s; slide_units for a
    prismatic joint; given: the request's, else the default), and its own URDF velocity limit.
    A timed path is checked against the default too: a planner's slip (stamps in ms for s)
    must not throw an arm that has no URDF limit at tens of rad/s."""
    speeds = np.abs(np.diff(joints, axis=0)) / np.diff(np.concatenate([[0.0], stamps]))[:, None]
    asked = max_velocity * slide_units(chain)
    own = velocity_limits(chain)
    allowed = np.minimum(asked, own)
    index, joint = np.unravel_index(np.argmax(speeds / allowed), speeds.shape)
    if speeds[index, joint] > allowed[joint]:
        unit = f'{chain.joints[joint].unit}/s'
        if own[joint] <= asked[joint]:
            limit = f'its URDF velocity limit {own[joint]:g} {unit}'
        elif given:
            limit = f'max_velocity {asked[joint]:g} {unit}'
        else:
            limit = (
                f'the default max_velocity {asked[joint]:g} {unit} (give max_velocity to allow '
                'more)'
            )
        raise RequestError(
            f'timed_path: its times need {chain.joint_names[joint]} at '
            f'{speeds[index, joint]:.3g} {unit} to reach waypoint {index}, above {limit}'
        )
