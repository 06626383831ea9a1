"""Chains from robot descriptions (URDF, xacro, a robot_description string) and back.

yourdfpy reads and writes the XML: it is small (lxml + trimesh, meshes optional), kept, loads
without touching mesh files, and writes URDF from its own model classes. urchin (urdfpy's fork)
pulls networkx and pycollada and always resolves meshes.

A chain is the path from a base link down to a tip link. Fixed joints on it fold into the next
moving joint's origin (or into the tip); revolute, continuous and prismatic joints move; a
planar or floating joint, or a mimic joint, on the path is refused by name. A joint's `reach` is
its URDF limit, its software `limits` the safety_controller's soft limits where given, else the
same.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from iknet_core.kinematics.chain import Chain, Joint
from iknet_core.kinematics.transforms import rpy_from_matrix, rpy_matrix

MOVING_JOINT_TYPES = ('revolute', 'continuous', 'prismatic')
# Joint types whose URDF limit (lower, upper) bounds them.
LIMITED_JOINT_TYPES = ('revolute', 'prismatic')
# A continuous joint takes any angle; one turn covers every pose it can give.
CONTINUOUS_LIMITS = (-math.pi, math.pi)


class UrdfError(ValueError):
    """A robot description that gives no chain, with a one-line reason naming the problem."""


def read_description(source: str | Path) -> str:
    """The URDF XML of a .urdf file, a .xacro file (expanded by the xacro package) or a string
    that already is the XML (a robot_description parameter or topic)."""
    text = str(source)
    if text.lstrip().startswith('<'):
        return text
    path = Path(source)
    if path.is_dir():
        raise UrdfError(f'robot description {path} is a folder, not a .urdf or .urdf.xacro file')
    if not path.is_file():
        raise UrdfError(f'robot description {path} does not exist')
    if path.suffix == '.xacro':
        try:
            import xacro
        except ImportError:
            raise UrdfError(
                f'{path} is a xacro file: install xacro (pip install "iknet[robots]")'
            ) from None
        try:
            return xacro.process_file(str(path)).toprettyxml(indent='  ')
        except Exception as error:  # xacro raises its own and XML errors
            raise UrdfError(
                f'{path}: xacro failed: {_one_line(error)} (one that needs arguments: expand it '
                f'first, `xacro {path} NAME:=VALUE > arm.urdf`, and give arm.urdf)'
            ) from None
    return path.read_text()


def chain_from_urdf(source: str | Path, base_link: str, tip_link: str) -> Chain:
    """The chain from base_link to tip_link of a URDF file, xacro file or XML string."""
    if not (base_link and tip_link):
        raise UrdfError(
            f'a chain needs a base link and a tip link, got {base_link!r} and {tip_link!r}'
        )
    is_xml = str(source).lstrip().startswith('<')
    robot = _parse(read_description(source), 'the robot description' if is_xml else str(source))
    links = {link.name for link in robot.links}
    for role, name in (('base', base_link), ('tip', tip_link)):
        if name not in links:
            raise UrdfError(
                f'{role} link {name!r} is not in robot {robot.name!r}; links: {sorted(links)}'
            )
    path = _joints_between(robot, base_link, tip_link)
    joints, fixed = [], np.eye(4)
    for urdf_joint in path:
        origin = fixed @ _origin(urdf_joint)
        if urdf_joint.type == 'fixed':
            fixed = origin
            continue
        if urdf_joint.type not in MOVING_JOINT_TYPES:
            raise UrdfError(
                f'joint {urdf_joint.name!r} between {base_link!r} and {tip_link!r} is '
                f'{urdf_joint.type}; only revolute, continuous, prismatic and fixed joints are '
                f'supported'
                f'{_around(urdf_joint, base_link, tip_link)}'
            )
        if urdf_joint.mimic is not None:
            raise UrdfError(
                f'joint {urdf_joint.name!r} between {base_link!r} and {tip_link!r} mimics '
                f'{urdf_joint.mimic.joint!r}; mimic joints inside a chain are not supported'
                f'{_around(urdf_joint, base_link, tip_link)}'
            )
        joints.append(_joint(urdf_joint, origin))
        fixed = np.eye(4)
    if not joints:
        raise UrdfError(
            f'no revolute, continuous or prismatic joint between {base_link!r} and {tip_link!r}'
        )
    return Chain(
        name=robot.name,
        base_frame=base_link,
        tip_frame=tip_link,
        joints=tuple(joints),
        tip_xyz=_xyz(fixed),
        tip_rpy=rpy_from_matrix(fixed[:3, :3]),
    )


def chain_to_urdf(chain: Chain) -> str:
    """A URDF with one link per joint frame that chain_from_urdf reads back as this chain."""
    import yourdfpy
    from lxml import etree

    frames = [chain.base_frame, *(f'{joint.name}_link' for joint in chain.joints)]
    joints = [
        yourdfpy.Joint(
            name=joint.name,
            type='continuous' if joint.continuous else joint.kind,
            parent=parent,
            child=child,
            origin=_matrix(joint.origin_xyz, joint.origin_rpy),
            axis=np.array(joint.axis, dtype=np.float64),
            # The chain holds no dynamics: effort (required by URDF) is 0, as is a velocity
            # limit it was not given (read back as none).
            limit=yourdfpy.Limit(
                effort=0.0,
                velocity=joint.velocity_limit or 0.0,
                lower=joint.reach[0],
                upper=joint.reach[1],
            ),
        )
        for joint, parent, child in zip(chain.joints, frames[:-1], frames[1:], strict=True)
    ]
    joints.append(
        yourdfpy.Joint(
            name=f'{chain.tip_frame}_joint',
            type='fixed',
            parent=frames[-1],
            child=chain.tip_frame,
            origin=_matrix(chain.tip_xyz, chain.tip_rpy),
        )
    )
    links = [yourdfpy.Link(name=name) for name in [*frames, chain.tip_frame]]
    robot = yourdfpy.Robot(name=chain.name, links=links, joints=joints)
    tree = yourdfpy.URDF(robot=robot, build_scene_graph=False, load_meshes=False).write_xml()
    # The software limits as soft limits inside the URDF limit (`reach`): yourdfpy reads
    # safety_controller but does not write it.
    for joint in chain.joints:
        element = tree.getroot().find(f"joint[@name='{joint.name}']")
        etree.SubElement(
            element,
            'safety_controller',
            soft_lower_limit=repr(joint.limits[0]),
            soft_upper_limit=repr(joint.limits[1]),
            k_velocity='0.0',
        )
    # No encoding in the declaration: lxml (pytorch-kinematics, yourdfpy) refuses one in a str.
    return '<?xml version="1.0"?>\n' + etree.tostring(tree, pretty_print=True, encoding='unicode')


def _parse(xml: str, label: str):
    """The yourdfpy Robot of an XML string, without meshes; UrdfError on malformed XML."""
    try:
        import yourdfpy
    except ImportError:
        raise UrdfError('reading a URDF needs yourdfpy (pip install yourdfpy)') from None
    from lxml import etree

    try:  # strictly first: yourdfpy falls back to lxml's recovering parser on broken XML
        root = etree.fromstring(xml.encode()).tag
    except etree.XMLSyntaxError as error:
        raise UrdfError(f'{label} is not well-formed XML: {_one_line(error)}') from None
    if root != 'robot':
        raise UrdfError(f'{label} is not a URDF: its root element is <{root}>, not <robot>')
    try:
        urdf = yourdfpy.URDF.load(
            io.BytesIO(xml.encode()),
            build_scene_graph=False,
            build_collision_scene_graph=False,
            load_meshes=False,
            load_collision_meshes=False,
        )
    except Exception as error:  # lxml's XMLSyntaxError and yourdfpy's URDFError family
        # yourdfpy reads a required attribute with [], so a missing one is a bare KeyError.
        reason = (
            f'an element lacks its required {error.args[0]!r} attribute'
            if isinstance(error, KeyError)
            else _one_line(error)
        )
        raise UrdfError(f'{label} is not a valid URDF: {reason}') from None
    return urdf.robot


def _around(urdf_joint, base_link: str, tip_link: str) -> str:
    """The chains that leave out a joint the chain cannot have, for its error message: a Tiago's
    arm, say, from its torso lift link on (the lift is prismatic). Neither where it would hold
    no joint (the joint next to the base or the tip link)."""
    chains = [
        f'{side} {link!r}{on}'
        for side, link, on, end in (
            ('from base link', urdf_joint.child, ' on', tip_link),
            ('up to tip link', urdf_joint.parent, '', base_link),
        )
        if link != end
    ]
    return f' (a chain {" or ".join(chains)} leaves it out)' if chains else ''


def _joints_between(robot, base_link: str, tip_link: str) -> list:
    """The joints from base_link down to tip_link, in order; UrdfError if tip is not below."""
    parent_joint = {joint.child: joint for joint in robot.joints}
    path, link = [], tip_link
    while link != base_link:
        joint = parent_joint.get(link)
        if joint is None:
            raise UrdfError(f'tip link {tip_link!r} is not below base link {base_link!r}')
        path.append(joint)
        link = joint.parent
    return path[::-1]


def _joint(urdf_joint, origin: np.ndarray) -> Joint:
    axis = np.array([1.0, 0.0, 0.0] if urdf_joint.axis is None else urdf_joint.axis, dtype=float)
    norm = np.linalg.norm(axis)
    if not norm > 0.0:
        raise UrdfError(f'joint {urdf_joint.name!r} has a zero axis')
    reach = limits = CONTINUOUS_LIMITS
    speed = getattr(urdf_joint.limit, 'velocity', None)
    # velocity="0" (URDFs written for visualisation) gives no limit, nor does a non-finite one.
    speed = math.nan if speed is None else float(speed)
    velocity_limit = speed if math.isfinite(speed) and speed > 0.0 else None
    if urdf_joint.type in LIMITED_JOINT_TYPES:
        reach = _pair(urdf_joint, 'limit', urdf_joint.limit, 'lower', 'upper')
        limits = reach
        soft = urdf_joint.safety_controller
        if soft is not None and None not in (soft.soft_lower_limit, soft.soft_upper_limit):
            low, high = _pair(urdf_joint, 'safety_controller', soft, 'soft_lower_limit',
                              'soft_upper_limit')  # fmt: skip
            limits = (max(low, reach[0]), min(high, reach[1]))
    return Joint(
        name=urdf_joint.name,
        origin_xyz=_xyz(origin),
        axis=tuple(float(a) for a in axis / norm),
        limits=limits,
        reach=reach,
        origin_rpy=rpy_from_matrix(origin[:3, :3]),
        kind='prismatic' if urdf_joint.type == 'prismatic' else 'revolute',
        velocity_limit=velocity_limit,
        continuous=urdf_joint.type == 'continuous',
    )


def _pair(urdf_joint, element: str, values, low: str, high: str) -> tuple[float, float]:
    """(low, high) attributes of a joint's limit or safety_controller; UrdfError if not a range."""
    pair = (getattr(values, low, None), getattr(values, high, None))
    if None in pair:
        raise UrdfError(
            f'{urdf_joint.type} joint {urdf_joint.name!r} has no {element} {low} and {high}'
        )
    if not pair[0] < pair[1]:
        raise UrdfError(
            f'joint {urdf_joint.name!r}: {element} {low} {pair[0]} is not below {high} {pair[1]}'
        )
    return (float(pair[0]), float(pair[1]))


def _origin(urdf_joint) -> np.ndarray:
    return np.eye(4) if urdf_joint.origin is None else np.asarray(urdf_joint.origin, dtype=float)


def _matrix(xyz, rpy) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:3, :3] = rpy_matrix(rpy)
    matrix[:3, 3] = xyz
    return matrix


def _xyz(matrix: np.ndarray) -> tuple[float, float, float]:
    x, y, z = (float(v) for v in matrix[:3, 3])
    return (x, y, z)


def _one_line(error: Exception) -> str:
    return ' '.join(str(error).split()) or type(error).__name__
