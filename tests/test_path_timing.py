"""time_stamps: the finite differences a controller interpolating the points feels stay within
the velocity and acceleration limits, corners and reversals included, without slowing a path
that has none."""

import numpy as np
import pytest

from iknet_core.kinematics import OMX_CHAIN
from iknet_core.solvers.path import smooth_joint_paths
from iknet_core.solvers.path_timing import MIN_SEGMENT_S, time_stamps

VELOCITY, ACCELERATION = 1.0, 2.0


def finite_differences(joints: np.ndarray, stamps: np.ndarray) -> tuple[float, float]:
    """The largest joint speed over a segment, and the largest change of those speeds at a point
    over half its two segments' time, from rest before the first point and to rest after the
    last (rad/s, rad/s^2)."""
    durations = np.diff(stamps)
    velocities = np.diff(joints, axis=0) / durations[:, None]
    resting = np.zeros((1, joints.shape[1]))
    changes = np.diff(np.concatenate([resting, velocities, resting]), axis=0)
    around = 0.5 * (np.concatenate([[0.0], durations]) + np.concatenate([durations, [0.0]]))
    return float(np.abs(velocities).max()), float((np.abs(changes) / around[:, None]).max())


def out_and_back(steps: int = 50) -> np.ndarray:
    """0 -> 0.3 -> 0 rad on three joints, steps waypoints each way."""
    there = np.linspace(0.0, 0.3, steps)
    return np.concatenate([there, there[::-1][1:]])[:, None] * np.ones((1, 3))


def corner(steps: int = 50) -> np.ndarray:
    """1 rad along joint 0, then 1 rad along joint 1."""
    ramp = np.linspace(0.0, 1.0, steps)
    first = np.stack([ramp, np.zeros(steps)], -1)
    return np.concatenate([first, np.stack([np.ones(steps), ramp], -1)[1:]])


@pytest.mark.parametrize(
    'joints',
    [
        pytest.param(out_and_back(), id='out and back'),
        pytest.param(corner(), id='corner'),
        pytest.param(np.array([[0.0], [0.1], [0.1], [0.2]]), id='a repeated waypoint'),
        pytest.param(
            np.cumsum(np.random.default_rng(0).normal(0.0, 0.01, (2000, 6)), 0), id='random walk'
        ),
        *(
            pytest.param(curve, id=f'smooth curve {index}')
            for index, curve in enumerate(smooth_joint_paths(OMX_CHAIN, 20, 100, seed=3))
        ),
    ],
)
def test_no_joint_goes_faster_or_turns_harder_than_the_limits(joints):
    stamps = time_stamps(joints, VELOCITY, ACCELERATION)
    assert stamps[0] == 0.0 and (np.diff(stamps) >= MIN_SEGMENT_S * (1 - 1e-9)).all()
    speed, acceleration = finite_differences(joints, stamps)
    assert speed <= VELOCITY * (1 + 1e-6)
    assert acceleration <= ACCELERATION * (1 + 1e-6)


def test_a_straight_line_takes_the_trapezoid_and_a_reversal_about_two():
    line = np.linspace(0.0, 1.0, 100)[:, None] * np.ones((1, 2))
    # 1 rad at 1 rad/s and 2 rad/s^2: 0.5 s up, 0.5 s cruising, 0.5 s down.
    assert time_stamps(line, VELOCITY, ACCELERATION)[-1] == pytest.approx(1.5, rel=1e-9)
    # 0.3 rad out and back: two rest-to-rest triangles of 2 sqrt(0.3 / 2) s each.
    leg = 2.0 * np.sqrt(0.3 / ACCELERATION)
    assert 2.0 * leg <= time_stamps(out_and_back(), VELOCITY, ACCELERATION)[-1] <= 2.2 * leg


def test_whole_number_limits_time_as_their_floats():
    line = np.linspace(0.0, 1.0, 100)[:, None] * np.ones((1, 2))
    np.testing.assert_allclose(time_stamps(line, 1, 2), time_stamps(line, 1.0, 2.0))


def test_the_limits_hold_where_the_caps_are_lowered_and_where_they_never_settle(monkeypatch):
    # Panda curves need the finite-difference check to lower the caps (2 to 12 passes); with
    # one pass allowed, the whole trajectory is slowed evenly instead.
    from iknet_core.kinematics.robots import example_robots_dir, named_chain
    from iknet_core.solvers import path_timing

    if example_robots_dir() is None:
        pytest.skip('example-robot-data is not installed')
    curves = smooth_joint_paths(named_chain('panda'), 20, 100, seed=0)
    for passes in (path_timing.ACCELERATION_PASSES, 1):
        monkeypatch.setattr(path_timing, 'ACCELERATION_PASSES', passes)
        for curve in curves:
            speed, acceleration = finite_differences(curve, time_stamps(curve))
            assert speed <= VELOCITY * (1 + 1e-6)
            assert acceleration <= ACCELERATION * (1 + 1e-6)


def test_a_single_waypoint_is_at_zero():
    np.testing.assert_array_equal(time_stamps(np.zeros((1, 4))), [0.0])


def test_own_velocity_limits_must_be_positive_and_a_joint_at_rest_caps_nothing():
    line = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])
    with pytest.raises(ValueError, match='velocity limits must be > 0'):
        time_stamps(line, velocity_limits=np.array([np.inf, 0.0]))
    slow_at_rest = time_stamps(line, velocity_limits=np.array([np.inf, 1e-3]))
    np.testing.assert_allclose(slow_at_rest, time_stamps(line))  # the second joint never moves
