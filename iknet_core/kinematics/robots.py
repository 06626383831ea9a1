"""Chains by name: the OM-X preset, and common arms whose URDFs the `example-robot-data` package
on PyPI installs (optional: `pip install "iknet[robots]"`); nothing third-party is shipped."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from iknet_core.kinematics.chain import CHAIN_PRESETS, Chain
from iknet_core.kinematics.urdf import chain_from_urdf

EXAMPLE_ROBOT_DATA = 'example-robot-data'


@dataclass(frozen=True)
class ExampleRobot:
    """An arm in example-robot-data: its URDF under the package's robots/ folder, and the links
    that bound the chain iknet solves for."""

    urdf: str
    base_link: str
    tip_link: str


EXAMPLE_ROBOTS = {
    'panda': ExampleRobot('panda_description/urdf/panda.urdf', 'panda_link0', 'panda_hand'),
    'ur5': ExampleRobot('ur_description/urdf/ur5_robot.urdf', 'base_link', 'tool0'),
    # SO-101's five arm joints; the gripper jaw hangs off gripper_link, outside the chain.
    'so101': ExampleRobot('so_arm_description/urdf/so101.urdf', 'base_link', 'gripper_frame_link'),
}


def example_robots_dir() -> Path | None:
    """example-robot-data's robots/ folder, or None when the package is not installed."""
    try:
        distribution = metadata.distribution(EXAMPLE_ROBOT_DATA)
    except metadata.PackageNotFoundError:
        return None
    for file in distribution.files or ():
        parts = file.parts
        if 'example-robot-data' in parts and 'robots' in parts:
            index = parts.index('robots')
            return Path(distribution.locate_file(Path(*parts[: index + 1])))
    return None


def example_robot_urdf(name: str) -> Path:
    """The installed URDF of an example robot; ValueError saying what to install otherwise."""
    robots = example_robots_dir()
    if robots is None:
        raise ValueError(
            f'robot {name!r} comes from the {EXAMPLE_ROBOT_DATA} package: '
            'pip install "iknet[robots]" (or pip install example-robot-data)'
        )
    return robots / EXAMPLE_ROBOTS[name].urdf


def named_chain(name: str) -> Chain:
    """A chain by name: an iknet preset (omx) or an example robot (panda, ur5, so101)."""
    if name in CHAIN_PRESETS:
        return CHAIN_PRESETS[name]
    if name in EXAMPLE_ROBOTS:
        robot = EXAMPLE_ROBOTS[name]
        return chain_from_urdf(example_robot_urdf(name), robot.base_link, robot.tip_link)
    raise ValueError(
        f'unknown chain {name!r}; known: {sorted([*CHAIN_PRESETS, *EXAMPLE_ROBOTS])}, '
        'or give a URDF'
    )
