"""Compiled (numba) FK, Jacobian and Levenberg-Marquardt refinement of serial chains.

At batch size 1 the per-call overhead of numpy or torch dominates IK, so these loops work on a
few scalars and preallocated buffers, allocating nothing per iteration. Their constants come from a
`Chain` (`ChainArrays.from_chain`), so `iknet_core.kinematics` stays the one definition of the
kinematics; tests hold the compiled FK and Jacobian equal to it. Compiled code is cached on disk.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.transforms import rpy_matrix
from iknet_core.solvers.settings import named

# Damping (m^2) added to the Levenberg-Marquardt normal equations so they stay solvable at
# singularities (a straight elbow); tiny next to J^T J (~1e-2 m^2) elsewhere.
DAMPING_FLOOR = 1e-12
# Steps smaller than this (rad, largest joint) mean the refinement is stationary.
_STEP_FLOOR = 1e-14
# Damping multiplier bounds: growth past the upper one means no step lowers the cost.
_MU_MIN = 1e-6
_MU_MAX = 1e12
# Less than this fall in cost over that many iterations is a stall (a local minimum or a crawl
# along a valley): converging refinements cut the cost by orders of magnitude in a few.
_STALL_ITERATIONS = 10
_STALL_RATIO = 0.5


# Rows per joint in ChainArrays.joints.
JOINT_ROWS = 6


@dataclass(frozen=True)
class ChainArrays:
    """A chain as plain arrays for the compiled kernels.

    joints: (n, JOINT_ROWS, 3) = per joint the origin (m), the axis, the origin rotation's rows,
    then (1, 0, 0) for a prismatic joint, else zeros.
    tip: (4, 3) = tip offset (m), then the tip rotation's rows.
    """

    joints: np.ndarray
    tip: np.ndarray

    @classmethod
    def from_chain(cls, chain: Chain) -> ChainArrays:
        """The arrays of a chain, built once per chain: building them costs ~0.6 ms, a tenth of
        following a 100-waypoint Panda path. The kernels only read them; so must callers. A
        chain made with lists (unhashable) gets new ones each time."""
        try:
            return _cached_chain_arrays(chain)
        except TypeError:  # unhashable
            return cls.build(chain)

    @classmethod
    def build(cls, chain: Chain) -> ChainArrays:
        """New arrays of a chain (from_chain's, uncached)."""
        joints = np.array(
            [
                [
                    joint.origin_xyz,
                    joint.axis,
                    *rpy_matrix(joint.origin_rpy),
                    (1.0 if joint.prismatic else 0.0, 0.0, 0.0),
                ]
                for joint in chain.joints
            ],
            dtype=np.float64,
        )
        tip = np.array([chain.tip_xyz, *rpy_matrix(chain.tip_rpy)], dtype=np.float64)
        return cls(joints=joints, tip=tip)


@functools.lru_cache(maxsize=32)
def _cached_chain_arrays(chain: Chain) -> ChainArrays:
    return ChainArrays.build(chain)


@njit(cache=True)
def _times(r, m00, m01, m02, m10, m11, m12, m20, m21, m22):
    """Row-major 3x3 product of the 9-tuple r with m."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r
    return (
        r00 * m00 + r01 * m10 + r02 * m20,
        r00 * m01 + r01 * m11 + r02 * m21,
        r00 * m02 + r01 * m12 + r02 * m22,
        r10 * m00 + r11 * m10 + r12 * m20,
        r10 * m01 + r11 * m11 + r12 * m21,
        r10 * m02 + r11 * m12 + r12 * m22,
        r20 * m00 + r21 * m10 + r22 * m20,
        r20 * m01 + r21 * m11 + r22 * m21,
        r20 * m02 + r21 * m12 + r22 * m22,
    )


@njit(cache=True)
def times_rows(r, rows, first):
    """r times the 3x3 matrix held in rows[first:first + 3] of a (k, 3) array."""
    m = rows[first:]
    return _times(
        r, m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2]
    )


@njit(cache=True)
def turn(r, ax, ay, az, angle):
    """The 9-tuple rotation r times a turn of angle (rad) about the unit axis (ax, ay, az)."""
    # Rodrigues: c I + s [a]x + (1 - c) a a^T.
    s, c = math.sin(angle), math.cos(angle)
    t = 1.0 - c
    return _times(
        r,
        c + t * ax * ax,
        t * ax * ay - s * az,
        t * ax * az + s * ay,
        t * ax * ay + s * az,
        c + t * ay * ay,
        t * ay * az - s * ax,
        t * ax * az - s * ay,
        t * ay * az + s * ax,
        c + t * az * az,
    )


@njit(cache=True)
def rotate(r, vector):
    """The 9-tuple rotation r applied to vector (3,)."""
    x, y, z = vector[0], vector[1], vector[2]
    return (
        r[0] * x + r[1] * y + r[2] * z,
        r[3] * x + r[4] * y + r[5] * z,
        r[6] * x + r[7] * y + r[8] * z,
    )


@njit(cache=True)
def pose_jacobian(q, joints, tip, position, rotation, jacobian):
    """Tip pose and geometric Jacobian of q (n,) (rad, m for a prismatic joint) into position
    (3,), rotation (3, 3), (6, n); jacobian None: the pose alone (numba prunes the Jacobian's
    code for that type)."""
    r = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    px = py = pz = 0.0
    for i in range(q.shape[0]):
        frame = joints[i]
        dx, dy, dz = rotate(r, frame[0])
        px, py, pz = px + dx, py + dy, pz + dz
        r = times_rows(r, frame, 2)
        ax, ay, az = frame[1, 0], frame[1, 1], frame[1, 2]
        if frame[5, 0] > 0.0:  # prismatic: a slide along the world axis, no turn
            wx, wy, wz = rotate(r, frame[1])
            if jacobian is not None:  # the tip moves along the axis; finished below as it is
                jacobian[0, i], jacobian[1, i], jacobian[2, i] = wx, wy, wz
                jacobian[3, i] = jacobian[4, i] = jacobian[5, i] = 0.0
            px, py, pz = px + wx * q[i], py + wy * q[i], pz + wz * q[i]
            continue
        # Joint origin and world axis; the linear rows need the tip, so they are finished below.
        if jacobian is not None:
            jacobian[0, i], jacobian[1, i], jacobian[2, i] = px, py, pz
            jacobian[3, i], jacobian[4, i], jacobian[5, i] = rotate(r, frame[1])
        r = turn(r, ax, ay, az, q[i])
    dx, dy, dz = rotate(r, tip[0])
    px, py, pz = px + dx, py + dy, pz + dz
    r = times_rows(r, tip, 1)
    position[0], position[1], position[2] = px, py, pz
    for k in range(9):
        rotation[k // 3, k % 3] = r[k]
    if jacobian is None:
        return
    for i in range(q.shape[0]):
        if joints[i, 5, 0] > 0.0:
            continue  # prismatic: its column is done
        dx = px - jacobian[0, i]
        dy = py - jacobian[1, i]
        dz = pz - jacobian[2, i]
        wx, wy, wz = jacobian[3, i], jacobian[4, i], jacobian[5, i]
        jacobian[0, i] = wy * dz - wz * dy
        jacobian[1, i] = wz * dx - wx * dz
        jacobian[2, i] = wx * dy - wy * dx


@njit(cache=True)
def _row_dot(a, i, b, j):
    """Row i of a (3, 3) dotted with row j of b (3, 3)."""
    return a[i, 0] * b[j, 0] + a[i, 1] * b[j, 1] + a[i, 2] * b[j, 2]


@njit(cache=True)
def _residual(position, rotation, target_position, target_rotation, weight, residual):
    """Fill residual (6,) = target - FK (m), weight (m/rad) * rotation vector; return both errors.

    The rotation vector is the world-frame rotation taking FK's rotation onto the target's, so it
    matches the Jacobian's angular rows.
    """
    ex = target_position[0] - position[0]
    ey = target_position[1] - position[1]
    ez = target_position[2] - position[2]
    # m = target_rotation @ rotation^T, as scalars so nothing is allocated per iteration.
    m00 = _row_dot(target_rotation, 0, rotation, 0)
    m01 = _row_dot(target_rotation, 0, rotation, 1)
    m02 = _row_dot(target_rotation, 0, rotation, 2)
    m10 = _row_dot(target_rotation, 1, rotation, 0)
    m11 = _row_dot(target_rotation, 1, rotation, 1)
    m12 = _row_dot(target_rotation, 1, rotation, 2)
    m20 = _row_dot(target_rotation, 2, rotation, 0)
    m21 = _row_dot(target_rotation, 2, rotation, 1)
    m22 = _row_dot(target_rotation, 2, rotation, 2)
    vx, vy, vz = m21 - m12, m02 - m20, m10 - m01
    two_sine = math.sqrt(vx * vx + vy * vy + vz * vz)
    angle = math.atan2(two_sine, m00 + m11 + m22 - 1.0)
    if angle < 3.0:
        # angle / (2 sin angle), -> 1/2 as the angle -> 0.
        scale = angle / two_sine if two_sine > 1e-300 else 0.5
        rx, ry, rz = scale * vx, scale * vy, scale * vz
    else:
        # Near a half turn v vanishes; the symmetric part of m is c I + (1 - c) a a^T, so the
        # longest column of it minus c I gives the axis a.
        c = 0.5 * (m00 + m11 + m22 - 1.0)
        sxy, sxz, syz = 0.5 * (m01 + m10), 0.5 * (m02 + m20), 0.5 * (m12 + m21)
        rx, ry, rz = m00 - c, sxy, sxz
        cy = (sxy, m11 - c, syz)
        cz = (sxz, syz, m22 - c)
        for column in (cy, cz):
            if column[0] ** 2 + column[1] ** 2 + column[2] ** 2 > rx * rx + ry * ry + rz * rz:
                rx, ry, rz = column
        norm = math.sqrt(rx * rx + ry * ry + rz * rz)
        scale = angle / norm if rx * vx + ry * vy + rz * vz >= 0.0 else -angle / norm
        rx, ry, rz = scale * rx, scale * ry, scale * rz
    residual[0], residual[1], residual[2] = ex, ey, ez
    residual[3], residual[4], residual[5] = weight * rx, weight * ry, weight * rz
    return math.sqrt(ex * ex + ey * ey + ez * ez), angle


@njit(cache=True)
def _half_square(residual):
    """Least-squares cost 0.5 |residual|^2 (m^2); a loop, as np.dot needs scipy in numba."""
    total = 0.0
    for value in residual:
        total += value * value
    return 0.5 * total


@njit(cache=True)
def _bound(q, bounds):
    """Keep q (n,) within bounds (n, 3) = low, high, wraps: full-turn joints wrap, others clamp."""
    for i in range(q.shape[0]):
        low, high = bounds[i, 0], bounds[i, 1]
        value = q[i]
        if value < low or value > high:
            if bounds[i, 2] > 0.0:
                value = low + (value - low) % (2.0 * math.pi)
            value = min(max(value, low), high)
            q[i] = value


@njit(cache=True)
def null_space_basis(q, joints, tip, rows, work, scratch, out):
    """out (n, n - rows): orthonormal columns spanning the null space of the pose Jacobian's
    first rows (3: position, 6: pose) at q, the last columns of Q in the Householder QR of its
    transpose; scratch (n, 6). At a singularity it spans n - rows of the wider null space."""
    n = q.shape[0]
    jacobian = work[2]
    pose_jacobian(q, joints, tip, work[0], work[1], jacobian)
    reflectors = scratch  # column k: J^T's column k, then its unit reflector from row k on
    for i in range(n):
        for k in range(rows):
            reflectors[i, k] = jacobian[k, i]
    for k in range(min(rows, n)):
        norm = 0.0
        for i in range(k, n):
            norm += reflectors[i, k] ** 2
        norm = math.sqrt(norm)
        # x -> -sign(x_k) |x| e_k, by the reflector v = x + sign(x_k) |x| e_k (no cancellation).
        reflectors[k, k] += norm if reflectors[k, k] >= 0.0 else -norm
        length = 0.0
        for i in range(k, n):
            length += reflectors[i, k] ** 2
        length = math.sqrt(length)
        for i in range(k, n):  # a zero column (a singular direction): no reflection
            reflectors[i, k] = reflectors[i, k] / length if length > 1e-300 else 0.0
        for c in range(k + 1, rows):
            along = 0.0
            for i in range(k, n):
                along += reflectors[i, k] * reflectors[i, c]
            for i in range(k, n):
                reflectors[i, c] -= 2.0 * along * reflectors[i, k]
    # Q e_(rows + c) = H_0 ... H_(rows - 1) e_(rows + c); none where n <= rows.
    for c in range(n - rows):
        for i in range(n):
            out[i, c] = 1.0 if i == rows + c else 0.0
        for k in range(rows - 1, -1, -1):
            along = 0.0
            for i in range(k, n):
                along += reflectors[i, k] * out[i, c]
            for i in range(k, n):
                out[i, c] -= 2.0 * along * reflectors[i, k]


@njit(cache=True)
def null_space_projector(q, joints, tip, rows, work, scratch, out):
    """out (n, n) = Z Z^T, the projector onto null_space_basis's span Z; scratch: its (n, 6) and
    an (n, n - rows) for Z."""
    reflectors, basis = scratch
    null_space_basis(q, joints, tip, rows, work, reflectors, basis)
    n = q.shape[0]
    for i in range(n):
        for j in range(i + 1):
            total = 0.0
            for c in range(basis.shape[1]):
                total += basis[i, c] * basis[j, c]
            out[i, j] = out[j, i] = total


@njit(cache=True)
def cholesky_solve(a, b, x):
    """Solve a x = b for symmetric positive definite a (n, n), overwriting a with its factor."""
    cholesky_factor(a)
    cholesky_substitute(a, b, x)


@njit(cache=True)
def cholesky_factor(a):
    """a (n, n) symmetric positive definite -> its lower factor L in place (a = L L^T)."""
    n = a.shape[0]
    for j in range(n):
        diagonal = a[j, j]
        for k in range(j):
            diagonal -= a[j, k] * a[j, k]
        diagonal = math.sqrt(max(diagonal, 1e-300))
        a[j, j] = diagonal
        for i in range(j + 1, n):
            value = a[i, j]
            for k in range(j):
                value -= a[i, k] * a[j, k]
            a[i, j] = value / diagonal


@njit(cache=True)
def cholesky_substitute(factor, b, x):
    """x = (L L^T)^-1 b, L the lower factor in factor's lower triangle (cholesky_factor)."""
    n = b.shape[0]
    for i in range(n):
        value = b[i]
        for k in range(i):
            value -= factor[i, k] * x[k]
        x[i] = value / factor[i, i]
    for i in range(n - 1, -1, -1):
        value = x[i]
        for k in range(i + 1, n):
            value -= factor[k, i] * x[k]
        x[i] = value / factor[i, i]


@njit(cache=True, nogil=True)
def refine_batch(
    q,
    target_positions,
    target_rotations,
    joints,
    tip,
    bounds,
    setting_values,
    stop_on_stall,
    rows,
    errors,
    iterations,
    converged,
):
    """Levenberg-Marquardt on every row of q (B, n), in place, towards targets (B, 3), (B, 3, 3).

    setting_values: SolverSettings.kernel() (tolerances, orientation weight m/rad, iterations,
    restarts). Writes errors (B, 2) = position m, orientation rad; iterations (B,), all restarts
    counted; converged (B,) whether the errors meet the tolerance. Only rows[0] <= b < rows[1]
    are touched, so threads can share the arrays. A row that misses the tolerance from its seed
    restarts from spread-out joints (up to `restarts` times, `restart_iterations` each) until one
    meets it; the lowest cost is kept. stop_on_stall: give a seed up when its cost stops falling
    (always so with restarts).
    """
    n = q.shape[1]
    settings = named(setting_values)
    work = workspace(n)
    spread = _spread_directions(n)
    restart = np.empty(n)
    for b in range(rows[0], rows[1]):
        current = q[b]
        target_position, target_rotation = target_positions[b], target_rotations[b]
        restarts = settings.restarts
        position_error, orientation_error, cost, count = levenberg_marquardt(
            current, target_position, target_rotation, joints, tip, bounds, settings,
            settings.max_iterations, stop_on_stall or restarts > 0, work,
        )  # fmt: skip
        for r in range(1, restarts + 1):
            if meets(position_error, orientation_error, settings):
                break
            for i in range(n):
                fraction = (0.5 + r * spread[i]) % 1.0
                restart[i] = bounds[i, 0] + fraction * (bounds[i, 1] - bounds[i, 0])
            trial_position_error, trial_orientation_error, trial_cost, trial_count = (
                levenberg_marquardt(
                    restart, target_position, target_rotation, joints, tip, bounds, settings,
                    settings.restart_iterations, True, work,
                )
            )  # fmt: skip
            count += trial_count
            if trial_cost < cost:
                current[:] = restart
                position_error, orientation_error = trial_position_error, trial_orientation_error
                cost = trial_cost
        if restarts > 0 and not meets(position_error, orientation_error, settings):
            # Out of reach: settle the nearest result found, without the stall cut-off.
            position_error, orientation_error, cost, polish_count = levenberg_marquardt(
                current, target_position, target_rotation, joints, tip, bounds, settings,
                settings.max_iterations, False, work,
            )  # fmt: skip
            count += polish_count
        errors[b, 0] = position_error
        errors[b, 1] = orientation_error
        iterations[b] = count
        converged[b] = meets(position_error, orientation_error, settings)


@njit(cache=True)
def workspace(n):
    """levenberg_marquardt's buffers for n joints, allocated once per batch or path."""
    return (
        np.empty(3), np.empty((3, 3)), np.empty((6, n)), np.empty(3), np.empty((3, 3)),
        np.empty((6, n)), np.empty(6), np.empty(6), np.empty((n, n)), np.empty(n), np.empty(n),
        np.empty(n), np.empty(n),
    )  # fmt: skip


@njit(cache=True)
def task_rows(settings):
    """SolverSettings.task_dimensions from a kernel's settings: 3 for a position, else 6."""
    return 3 if math.isinf(settings.orientation_tolerance) else 6


@njit(cache=True)
def meets(position_error, orientation_error, settings):
    return (
        position_error <= settings.position_tolerance
        and orientation_error <= settings.orientation_tolerance
    )


@njit(cache=True)
def _spread_directions(n):
    """(n,) steps of the R_n low-discrepancy sequence (Roberts): the r-th restart seed is
    frac(0.5 + r * step) of each joint's range, evenly spread for any number of restarts."""
    phi = 2.0
    for _ in range(30):  # phi ** (n + 1) = phi + 1, by Newton's method
        phi -= (phi ** (n + 1) - phi - 1.0) / ((n + 1) * phi**n - 1.0)
    steps = np.empty(n)
    for i in range(n):
        steps[i] = (1.0 / phi ** (i + 1)) % 1.0
    return steps


@njit(cache=True)
def _damped_normal_equations(jacobian, residual, weight, damping, held, normal, gradient):
    """normal (n, n) = J^T W J + damping I and gradient (n,) = J^T W r, the orientation rows
    weighted; a held joint (held[i] = 1) gets an identity row and no gradient, so it stays."""
    n = gradient.shape[0]
    for i in range(n):
        value = 0.0
        for k in range(3):
            value += jacobian[k, i] * residual[k]
        for k in range(3, 6):
            value += weight * jacobian[k, i] * residual[k]
        gradient[i] = value
        for j in range(i + 1):
            value = 0.0
            for k in range(3):
                value += jacobian[k, i] * jacobian[k, j]
            angular = 0.0
            for k in range(3, 6):
                angular += jacobian[k, i] * jacobian[k, j]
            value += weight * weight * angular
            normal[i, j] = value
            normal[j, i] = value
        normal[i, i] += damping
    for i in range(n):
        if held[i] > 0.0:
            gradient[i] = 0.0
            for j in range(n):
                normal[i, j] = normal[j, i] = 0.0
            normal[i, i] = 1.0


@njit(cache=True)
def _hold_pushed_joints(current, step, bounds, held):
    """Mark the clamped joints at a limit that step pushes further past it; True if any is new."""
    added = False
    for i in range(current.shape[0]):
        if held[i] > 0.0 or bounds[i, 2] > 0.0:
            continue  # held already, or a full-turn joint that wraps
        if (current[i] <= bounds[i, 0] and step[i] < 0.0) or (
            current[i] >= bounds[i, 1] and step[i] > 0.0
        ):
            held[i] = 1.0
            added = True
    return added


@njit(cache=True)
def levenberg_marquardt(
    current,
    target_position,
    target_rotation,
    joints,
    tip,
    bounds,
    settings,
    max_iterations,
    stop_on_stall,
    work,
):
    """current (n,) refined in place, at most max_iterations (fewer on a stall where
    stop_on_stall); returns its position (m) and orientation (rad) errors, cost and iterations.

    Damping = mu * cost + floor (Sugihara): ~0 near a solution, so convergence is quadratic;
    mu grows on rejected steps, so the cost only ever falls and unreachable targets settle on the
    nearest weighted compromise.
    """
    n = current.shape[0]
    weight = settings.orientation_weight
    position, rotation, jacobian, trial_position, trial_rotation, trial_jacobian = work[:6]
    residual, trial_residual, normal, gradient, step, trial, held = work[6:]
    _bound(current, bounds)
    pose_jacobian(current, joints, tip, position, rotation, jacobian)
    position_error, orientation_error = _residual(
        position, rotation, target_position, target_rotation, weight, residual
    )
    cost = _half_square(residual)
    mu = 1.0
    count = 0
    checkpoint_cost = cost
    while count < max_iterations:
        if meets(position_error, orientation_error, settings):
            break
        if stop_on_stall and count > 0 and count % _STALL_ITERATIONS == 0:
            if cost > _STALL_RATIO * checkpoint_cost:
                break  # a local minimum or a crawl: a restart elsewhere does better
            checkpoint_cost = cost
        damping = mu * cost + DAMPING_FLOOR
        held[:] = 0.0
        # A joint at its limit that the step would push past it is held there (an active set)
        # and the step solved again for the others: clamping it instead would leave the others'
        # step computed for a motion that does not happen, and refinement stalls at the limit.
        for _ in range(n):
            _damped_normal_equations(jacobian, residual, weight, damping, held, normal, gradient)
            cholesky_solve(normal, gradient, step)
            if not _hold_pushed_joints(current, step, bounds, held):
                break
        largest = 0.0
        for i in range(n):
            trial[i] = current[i] + step[i]
        _bound(trial, bounds)
        for i in range(n):
            largest = max(largest, abs(trial[i] - current[i]))
        if largest < _STEP_FLOOR:
            break
        count += 1
        pose_jacobian(trial, joints, tip, trial_position, trial_rotation, trial_jacobian)
        trial_position_error, trial_orientation_error = _residual(
            trial_position,
            trial_rotation,
            target_position,
            target_rotation,
            weight,
            trial_residual,
        )
        trial_cost = _half_square(trial_residual)
        if trial_cost < cost:
            current[:] = trial
            position, trial_position = trial_position, position
            rotation, trial_rotation = trial_rotation, rotation
            jacobian, trial_jacobian = trial_jacobian, jacobian
            residual, trial_residual = trial_residual, residual
            position_error, orientation_error = trial_position_error, trial_orientation_error
            cost = trial_cost
            mu = max(0.1 * mu, _MU_MIN)
        else:
            mu *= 10.0
            if mu > _MU_MAX:
                break
    return position_error, orientation_error, cost, count


@njit(cache=True)
def pose_jacobian_batch(q, joints, tip, positions, rotations, jacobians):
    """pose_jacobian for every row of q (B, n) into (B, 3), (B, 3, 3), (B, 6, n)."""
    for b in range(q.shape[0]):
        pose_jacobian(q[b], joints, tip, positions[b], rotations[b], jacobians[b])


@njit(cache=True)
def pose_error(q, target_position, target_rotation, joints, tip):
    """Position (m) and orientation (rad) error of FK(q (n,)) against one target."""
    # One scratch allocation, viewed as the three buffers: allocations dominate a cold call.
    scratch = np.empty(18)
    position, rotation, residual = scratch[:3], scratch[3:12].reshape((3, 3)), scratch[12:18]
    pose_jacobian(q, joints, tip, position, rotation, None)
    return _residual(position, rotation, target_position, target_rotation, 1.0, residual)


@njit(cache=True)
def pose_errors_batch(q, target_positions, target_rotations, joints, tip, errors):
    """errors (B, 2) = position (m) and orientation (rad) error of FK(q (B, n)) vs the targets."""
    for b in range(q.shape[0]):
        errors[b, 0], errors[b, 1] = pose_error(
            q[b], target_positions[b], target_rotations[b], joints, tip
        )


@njit(cache=True, nogil=True)
def closest_hypotheses(hypotheses, positions, rotations, joints, tip, reach, weight, closest):
    """closest (B,): per pose, the hypothesis of (B, K, n) whose FK is nearest its target
    (position m + weight * orientation rad); those outside reach (2, n) = low, high come after
    every one inside (refinement would clamp them), NaN ones last."""
    count, per_pose, n = hypotheses.shape
    for b in range(count):
        best, best_score = 0, np.inf
        for k in range(per_pose):
            position_error, orientation_error = pose_error(
                hypotheses[b, k], positions[b], rotations[b], joints, tip
            )
            score = position_error + weight * orientation_error
            for i in range(n):
                if hypotheses[b, k, i] < reach[0, i] or hypotheses[b, k, i] > reach[1, i]:
                    score += 1e3  # errors are metres at most
                    break
            if score < best_score:
                best, best_score = k, score
        closest[b] = best


class CompiledChain:
    """The compiled kernels bound to one chain, with numpy in and out."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self.arrays = ChainArrays.from_chain(chain)
        # Load (or compile, the first time ever) the kernels now rather than in the first query.
        zero = np.zeros((1, chain.n_joints))
        positions, rotations, _ = self.pose_jacobian(zero)
        self.pose_errors(zero, positions, rotations)

    def pose_jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """q (B, n) rad -> positions (B, 3) m, rotations (B, 3, 3), Jacobians (B, 6, n)."""
        q = self._joints(q)
        count, n = q.shape
        positions, rotations = np.empty((count, 3)), np.empty((count, 3, 3))
        jacobians = np.empty((count, 6, n))
        pose_jacobian_batch(
            q, self.arrays.joints, self.arrays.tip, positions, rotations, jacobians
        )
        return positions, rotations, jacobians

    def pose_errors(
        self, q: np.ndarray, positions: np.ndarray, rotations: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """FK(q (B, n)) against targets (B, 3), (B, 3, 3): errors (B,) m and (B,) rad."""
        q = self._joints(q)
        errors = np.empty((q.shape[0], 2))
        pose_errors_batch(
            q,
            np.ascontiguousarray(positions, dtype=np.float64),
            np.ascontiguousarray(rotations, dtype=np.float64),
            self.arrays.joints,
            self.arrays.tip,
            errors,
        )
        return errors[:, 0], errors[:, 1]

    def _joints(self, q: np.ndarray) -> np.ndarray:
        q = np.ascontiguousarray(q, dtype=np.float64)
        if q.ndim != 2 or q.shape[1] != self.chain.n_joints:
            raise ValueError(f'expected joints of shape (B, {self.chain.n_joints}), got {q.shape}')
        return q
