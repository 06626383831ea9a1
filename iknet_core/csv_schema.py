"""The two CSV files of a recording, as `ros2 topic echo --csv` plus a header line makes them.

The recorder writes these and the data loader reads them, so files from either source mix freely.
"""

from __future__ import annotations

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


def format_value(value: float | int | str) -> str:
    """Field text as `ros2 topic echo --csv` writes it; floats keep full precision."""
    if isinstance(value, float):
        return repr(value)
    return str(value)
