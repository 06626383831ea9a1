import math

import numpy as np
import pytest

from iknet_ros.requests import (
    RequestError,
    arm_joints,
    check_path_time,
    check_seed,
    check_target,
)

NAMES = ['joint1', 'joint2', 'joint3', 'joint4']


def test_good_target_is_normalised():
    target = check_target([0.1, 0.0, 0.2], [0.0, 0.0, 0.0, 1.001], 'world', 'world')
    np.testing.assert_allclose(target.quaternion, [0, 0, 0, 1])
    np.testing.assert_allclose(target.rotation, np.eye(3))
    assert check_target([0.1, 0, 0.2], [0, 0, 0, 1], '', 'world').position[0] == 0.1


@pytest.mark.parametrize(
    ('position', 'quaternion', 'frame', 'message'),
    [
        ([math.nan, 0, 0], [0, 0, 0, 1], 'world', 'position .* not finite'),
        ([0, 0, 0], [0, math.inf, 0, 1], 'world', 'orientation .* not finite'),
        ([0, 0, 0], [0, 0, 0, 0], 'world', 'norm 0'),
        ([0, 0, 0], [0, 0, 0.5, 0.5], 'world', 'norm 0.707'),
        ([0, 0, 0], [0, 0, 0, 1], 'link5', "frame 'link5' is not the base frame 'world'"),
    ],
)
def test_bad_targets_are_refused_with_a_reason(position, quaternion, frame, message):
    with pytest.raises(RequestError, match=message):
        check_target(position, quaternion, frame, 'world')


def test_seed_in_chain_order_with_extra_joints_ignored():
    seed = check_seed(['gripper', *reversed(NAMES)], [0.01, 4.0, 3.0, 2.0, 1.0], NAMES)
    np.testing.assert_array_equal(seed, [1.0, 2.0, 3.0, 4.0])
    assert check_seed([], [], NAMES) is None


@pytest.mark.parametrize(
    ('names', 'positions', 'message'),
    [
        (['joint1', 'joint2', 'joint3'], [0, 0, 0], r"lacks joints \['joint4'\]"),
        (['a', 'b', 'c', 'd'], [0, 0, 0, 0], 'lacks joints'),
        (NAMES, [0, 0, 0], '4 names but 3 positions'),
        (NAMES, [0, math.nan, 0, 0], 'not finite'),
        ([*NAMES, 'joint2'], [0, 0, 0, 0, 1], r"seed names \['joint2'\] more than once"),
    ],
)
def test_bad_seeds_are_refused(names, positions, message):
    with pytest.raises(RequestError, match=message):
        check_seed(names, positions, NAMES)


def test_arm_joints_come_from_the_latest_states_by_name():
    latest = {'gripper': 0.01, 'joint4': 4.0, 'joint3': 3.0, 'joint2': 2.0}
    assert arm_joints(latest, NAMES) is None  # joint1 has not come yet
    np.testing.assert_array_equal(arm_joints({**latest, 'joint1': 1.0}, NAMES), [1, 2, 3, 4])
    with pytest.raises(RequestError, match=r"arm's joint positions .*'joint3': nan.* not finite"):
        arm_joints({**latest, 'joint1': 1.0, 'joint3': math.nan}, NAMES)


def test_path_time_must_be_positive():
    assert check_path_time(2.0) == 2.0
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(RequestError, match='path_time'):
            check_path_time(bad)
