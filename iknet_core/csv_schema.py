"""The two CSV files of a recording, as `ros2 topic echo --csv` plus a header line makes them.

The recorder writes these and the data loader reads them, so files from either source mix freely.
Files straight from `ros2 topic echo --csv` (no header line) are recognised by their layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

KINEMATICS_POSE_FILE = 'kinematics_pose.csv'
JOINT_STATES_FILE = 'joint_states.csv'
METADATA_FILE = 'metadata.json'

STAMP_COLUMNS = ('sec', 'nanosec')
POSITION_COLUMNS = ('position_x', 'position_y', 'position_z')
ORIENTATION_COLUMNS = ('orientation_x', 'orientation_y', 'orientation_z', 'orientation_w')
POSE_COLUMNS = POSITION_COLUMNS + ORIENTATION_COLUMNS

KINEMATICS_POSE_COLUMNS = (
    *STAMP_COLUMNS,
    'frame_id',
    *POSE_COLUMNS,
    'max_accelerations_scaling_factor',
    'max_velocity_scaling_factor',
    'tolerance',
)

JOINT_STATE_BLOCKS = ('name', 'position', 'velocity', 'effort')


def joint_states_columns(n_joints: int) -> tuple[str, ...]:
    """Header of joint_states.csv for messages of n_joints entries (5 on an OM-X with gripper)."""
    if n_joints < 1:
        raise ValueError(f'a joint state needs at least one joint, got {n_joints}')
    blocks = (f'{block}{i}' for block in JOINT_STATE_BLOCKS for i in range(n_joints))
    return (*STAMP_COLUMNS, 'frame_id', *blocks)


def joint_count_from_columns(columns: list[str] | tuple[str, ...]) -> int:
    """How many joints a joint_states.csv header describes; ValueError naming what is off."""
    n_joints = sum(1 for column in columns if column.startswith('name') and column[4:].isdigit())
    if n_joints == 0:
        raise ValueError('no name0, name1, ... columns')
    expected = joint_states_columns(n_joints)
    if tuple(columns) != expected:
        missing = [c for c in expected if c not in columns]
        extra = [c for c in columns if c not in expected]
        raise ValueError(
            f'header does not match {n_joints} joints: missing {missing or "none"}, '
            f'unexpected {extra or "none"}'
        )
    return n_joints


def is_text_column(column: str) -> bool:
    """frame_id and the joint names hold text; every other column of both files holds numbers."""
    return column == 'frame_id' or (column.startswith('name') and column[4:].isdigit())


def is_number(text: str) -> bool:
    """A finite number, as `ros2 topic echo --csv` prints floats and integers."""
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def is_data_line(fields: Sequence[str]) -> bool:
    """Whether a first line holds values rather than column names (a header has no numbers)."""
    return any(is_number(field) for field in fields)


KINEMATICS_POSE_LAYOUT = (
    f'{len(KINEMATICS_POSE_COLUMNS)} fields: sec and nanosec (integers), frame_id, then '
    f'{len(KINEMATICS_POSE_COLUMNS) - 3} numbers (position x y z, orientation x y z w, '
    'max_accelerations_scaling_factor, max_velocity_scaling_factor, tolerance)'
)
JOINT_STATES_LAYOUT = (
    '3 + 4n fields for n joints: sec and nanosec (integers), frame_id, n names, then '
    'n positions, n velocities and n efforts (numbers)'
)


def headerless_kinematics_pose_columns(fields: Sequence[str]) -> tuple[str, ...]:
    """Header for a first line that is a stamped KinematicsPose; ValueError says what is not."""
    n_unstamped = len(KINEMATICS_POSE_COLUMNS) - len(STAMP_COLUMNS) - 1
    if len(fields) == n_unstamped and all(map(is_number, fields)):
        found = (
            f'{n_unstamped} numbers and no stamps, a KinematicsPose without std_msgs/Header: '
            'poses need stamps to be paired with joint states, so record with the '
            'open_manipulator_msgs fork that adds the header, or with `ros2 run iknet recorder` '
            '(it stamps poses on receipt)'
        )
    else:
        found = _layout_problem(fields, KINEMATICS_POSE_COLUMNS)
        if found is None:
            return KINEMATICS_POSE_COLUMNS
    raise ValueError(f'{found}; expected a stamped KinematicsPose, {KINEMATICS_POSE_LAYOUT}')


def headerless_joint_states_columns(fields: Sequence[str]) -> tuple[str, ...]:
    """Header for a first line that is a JointState of n joints; ValueError says what is not.

    Only the full layout is read. `ros2 topic echo --csv` prints an empty array as one empty
    field, so a message without velocities or efforts has another width, and one without only
    one of the two does not show which; a position-only file is named as such in the error.
    """
    n_joints, remainder = divmod(len(fields) - 3, 4)
    if remainder == 0 and n_joints >= 1:
        columns = joint_states_columns(n_joints)
        problem = _layout_problem(fields, columns)
        if problem is None:
            return columns
        found = f'{len(fields)} fields, so {n_joints} joints, but {problem}'
    else:
        found = f'{len(fields)} fields, which is not 3 + 4n'
    hint = ''
    n_names = next((i for i, text in enumerate(fields[3:]) if is_number(text)), len(fields) - 3)
    positions = fields[3 + n_names : 3 + 2 * n_names]
    if (
        n_names >= 1
        and len(fields) == 3 + 2 * n_names + 2
        and all(map(is_number, positions))
        and fields[-2:] == ['', '']
    ):
        found = (
            f'{len(fields)} fields: {n_names} names, {n_names} positions and empty velocity '
            'and effort arrays'
        )
        hint = f'; prepend the header line {",".join(joint_states_columns(n_names))} to read it'
    raise ValueError(f'{found}; expected a JointState, {JOINT_STATES_LAYOUT}{hint}')


def _layout_problem(fields: Sequence[str], columns: Sequence[str]) -> str | None:
    """What keeps fields from being a row under columns, or None when they are one."""
    if len(fields) != len(columns):
        return f'{len(fields)} fields'
    for column, text in zip(columns, fields, strict=True):
        if column == 'frame_id':
            continue  # any text, usually empty
        if column in STAMP_COLUMNS:
            fits, kind = text.isascii() and text.isdigit(), 'an integer'
        elif is_text_column(column):
            fits, kind = not is_number(text), 'a name'
        else:
            fits, kind = is_number(text), 'a number'
        if not fits:
            return f'{column} is {text!r}, not {kind}'
    return None


def format_value(value: float | int | str) -> str:
    """Field text as `ros2 topic echo --csv` writes it; floats keep full precision."""
    if isinstance(value, float):
        return repr(value)
    return str(value)
