"""Prismatic joints (a SCARA's quill, a torso lift, a linear rail) through FK, the Jacobians, the
URDF round trip, the solvers, path following and the IK server over DDS."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import yourdfpy
from processes import NODE_START_S
from recording_helpers import wait_for
from test_ik_server import solve_request
from test_urdf import needs_example_robots, random_joints, worst_fk_difference, write

from iknet.srv import SolveIK
from iknet_core.kinematics import Chain, forward_kinematics, geometric_jacobian
from iknet_core.kinematics.chain import Joint
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.kinematics.robots import example_robots_dir
from iknet_core.kinematics.urdf import chain_from_urdf, chain_to_urdf
from iknet_core.metrics import accuracy_report
from iknet_core.resources import installed_executable as executable
from iknet_core.solvers import SolverSettings, Tolerance
from iknet_core.solvers.factory import available_solvers, build_solver
from iknet_core.solvers.kernels import CompiledChain
from iknet_core.solvers.path import follow_path, smooth_joint_paths
from iknet_core.solvers.path_timing import (
    SLIDE_METRES_PER_RAD,
    chain_timing,
    slide_units,
    speed_units,
    time_stamps,
)
from iknet_ros.qos import SERVICE_QUEUE_QOS

_Z, _DOWN = (0.0, 0.0, 1.0), (0.0, 0.0, -1.0)
# A SCARA: shoulder and elbow about z, a quill sliding down 0-0.2 m, a wrist roll.
SCARA = Chain(
    name='scara',
    base_frame='base',
    tip_frame='flange',
    joints=(
        Joint('shoulder', (0.0, 0.0, 0.4), _Z, (-2.5, 2.5), (-2.5, 2.5)),
        Joint('elbow', (0.35, 0.0, 0.0), _Z, (-2.4, 2.4), (-2.4, 2.4)),
        Joint('quill', (0.3, 0.0, 0.0), _DOWN, (0.0, 0.2), (0.0, 0.2), kind='prismatic'),
        Joint('wrist', (0.0, 0.0, -0.05), _Z, (-3.0, 3.0), (-3.0, 3.0)),
    ),
    tip_xyz=(0.0, 0.0, -0.02),
)


def test_a_slide_moves_the_tip_along_its_axis_and_turns_nothing() -> None:
    q = np.array([0.3, -0.7, 0.0, 1.1])
    lowered = q + np.array([0.0, 0.0, 0.15, 0.0])
    (top, top_rotation), (bottom, bottom_rotation) = (
        forward_kinematics(SCARA, q),
        forward_kinematics(SCARA, lowered),
    )
    np.testing.assert_allclose(bottom - top, [0.0, 0.0, -0.15], atol=1e-15)
    np.testing.assert_allclose(bottom_rotation, top_rotation, atol=1e-15)


def test_jacobian_of_a_prismatic_chain_equals_autograd_and_the_compiled_one() -> None:
    q = random_joints(SCARA, 50, seed=1)
    jacobians = geometric_jacobian(SCARA, q)
    for row, expected in zip(q, jacobians, strict=True):
        linear = torch.autograd.functional.jacobian(
            lambda x: forward_kinematics(SCARA, x)[0], torch.tensor(row)
        )
        np.testing.assert_allclose(expected[:3], linear, atol=1e-12)
    np.testing.assert_allclose(jacobians[:, 3:, 2], 0.0)  # the slide turns nothing
    positions, rotations, compiled = CompiledChain(SCARA).pose_jacobian(q)
    assert np.abs(compiled - jacobians).max() < 1e-14
    assert np.abs(positions - forward_kinematics(SCARA, q)[0]).max() < 1e-14
    assert np.abs(rotations - forward_kinematics(SCARA, q)[1]).max() < 1e-14


def test_prismatic_chain_survives_the_urdf_round_trip_and_matches_yourdfpy() -> None:
    xml = chain_to_urdf(SCARA)
    assert 'type="prismatic"' in xml
    chain = chain_from_urdf(xml, 'base', 'flange')
    assert chain == SCARA
    urdf = yourdfpy.URDF.load(write(xml), load_meshes=False)
    assert worst_fk_difference(chain, urdf, random_joints(chain, 50)) < 1e-12
    assert Chain.from_dict(SCARA.to_dict()) == SCARA


def test_a_chain_saved_before_joint_kinds_reads_as_revolute() -> None:
    data = SCARA.to_dict()
    for joint in data['joints']:
        del joint['kind']
    assert not any(joint.prismatic for joint in Chain.from_dict(data).joints)
    data['joints'][0]['kind'] = 'planar'
    with pytest.raises(ValueError, match="kind 'planar' is not one of"):
        Chain.from_dict(data)


@needs_example_robots
def test_tiago_torso_lift_and_arm_match_yourdfpy() -> None:
    path = example_robots_dir() / 'tiago_description/robots/tiago_no_hand.urdf'
    chain = chain_from_urdf(path, 'base_footprint', 'arm_tool_link')
    assert chain.joints[0].name == 'torso_lift_joint' and chain.joints[0].prismatic
    assert chain.joints[0].velocity_limit == pytest.approx(0.07)  # m/s, from its URDF
    assert speed_units(chain)[0] == pytest.approx(0.07)
    assert chain.n_joints == 8
    urdf = yourdfpy.URDF.load(str(path), load_meshes=False, build_collision_scene_graph=False)
    assert worst_fk_difference(chain, urdf, random_joints(chain, 100)) < 1e-12


@pytest.mark.parametrize('position_only', [False, True], ids=['pose', 'position'])
def test_refine_from_zero_solves_a_scara_exactly_inside_its_limits(position_only: bool) -> None:
    settings = SolverSettings(tolerance=Tolerance(1e-6, np.inf if position_only else 1e-5))
    solver = build_solver('refine-from-zero', SCARA, settings=settings)
    q = random_joints(SCARA, 200, seed=2)
    positions, rotations = forward_kinematics(SCARA, q)
    joints, position_errors, orientation_errors = solver.solve_batch(positions, rotations)
    assert position_errors.max() <= 1e-6
    if not position_only:
        assert orientation_errors.max() <= 1e-5
    low, high = np.array([joint.limits for joint in SCARA.joints]).T
    assert ((joints >= low - 1e-9) & (joints <= high + 1e-9)).all()


def test_refine_from_zero_answers_inside_limits_narrower_than_the_reach() -> None:
    # A single seed can converge on the elbow branch that leaves the limits; restarts inside
    # them find the other (the arm has no joints to spare).
    wider = tuple(
        dataclasses.replace(joint, reach=(joint.limits[0] - 0.1, joint.limits[1] + 0.1))
        for joint in SCARA.joints
    )
    chain = dataclasses.replace(SCARA, joints=wider)
    solver = build_solver('refine-from-zero', chain)
    q = random_joints(chain, 1000, seed=2)
    joints, position_errors, _ = solver.solve_batch(*forward_kinematics(chain, q))
    assert position_errors.max() <= 1e-6
    assert solver.policy.within_limits(joints).all()


def test_a_path_down_the_quill_is_followed_with_the_slide() -> None:
    curve = smooth_joint_paths(SCARA, count=1, waypoints=60, seed=3)[0]
    result = follow_path(SCARA, pose_from_joints(SCARA, curve), curve[0])
    assert result.success, result.reason
    steps = np.abs(np.diff(result.joints, axis=0)).max(0)
    curve_steps = np.abs(np.diff(curve, axis=0)).max(0)
    assert (steps <= 1.5 * curve_steps + 1e-9).all()


def test_a_slide_is_timed_in_metres_per_second() -> None:
    # The quill alone travels 0.2 m: as long as a revolute joint's 0.2 / SLIDE_METRES_PER_RAD rad.
    lowered = np.zeros((11, 4))
    lowered[:, 2] = np.linspace(0.0, 0.2, 11)
    turned = np.zeros((11, 4))
    turned[:, 0] = np.linspace(0.0, 0.2 / SLIDE_METRES_PER_RAD, 11)
    slide_stamps = time_stamps(lowered, units=slide_units(SCARA))
    np.testing.assert_allclose(slide_stamps, time_stamps(turned), rtol=1e-12)
    speeds = np.diff(lowered[:, 2]) / np.diff(slide_stamps)
    assert speeds.max() <= SLIDE_METRES_PER_RAD * (1.0 + 1e-9)  # the default 1 rad/s, in m/s


def test_a_urdf_velocity_limit_slows_its_joint_and_survives_the_round_trip() -> None:
    slow = (dataclasses.replace(SCARA.joints[0], velocity_limit=0.5), *SCARA.joints[1:])
    chain = chain_from_urdf(
        chain_to_urdf(dataclasses.replace(SCARA, joints=slow)), 'base', 'flange'
    )
    assert chain.joints[0].velocity_limit == 0.5 and chain.joints[1].velocity_limit is None
    assert chain == SCARA  # the same arm: a model trained for SCARA still fits
    np.testing.assert_allclose(speed_units(chain), [0.5, 1.0, SLIDE_METRES_PER_RAD, 1.0])
    turned = np.zeros((21, 4))
    turned[:, 0] = turned[:, 1] = np.linspace(0.0, 1.5, 21)
    stamps = time_stamps(turned, **chain_timing(chain))
    assert stamps[-1] > 1.5 * time_stamps(turned)[-1]  # the shoulder at half the speed
    speeds = np.diff(turned[:, 0]) / np.diff(stamps)
    assert speeds.max() <= 0.5 * (1.0 + 1e-9)
    # A higher speed limit never slows the path: the shoulder's own limit caps its speed, not
    # its acceleration (which fell with a shared scale: 10 rad/s took twice as long as 2).
    times = [time_stamps(turned, v, 2.0, **chain_timing(chain))[-1] for v in (0.5, 1.0, 2.0, 10.0)]
    assert times == sorted(times, reverse=True)
    stamps = time_stamps(turned, 10.0, 2.0, **chain_timing(chain))
    durations = np.diff(stamps)
    velocities = np.concatenate([[0.0], np.diff(turned[:, 0]) / durations, [0.0]])
    around = 0.5 * (np.concatenate([[0.0], durations]) + np.concatenate([durations, [0.0]]))
    accelerations = np.abs(np.diff(velocities)) / around
    assert 1.0 < accelerations.max() <= 2.0 * (1.0 + 1e-6)  # the limit asked for, not 0.1


@pytest.mark.parametrize('max_velocity', [0.0, 1.0], ids=['no max_velocity', 'max_velocity'])
def test_a_timed_path_faster_than_a_urdf_velocity_limit_is_refused(max_velocity: float) -> None:
    from iknet_core.solvers.path_timing import DEFAULT_MAX_VELOCITY
    from iknet_ros.path_service import check_speed
    from iknet_ros.requests import RequestError

    slow = (*SCARA.joints[:2], dataclasses.replace(SCARA.joints[2], velocity_limit=0.05))
    chain = dataclasses.replace(SCARA, joints=(*slow, SCARA.joints[3]))
    lowered = np.zeros((3, 4))
    lowered[:, 2] = [0.0, 0.05, 0.1]
    speed, given = max_velocity or DEFAULT_MAX_VELOCITY, bool(max_velocity)
    check_speed(lowered, np.array([1.0, 2.0]), speed, chain, given)  # 0.05 m/s: allowed
    with pytest.raises(RequestError, match=r'quill at 0.1 m/s .* above its URDF velocity limit'):
        check_speed(lowered, np.array([0.5, 1.0]), speed, chain, given)


def test_accuracy_report_gives_a_slides_error_in_metres_unwrapped() -> None:
    joints = random_joints(SCARA, 20, seed=5)
    predicted = joints + np.array([0.01, 0.0, 0.003, 2.0 * np.pi])  # the wrist a turn off
    report = accuracy_report(SCARA, predicted, pose_from_joints(SCARA, joints), joints)
    assert set(report['joint_error_rad']) == {'shoulder', 'elbow', 'wrist'}
    assert report['joint_error_rad']['wrist']['max'] == pytest.approx(0.0, abs=1e-9)
    assert report['joint_error_m']['quill']['max'] == pytest.approx(0.003)


def test_the_omx_closed_form_refuses_an_arm_with_a_slide() -> None:
    from iknet_core.kinematics import OMX_CHAIN

    data = OMX_CHAIN.to_dict()
    data['joints'][0].update(kind='prismatic', limits=(0.0, 0.2), reach=(0.0, 0.2))
    lifted = Chain.from_dict(data)
    with pytest.raises(ValueError, match='not a yaw-pitch-pitch-pitch arm of revolute joints'):
        OmxAnalyticIK(lifted)
    assert available_solvers(lifted, None) == ('refine-from-zero',)


def test_server_answers_for_a_scara_with_its_slide_in_metres(processes, ros, tmp_path) -> None:
    urdf = tmp_path / 'scara.urdf'
    urdf.write_text(chain_to_urdf(SCARA))
    log = tmp_path / 'server.log'
    processes.start(
        executable('ik_server'), '--ros-args', '-p', f'urdf:={urdf}', '-p', 'base_link:=base',
        '-p', 'tip_link:=flange', '-p', 'command_interface:=none', log=log,
    )  # fmt: skip
    client = ros.node('scara_client').create_client(
        SolveIK, '/ik_server/solve_ik', qos_profile=SERVICE_QUEUE_QOS
    )
    assert client.wait_for_service(timeout_sec=NODE_START_S), log.read_text()
    wait_for(lambda: 'ready in' in log.read_text(), 90.0, f'the server to log "ready" ({log})')
    joints = random_joints(SCARA, 5, seed=4)
    for pose, expected in zip(pose_from_joints(SCARA, joints), joints, strict=True):
        response = ros.call(client, solve_request(pose, frame='base'))
        assert response.success, response.message
        solution = response.solutions[0]
        assert list(solution.name) == SCARA.joint_names
        assert solution.position[2] == pytest.approx(expected[2], abs=1e-6)  # the quill, in m
        position, _ = forward_kinematics(SCARA, np.array(solution.position))
        assert np.linalg.norm(position - pose[:3]) < 1e-6
