"""Recordings from CSV: pairing by stamp, name-based joints, and errors that say what is wrong."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iknet_core.csv_schema import JOINT_STATES_FILE, KINEMATICS_POSE_FILE
from iknet_core.kinematics import OMX_CHAIN, pose_from_joints
from iknet_train.data import (
    Recording,
    drop_repeats,
    find_recordings,
    load_recording,
    time_block_split,
)
from iknet_train.synthetic import sample_joints, write_recording

PERIOD_NS = 10_000_000  # 100 Hz
START_NS = 1_700_000_000 * 1_000_000_000


def recording_files(
    directory: Path, n: int = 100, seed: int = 0, joint_offset_ns: int = 50_000
) -> tuple[Path, Path, np.ndarray]:
    """A 100 Hz recording of random joints; joint states stamped 50 us after the poses."""
    joints = sample_joints(
        n, np.array([j.reach for j in OMX_CHAIN.joints]), np.random.default_rng(seed)
    )
    stamps = START_NS + PERIOD_NS * np.arange(n)
    pose_csv, joint_csv = write_recording(
        directory, stamps, joints, OMX_CHAIN, {'gripper': 0.01}, stamps + joint_offset_ns
    )
    return pose_csv, joint_csv, joints


def drop_rows(path: Path, rows: list[int]) -> None:
    """Remove data rows (0-based, after the header) as if those messages were lost."""
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(''.join(line for i, line in enumerate(lines) if i - 1 not in rows))


def edit_cell(path: Path, row: int, column: str, value: str) -> None:
    table = pd.read_csv(path, dtype=str, keep_default_na=False)
    table.loc[row, column] = value
    table.to_csv(path, index=False)


def test_pairs_by_stamp_with_messages_dropped_on_either_side(tmp_path: Path) -> None:
    pose_csv, joint_csv, joints = recording_files(tmp_path)
    drop_rows(pose_csv, [10, 11, 50])
    drop_rows(joint_csv, [20, 70])

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert len(recording) == 95
    assert recording.dropped_poses == 2  # poses 20 and 70 lost their joint states
    assert recording.dropped_joint_states == 3  # joint states 10, 11 and 50 lost their poses
    kept = [i for i in range(100) if i not in (10, 11, 50, 20, 70)]
    np.testing.assert_allclose(recording.joints, joints[kept], atol=1e-12)
    np.testing.assert_allclose(
        recording.poses, pose_from_joints(OMX_CHAIN, joints[kept]), atol=1e-9
    )
    assert np.all(np.diff(recording.stamps) > 0)


def test_row_index_pairing_would_be_wrong_but_stamp_pairing_is_not(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path)
    drop_rows(joint_csv, [0])  # the first joint state is lost: every index pair is off by one

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    position = pose_from_joints(OMX_CHAIN, recording.joints)[:, :3]
    assert np.abs(position - recording.poses[:, :3]).max() < 1e-9


def test_joints_are_found_by_name_and_the_gripper_left_out(tmp_path: Path) -> None:
    pose_csv, joint_csv, joints = recording_files(tmp_path)
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    # Messages list the gripper first and the arm joints in reverse order.
    order = [4, 3, 2, 1, 0]
    for block in ('name', 'position', 'velocity', 'effort'):
        table[[f'{block}{i}' for i in range(5)]] = table[[f'{block}{i}' for i in order]].to_numpy()
    table.to_csv(joint_csv, index=False)

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert recording.joints.shape == (100, 4)
    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)


def test_finds_recordings_in_directories_and_globs(tmp_path: Path) -> None:
    for name in ('a', 'b', 'nested/c'):
        recording_files(tmp_path / 'data' / name, n=5)

    assert len(find_recordings([tmp_path / 'data'])) == 3
    assert len(find_recordings([str(tmp_path / 'data' / '[ab]')])) == 2
    with pytest.raises(FileNotFoundError, match='no files match'):
        find_recordings([str(tmp_path / 'nothing*')])
    (tmp_path / 'lonely').mkdir()
    (tmp_path / 'lonely' / KINEMATICS_POSE_FILE).write_text('')
    with pytest.raises(FileNotFoundError, match=f'no {JOINT_STATES_FILE} beside it'):
        find_recordings([tmp_path / 'lonely'])


def _missing_column(pose_csv: Path, joint_csv: Path) -> None:
    table = pd.read_csv(pose_csv, dtype=str, keep_default_na=False)
    table.drop(columns=['position_z']).to_csv(pose_csv, index=False)


def _renamed_column(pose_csv: Path, joint_csv: Path) -> None:
    table = pd.read_csv(pose_csv, dtype=str, keep_default_na=False)
    table.rename(columns={'orientation_w': 'qw'}).to_csv(pose_csv, index=False)


def _renamed_joint_column(pose_csv: Path, joint_csv: Path) -> None:
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    table.rename(columns={'position2': 'pos2'}).to_csv(joint_csv, index=False)


def _no_name_columns(pose_csv: Path, joint_csv: Path) -> None:
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    table.drop(columns=[f'name{i}' for i in range(5)]).to_csv(joint_csv, index=False)


def _nan_pose(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(pose_csv, 3, 'position_x', 'nan')


def _inf_joint(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(joint_csv, 7, 'position1', 'inf')


def _text_in_number(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(pose_csv, 2, 'sec', 'abc')


def _empty_file(pose_csv: Path, joint_csv: Path) -> None:
    joint_csv.write_text('')


def _header_only(pose_csv: Path, joint_csv: Path) -> None:
    pose_csv.write_text(pose_csv.read_text().splitlines()[0] + '\n')


def _non_monotonic(pose_csv: Path, joint_csv: Path) -> None:
    lines = joint_csv.read_text().splitlines(keepends=True)
    lines[5], lines[6] = lines[6], lines[5]
    joint_csv.write_text(''.join(lines))


def _no_overlap(pose_csv: Path, joint_csv: Path) -> None:
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    table['sec'] = (table['sec'].astype(int) + 3600).astype(str)
    table.to_csv(joint_csv, index=False)


def _bad_quaternion(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(pose_csv, 4, 'orientation_w', '3.0')


def _missing_joint(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(joint_csv, 9, 'name2', 'elbow')


BAD_FILES = {
    'missing column': (_missing_column, 'pose', r"missing column\(s\) \['position_z'\]"),
    'renamed column': (_renamed_column, 'pose', r"missing column\(s\) \['orientation_w'\].*'qw'"),
    'renamed joint column': (
        _renamed_joint_column,
        'joint',
        r"missing column\(s\) \['position2'\]",
    ),
    'no name columns': (_no_name_columns, 'joint', 'no name0, name1'),
    'NaN': (_nan_pose, 'pose', r"line 5, column 'position_x': 'nan' is not a finite number"),
    'inf': (_inf_joint, 'joint', r"line 9, column 'position1': 'inf' is not a finite number"),
    'text': (_text_in_number, 'pose', r"line 4, column 'sec': 'abc' is not a finite number"),
    'empty file': (_empty_file, 'joint', 'empty file'),
    'header only': (_header_only, 'pose', 'no data rows'),
    'non-monotonic stamps': (_non_monotonic, 'joint', 'stamps are not monotonic: line 7'),
    'no overlap': (_no_overlap, 'both', 'no overlap in time'),
    'not a unit quaternion': (_bad_quaternion, 'pose', 'line 6.*quaternion norm'),
    'joint missing from names': (_missing_joint, 'joint', "line 11: joint 'joint3' is missing"),
}


@pytest.mark.parametrize('case', BAD_FILES, ids=list(BAD_FILES))
def test_bad_files_get_an_error_naming_file_place_and_problem(tmp_path: Path, case: str) -> None:
    spoil, culprit, message = BAD_FILES[case]
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    spoil(pose_csv, joint_csv)

    with pytest.raises(ValueError, match=message) as raised:
        load_recording(pose_csv, joint_csv, OMX_CHAIN)

    text = str(raised.value)
    if culprit in ('pose', 'both'):
        assert str(pose_csv) in text
    if culprit in ('joint', 'both'):
        assert str(joint_csv) in text


def make_recording(n: int, period_s: float = 0.01) -> Recording:
    return Recording(
        source='test',
        stamps=100.0 + period_s * np.arange(n),
        poses=np.zeros((n, 7)),
        joints=np.zeros((n, 4)),
    )


def test_time_block_split_keeps_each_block_on_one_side() -> None:
    recordings = [make_recording(10_000), make_recording(3_000)]  # 100 s and 30 s

    train, val = time_block_split(recordings, train_ratio=0.8, block_s=5.0, seed=1)

    assert train.shape == (13_000,) and np.all(train ^ val)
    assert 0.7 < train.mean() < 0.9
    for mask, recording in zip(np.split(val, [10_000]), recordings, strict=True):
        blocks = ((recording.stamps - recording.stamps[0]) // 5.0).astype(int)
        for block in np.unique(blocks):
            assert len(np.unique(mask[blocks == block])) == 1
        assert mask.any() and not mask.all()


def test_drop_repeats_removes_rest_rows_only() -> None:
    recording = make_recording(6)
    recording.joints[:, 0] = [0.0, 0.0, 0.0, 0.5, 0.5, 0.2]

    kept = drop_repeats(recording)

    np.testing.assert_array_equal(kept.joints[:, 0], [0.0, 0.5, 0.2])
    np.testing.assert_array_equal(kept.stamps, recording.stamps[[0, 3, 5]])
