"""Serial chain descriptions: the data every part needs to compute FK for an arm."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

Vec3 = tuple[float, float, float]


# What a joint does along its axis: turn about it (values in rad) or slide along it (m).
JOINT_KINDS = ('revolute', 'prismatic')


@dataclass(frozen=True)
class Joint:
    """A revolute or prismatic joint and the fixed transform from the previous joint frame to it.

    Its values (limits, reach, what the solvers return) are rad for a revolute joint, m for a
    prismatic one."""

    name: str
    origin_xyz: Vec3
    axis: Vec3
    limits: tuple[float, float]
    # Widest values the joint physically takes; hand-guided arms pass the software limits.
    reach: tuple[float, float]
    origin_rpy: Vec3 = (0.0, 0.0, 0.0)
    kind: str = 'revolute'
    # Fastest the joint may move (rad/s, m/s), the URDF limit's velocity; None: not given. Not
    # part of what makes two chains the same arm (a model trained before it was read still fits).
    velocity_limit: float | None = field(default=None, compare=False)
    # A URDF continuous joint: it turns without end. Its limits and reach are one turn (-pi, pi),
    # every pose it gives, but a path may carry it on past them (follow_path). Not part of what
    # makes two chains the same arm either (their poses are the same).
    continuous: bool = field(default=False, compare=False)

    @property
    def prismatic(self) -> bool:
        return self.kind == 'prismatic'

    @property
    def unit(self) -> str:
        """What its values are in: 'm' for a prismatic joint, 'rad' for a revolute one."""
        return 'm' if self.prismatic else 'rad'

    def __post_init__(self) -> None:
        if self.velocity_limit is not None and not self.velocity_limit > 0.0:
            raise ValueError(
                f'joint {self.name!r}: velocity_limit must be > 0 or None, got '
                f'{self.velocity_limit}'
            )
        if self.kind not in JOINT_KINDS:
            raise ValueError(
                f'joint {self.name!r}: kind {self.kind!r} is not one of {list(JOINT_KINDS)}'
            )
        norm = math.sqrt(sum(a * a for a in self.axis))
        if not math.isclose(norm, 1.0, abs_tol=1e-9):
            raise ValueError(f'joint {self.name!r}: axis {self.axis} is not a unit vector')
        for label, (low, high) in (('limits', self.limits), ('reach', self.reach)):
            if not low < high:
                raise ValueError(f'joint {self.name!r}: {label} {(low, high)} are not increasing')
            # A path carries a continuous joint past its limits: they must not stop it short.
            if self.continuous and (self.prismatic or high - low < 2.0 * math.pi - 1e-9):
                raise ValueError(
                    f'joint {self.name!r}: a continuous joint is revolute, its {label} a whole '
                    f'turn, got {self.kind} {(low, high)}'
                )


@dataclass(frozen=True)
class Chain:
    """A serial chain of revolute and prismatic joints from a base frame to a fixed tip frame."""

    name: str
    base_frame: str
    tip_frame: str
    joints: tuple[Joint, ...]
    tip_xyz: Vec3
    tip_rpy: Vec3 = field(default=(0.0, 0.0, 0.0))

    @property
    def joint_names(self) -> list[str]:
        return [joint.name for joint in self.joints]

    @property
    def n_joints(self) -> int:
        return len(self.joints)

    @property
    def stretched_length(self) -> float:
        """The arm stretched out (m): the sum of its link offsets, slides at zero. A length
        scale for tool motion against joint motion, and for what a network sees of a target."""
        offsets = [joint.origin_xyz for joint in self.joints] + [self.tip_xyz]
        return sum(math.hypot(*offset) for offset in offsets)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form, stored in checkpoints and recording metadata."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Chain:
        try:
            joints = tuple(
                Joint(
                    name=str(j['name']),
                    origin_xyz=_vec3(j['origin_xyz']),
                    axis=_vec3(j['axis']),
                    limits=_pair(j['limits']),
                    reach=_pair(j['reach']),
                    origin_rpy=_vec3(j.get('origin_rpy', (0.0, 0.0, 0.0))),
                    # Chains saved before prismatic joints: every joint revolute.
                    kind=str(j.get('kind', 'revolute')),
                    velocity_limit=_optional_float(j.get('velocity_limit')),
                    continuous=_flag(j.get('continuous', False)),
                )
                for j in data['joints']
            )
            return cls(
                name=str(data['name']),
                base_frame=str(data['base_frame']),
                tip_frame=str(data['tip_frame']),
                joints=joints,
                tip_xyz=_vec3(data['tip_xyz']),
                tip_rpy=_vec3(data.get('tip_rpy', (0.0, 0.0, 0.0))),
            )
        except (KeyError, TypeError) as error:
            raise ValueError(f'invalid chain description: {error!r}') from error


def _vec3(values: Any) -> Vec3:
    x, y, z = (float(v) for v in values)
    return (x, y, z)


def _flag(value: Any) -> bool:
    """A JSON true or false; TypeError for anything else (bool('false') is True)."""
    if not isinstance(value, bool):
        raise TypeError(f'expected true or false, got {value!r}')
    return value


def _optional_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _pair(values: Any) -> tuple[float, float]:
    low, high = (float(v) for v in values)
    return (low, high)


_Z = (0.0, 0.0, 1.0)
_Y = (0.0, 1.0, 0.0)

# ROBOTIS OpenManipulator-X as its legacy controller reports /kinematics_pose (../shared/FACTS.md).
# reach = software limits widened to what hand-guided recordings reached.
OMX_CHAIN = Chain(
    name='open_manipulator_x',
    base_frame='world',
    tip_frame='end_effector_link',
    joints=(
        Joint('joint1', (0.012, 0.0, 0.017), _Z, (-math.pi, math.pi), (-math.pi, 3.30)),
        Joint('joint2', (0.0, 0.0, 0.0595), _Y, (-1.5, 1.5), (-1.5, 1.5)),
        Joint('joint3', (0.024, 0.0, 0.128), _Y, (-1.5, 1.4), (-1.81, 1.49)),
        Joint('joint4', (0.124, 0.0, 0.0), _Y, (-1.7, 1.97), (-1.8, 2.12)),
    ),
    tip_xyz=(0.126, 0.0, 0.0),
)

# The joint ranges (rad, in OMX_CHAIN's joint order) real hand-guided OM-X recordings reach
# (../shared/FACTS.md): past the software limits, joint1 past pi, joint2 only up to 0.76.
OMX_HAND_GUIDED_RANGES = ((-2.83, 3.29), (-1.48, 0.76), (-1.80, 1.48), (-1.79, 2.11))

CHAIN_PRESETS = {OMX_CHAIN.name: OMX_CHAIN, 'omx': OMX_CHAIN}


def model_chain_for(asked: Chain | None, model_chain: Chain, model: object) -> Chain:
    """The chain a model was trained for; ValueError naming both, and where they differ, when
    another arm was asked. The asked one where given: the same arm, with what does not tell
    arms apart (velocity limits, continuous marks) as asked."""
    if asked is not None and asked != model_chain:
        if asked.name == model_chain.name:  # the same name and joints, another base or tip
            asked_for = f'not the {asked.name!r} asked for, which has the same name'
        else:
            asked_for = f'not {asked.name!r} ({asked.joint_names})'
        raise ValueError(
            f'{model} was trained for chain {model_chain.name!r} ({model_chain.joint_names}), '
            f'{asked_for}: they differ in {chain_difference(model_chain, asked)}'
        )
    return model_chain if asked is None else asked


def chain_difference(a: Chain, b: Chain) -> str:
    """The first field in which two chains differ, a's value then b's: what tells two arms
    apart whose names read the same (a URDF that changed a length or a limit)."""
    if a.joint_names != b.joint_names:
        return f'joints {a.joint_names} vs {b.joint_names}'
    pairs = [(f'{x.name} ', x, y) for x, y in zip(a.joints, b.joints, strict=True)]
    for where, x, y in [*pairs, ('', a, b)]:
        for item in fields(x):
            if item.compare and item.name != 'joints':
                first, second = getattr(x, item.name), getattr(y, item.name)
                if first != second:
                    return f'{where}{item.name} {first!r} vs {second!r}'
    return 'no difference found'


def chain_preset(name: str) -> Chain:
    """Look up a chain shipped with iknet by name."""
    try:
        return CHAIN_PRESETS[name]
    except KeyError:
        raise ValueError(f'unknown chain {name!r}; known: {sorted(CHAIN_PRESETS)}') from None
