"""Chains from URDFs: FK against yourdfpy's own on real arms, the OM-X round trip, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yourdfpy

from iknet_core.kinematics.chain import OMX_CHAIN, Chain
from iknet_core.kinematics.fk import forward_kinematics
from iknet_core.kinematics.robots import EXAMPLE_ROBOTS, example_robots_dir, named_chain
from iknet_core.kinematics.urdf import UrdfError, chain_from_urdf, chain_to_urdf

needs_example_robots = pytest.mark.skipif(
    example_robots_dir() is None,
    reason='example-robot-data is not installed (pip install "iknet[robots]")',
)


def random_joints(chain: Chain, count: int, seed: int = 0) -> np.ndarray:
    low, high = np.array([joint.limits for joint in chain.joints]).T
    return np.random.default_rng(seed).uniform(low, high, (count, chain.n_joints))


def worst_fk_difference(chain: Chain, urdf: yourdfpy.URDF, joints: np.ndarray) -> float:
    """Largest difference of position (m) or rotation entry between iknet's FK and yourdfpy's."""
    worst = 0.0
    for q in joints:
        urdf.update_cfg(dict(zip(chain.joint_names, q, strict=True)))
        expected = urdf.get_transform(frame_to=chain.tip_frame, frame_from=chain.base_frame)
        position, rotation = forward_kinematics(chain, q)
        worst = max(
            worst,
            np.abs(np.asarray(position) - expected[:3, 3]).max(),
            np.abs(np.asarray(rotation) - expected[:3, :3]).max(),
        )
    return worst


@needs_example_robots
@pytest.mark.parametrize('name', sorted(EXAMPLE_ROBOTS))
def test_fk_of_a_parsed_arm_equals_yourdfpys(name: str) -> None:
    chain = named_chain(name)
    urdf = yourdfpy.URDF.load(
        str(example_robots_dir() / EXAMPLE_ROBOTS[name].urdf),
        load_meshes=False,
        build_collision_scene_graph=False,
        load_collision_meshes=False,
    )
    movable = [joint.name for joint in urdf.robot.joints if joint.type != 'fixed']
    assert set(chain.joint_names) <= set(movable)
    assert worst_fk_difference(chain, urdf, random_joints(chain, 200)) < 1e-12


@needs_example_robots
def test_arms_have_the_joints_and_limits_of_their_urdf() -> None:
    panda = named_chain('panda')
    assert panda.joint_names == [f'panda_joint{i}' for i in range(1, 8)]
    assert panda.joints[3].limits == (-3.0718, -0.0698)
    assert named_chain('ur5').n_joints == 6
    # SO-101's gripper jaw is not on the path to gripper_frame_link.
    assert named_chain('so101').joint_names == [
        'shoulder_pan', 'shoulder_lift', 'elbow_flex', 'wrist_flex', 'wrist_roll'
    ]  # fmt: skip


def test_omx_preset_written_as_urdf_reads_back_as_itself() -> None:
    xml = chain_to_urdf(OMX_CHAIN)
    chain = chain_from_urdf(xml, OMX_CHAIN.base_frame, OMX_CHAIN.tip_frame)
    assert chain == OMX_CHAIN  # reach travels as the URDF limit, limits as the soft limits
    urdf = yourdfpy.URDF.load(Path(write(xml)), load_meshes=False)
    assert worst_fk_difference(chain, urdf, random_joints(chain, 50)) < 1e-12


def test_continuous_joints_are_marked_and_written_back_as_continuous() -> None:
    # A continuous joint's limits and reach are one turn, as a revolute joint's limited to +-pi
    # may be: only the mark tells them apart (follow_path carries a continuous one past pi).
    xml = chain_to_urdf(OMX_CHAIN).replace(
        '<joint name="joint1" type="revolute">', '<joint name="joint1" type="continuous">'
    )
    chain = chain_from_urdf(xml, 'world', 'end_effector_link')
    assert [joint.continuous for joint in chain.joints] == [True, False, False, False]
    assert chain.joints[0].limits == chain.joints[0].reach == (-np.pi, np.pi)
    again = chain_from_urdf(chain_to_urdf(chain), 'world', 'end_effector_link')
    assert again.joints[0].continuous and Chain.from_dict(chain.to_dict()).joints[0].continuous
    # A chain saved before the mark (a checkpoint): no joint continuous, and the same arm.
    saved = chain.to_dict()
    for joint in saved['joints']:
        del joint['continuous']
    old = Chain.from_dict(saved)
    assert not any(joint.continuous for joint in old.joints) and old == chain


def test_a_chain_with_rotated_origins_and_tip_survives_the_round_trip() -> None:
    panda_like = Chain.from_dict(
        {
            **OMX_CHAIN.to_dict(),
            'name': 'rotated',
            'tip_rpy': (0.3, -1.2, 2.0),
            'joints': [
                {**joint, 'origin_rpy': (0.1 * i, np.pi / 2 if i == 1 else -0.4, 0.7)}
                for i, joint in enumerate(OMX_CHAIN.to_dict()['joints'])
            ],
        }
    )
    chain = chain_from_urdf(chain_to_urdf(panda_like), 'world', 'end_effector_link')
    for q in random_joints(chain, 20):
        expected, got = forward_kinematics(panda_like, q), forward_kinematics(chain, q)
        np.testing.assert_allclose(got[0], expected[0], atol=1e-12)
        np.testing.assert_allclose(got[1], expected[1], atol=1e-12)


def test_fixed_joints_before_and_after_fold_into_the_chain(tmp_path: Path) -> None:
    xml = chain_to_urdf(OMX_CHAIN).replace(
        '<link name="world"/>',
        '<link name="table"/><link name="world"/>'
        '<joint name="mount" type="fixed"><parent link="table"/><child link="world"/>'
        '<origin xyz="0.1 0.2 0.3" rpy="0 0 1.0"/></joint>',
    )
    chain = chain_from_urdf(xml, 'table', 'end_effector_link')
    assert chain.joint_names == OMX_CHAIN.joint_names
    q = random_joints(chain, 1)[0]
    position, _ = forward_kinematics(chain, q)
    local, _ = forward_kinematics(OMX_CHAIN, q)
    c, s = np.cos(1.0), np.sin(1.0)
    expected = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]) @ np.asarray(local) + [0.1, 0.2, 0.3]
    np.testing.assert_allclose(position, expected, atol=1e-12)


def test_xacro_file_is_expanded(tmp_path: Path) -> None:
    pytest.importorskip('xacro', reason='xacro is not installed (pip install "iknet[robots]")')
    xml = (
        chain_to_urdf(OMX_CHAIN)
        .replace(
            '<robot name="open_manipulator_x">',
            '<robot name="open_manipulator_x" xmlns:xacro="http://www.ros.org/wiki/xacro">'
            '<xacro:property name="upper" value="0.128"/>',
        )
        .replace('xyz="0.024 0.0 0.128"', 'xyz="0.024 0.0 ${upper}"')
    )
    path = tmp_path / 'omx.urdf.xacro'
    path.write_text(xml.split('?>', 1)[1])
    assert chain_from_urdf(path, 'world', 'end_effector_link') == OMX_CHAIN
    # One that needs an argument without a default says how to expand it first.
    needs = xml.split('?>', 1)[1].replace(
        '<xacro:property name="upper" value="0.128"/>',
        '<xacro:arg name="upper"/><xacro:property name="upper" value="$(arg upper)"/>',
    )
    path.write_text(needs)
    with pytest.raises(UrdfError, match=r'xacro failed: .*NAME:=VALUE > arm.urdf'):
        chain_from_urdf(path, 'world', 'end_effector_link')


def write(xml: str) -> str:
    import tempfile

    with tempfile.NamedTemporaryFile('w', suffix='.urdf', delete=False) as file:
        file.write(xml)
    return file.name


BAD_DESCRIPTIONS = {
    'missing link': (
        chain_to_urdf(OMX_CHAIN), 'world', 'gripper', "tip link 'gripper' is not in robot"
    ),
    'tip above base': (
        chain_to_urdf(OMX_CHAIN), 'joint2_link', 'world', "'world' is not below base link"
    ),
    'planar': (
        chain_to_urdf(OMX_CHAIN).replace('name="joint3" type="revolute"', 'name="joint3" '
                                         'type="planar"'),
        'world', 'end_effector_link', "joint 'joint3' between 'world' and 'end_effector_link' "
        "is planar; only revolute, continuous, prismatic and fixed joints are supported (a chain "
        "from base link 'joint3_link' on or up to tip link 'joint2_link' leaves it out)",
    ),
    'floating next to the base': (
        chain_to_urdf(OMX_CHAIN).replace('name="joint1" type="revolute"', 'name="joint1" '
                                         'type="floating"'),
        'world', 'end_effector_link', "are supported (a chain from base link 'joint1_link' on "
        'leaves it out)',
    ),
    'prismatic without limits': (
        chain_to_urdf(OMX_CHAIN).replace('name="joint3" type="revolute"', 'name="joint3" '
                                         'type="prismatic"').replace(
            'lower="-1.81" upper="1.49"', ''),
        'world', 'end_effector_link', "prismatic joint 'joint3' has no limit lower and upper",
    ),
    'mimic': (
        chain_to_urdf(OMX_CHAIN).replace('<child link="joint2_link"/>',
                                         '<child link="joint2_link"/><mimic joint="joint1"/>'),
        'world', 'end_effector_link', "joint 'joint2' between 'world' and 'end_effector_link' "
        "mimics 'joint1'",
    ),
    'malformed XML': ('<robot name="x"><link name="a"></robot>', 'a', 'a', 'not well-formed XML'),
    'not a robot': ('<robot name="x"><joint name="j" type="revolute"/></robot>', 'a', 'b',
                    'is not a valid URDF'),
    'another XML file': ('<launch><node pkg="x"/></launch>', 'a', 'b',
                         'is not a URDF: its root element is <launch>, not <robot>'),
    'an unnamed link': ('<robot name="x"><link/></robot>', 'a', 'b',
                        "an element lacks its required 'name' attribute"),
    'no tip link': (chain_to_urdf(OMX_CHAIN), 'world', '', "got 'world' and ''"),
    'no such file': ('/nonexistent/arm.urdf', 'a', 'b', '/nonexistent/arm.urdf does not exist'),
    'a folder': ('/', 'a', 'b', 'robot description / is a folder'),
}  # fmt: skip


@pytest.mark.parametrize('case', sorted(BAD_DESCRIPTIONS))
def test_bad_descriptions_get_one_line_naming_the_problem(case: str) -> None:
    source, base, tip, expected = BAD_DESCRIPTIONS[case]
    with pytest.raises(UrdfError) as error:
        chain_from_urdf(source, base, tip)
    message = str(error.value)
    assert expected in message and '\n' not in message, message


@needs_example_robots
@pytest.mark.parametrize('name', sorted(EXAMPLE_ROBOTS))
def test_joints_fk_ik_fk_round_trip_on_every_arm(name: str) -> None:
    from iknet_core.solvers.factory import build_solver

    chain = named_chain(name)
    solver = build_solver('refine-from-zero', chain)
    joints = random_joints(chain, 40, seed=7)
    positions, rotations = forward_kinematics(chain, joints)
    for position, rotation in zip(positions, rotations, strict=True):
        solutions = solver.solve(position, rotation)
        assert solutions.success, (name, solutions.position_errors[0])
        reached, turned = forward_kinematics(chain, solutions.joints[0])
        assert np.linalg.norm(np.asarray(reached) - position) <= 1e-6
        assert np.abs(np.asarray(turned) - rotation).max() <= 1e-5
        assert solutions.within_limits[0]


@needs_example_robots
def test_so101_poses_out_of_its_reach_end_nearest_and_unsolved() -> None:
    """Five joints cannot take every orientation: such targets are never claimed solved."""
    from iknet_core.metrics import pose_errors
    from iknet_core.solvers.factory import build_solver

    chain = named_chain('so101')
    solver = build_solver('refine-from-zero', chain)
    position, rotation = forward_kinematics(chain, random_joints(chain, 1, seed=2)[0])
    tilted = rotation @ np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    solutions = solver.solve(np.asarray(position), tilted)
    assert not solutions.success
    assert solutions.position_errors[0] + solutions.orientation_errors[0] > 1e-3
    position_error, orientation_error = pose_errors(
        chain, solutions.joints[:1], np.concatenate([position, quaternion(tilted)])[None]
    )
    assert position_error[0] == pytest.approx(solutions.position_errors[0], abs=1e-9)
    assert orientation_error[0] == pytest.approx(solutions.orientation_errors[0], abs=1e-7)


def quaternion(rotation: np.ndarray) -> np.ndarray:
    from iknet_core.kinematics.transforms import quaternion_from_matrix

    return np.asarray(quaternion_from_matrix(rotation))
