"""Recordings from CSV: pairing by stamp, name-based joints, and errors that say what is wrong."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iknet_core.csv_schema import (
    JOINT_STATES_FILE,
    KINEMATICS_POSE_COLUMNS,
    KINEMATICS_POSE_FILE,
    METADATA_FILE,
    joint_states_columns,
)
from iknet_core.kinematics import OMX_CHAIN, pose_from_joints
from iknet_train.data import (
    Recording,
    drop_repeats,
    find_recordings,
    load_recording,
    load_recordings,
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


def test_a_recording_that_loses_most_of_its_poses_gets_a_warning(tmp_path: Path, caplog) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, joint_offset_ns=1_500_000)
    drop_rows(joint_csv, list(range(0, 100, 3)))  # a third of the joint states lost
    with caplog.at_level(logging.INFO):
        recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert recording.dropped_poses == 34
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warned and 'dropped 34 of 100 poses' in warned[0].getMessage()
    assert 'stamps from two clocks, or a lag between the topics?' in warned[0].getMessage()


def test_joints_beyond_the_chains_reach_get_a_warning(tmp_path: Path, caplog) -> None:
    # Another arm whose joints share the OM-X's names (an xArm's joint1..joint4): FK-made poses
    # match FK, so only the joints give it away.
    pose_csv, joint_csv, _ = recording_files(tmp_path)
    for row in (3, 4, 5):
        edit_cell(joint_csv, row, 'position3', '2.74')  # joint4's reach ends at 2.12
    load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert (
        '3 of 100 rows have joints beyond the reach of open_manipulator_x (joint4 up to 2.740'
        in (caplog.text)
    )


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


def test_a_column_another_row_leaves_empty_is_read_where_it_holds_a_chain_joint(
    tmp_path: Path,
) -> None:
    # Rows with the gripper last and its value empty (the recorder had none), then rows in
    # another order with an arm joint in that column: each row is read by its own names.
    pose_csv, joint_csv, joints = recording_files(tmp_path)
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    assert (table['name4'] == 'gripper').all()
    table.loc[:49, 'position4'] = ''
    order = [4, 3, 2, 1, 0]
    for block in ('name', 'position', 'velocity', 'effort'):
        columns = [f'{block}{i}' for i in range(5)]
        table.loc[50:, columns] = table.loc[50:, [f'{block}{i}' for i in order]].to_numpy()
    table.to_csv(joint_csv, index=False)

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)


def test_joints_in_degrees_or_of_another_arm_get_a_warning(tmp_path: Path, caplog) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path)
    with caplog.at_level(logging.WARNING):
        load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert 'misses the recorded positions' not in caplog.text  # FK of the arm's own joints
    assert 'pairs miss FK' not in caplog.text
    table = pd.read_csv(joint_csv, dtype=str, keep_default_na=False)
    # A few rows of another arm's joints (a second simulator on the topic): those pairs only.
    moved = table.copy()
    moved.loc[10:12, 'position0'] = (moved.loc[10:12, 'position0'].astype(float) + 2.0).map(repr)
    moved.to_csv(joint_csv, index=False)
    with caplog.at_level(logging.WARNING):
        load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert '3 of 100 pairs miss FK of their joints by more than' in caplog.text, caplog.text
    assert 'two publishers on a topic' in caplog.text
    for i in range(4):  # the arm's joints in degrees
        table[f'position{i}'] = (table[f'position{i}'].astype(float) * 180 / np.pi).map(repr)
    table.to_csv(joint_csv, index=False)
    with caplog.at_level(logging.WARNING):
        recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert len(recording) == 100  # read, and said
    assert 'FK of the recorded joints on open_manipulator_x misses the recorded' in caplog.text
    assert 'are the joints in rad' in caplog.text


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
    with pytest.raises(FileNotFoundError, match='missing: no such recording directory'):
        find_recordings([tmp_path / 'missing'])


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


def _blank_lines_before_a_bad_value(pose_csv: Path, joint_csv: Path) -> None:
    lines = joint_csv.read_text().splitlines(keepends=True)
    fields = lines[8].split(',')
    fields[9] = 'inf'  # position1 on line 9, line 11 once two blank lines come before it
    lines[8] = ','.join(fields)
    lines[2:2] = ['\n', '  \n']  # one holds spaces
    joint_csv.write_text(''.join(lines))


def _fractional_sec(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(joint_csv, 3, 'sec', '1700000000.933752')  # some tools write the stamp so


def _nanosec_over_a_second(pose_csv: Path, joint_csv: Path) -> None:
    edit_cell(pose_csv, 2, 'nanosec', '1500000000')


def _header_of_more_joints(pose_csv: Path, joint_csv: Path) -> None:
    # A 5-joint header (a gripper) put over rows of 4 joints: the columns slid by one entry.
    lines = [','.join(joint_states_columns(5)) + '\n']
    for line in joint_csv.read_text().splitlines()[1:]:
        fields = line.split(',')  # the gripper is entry 4 of each block: left out
        lines.append(','.join(fields[:7] + fields[8:12] + fields[13:17] + fields[18:22]) + '\n')
    joint_csv.write_text(''.join(lines))


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
    'blank lines': (
        _blank_lines_before_a_bad_value,
        'joint',
        r"line 11, column 'position1': 'inf' is not a finite number",
    ),
    'fractional sec': (
        _fractional_sec,
        'joint',
        r"line 5, column 'sec': '1700000000.933752' is not a stamp's sec \(a whole number",
    ),
    'nanosec over a second': (
        _nanosec_over_a_second,
        'pose',
        r"line 4, column 'nanosec': '1500000000' is not a stamp's nanosec",
    ),
    'header of more joints than the rows': (
        _header_of_more_joints,
        'joint',
        r"line 2, column 'name4': '.*' is a number where a joint name belongs",
    ),
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


def test_poses_stamped_on_receipt_pair_with_the_joint_state_just_before(tmp_path: Path) -> None:
    """ROBOTIS's KinematicsPose has no header: the recorder stamps it on receipt, after the
    joint state published with it (its header's stamp) by the transport's lag."""
    # Received 7 ms later: nearer the next joint state (3 ms after) than its own.
    _, _, joints = recording_files(tmp_path, joint_offset_ns=-7_000_000)
    with pytest.raises(ValueError, match=r'no pose .* has a joint state .* within 2 ms'):
        load_recording(tmp_path / KINEMATICS_POSE_FILE, tmp_path / JOINT_STATES_FILE, OMX_CHAIN)
    (tmp_path / METADATA_FILE).write_text(json.dumps({'pose_stamp': 'receipt'}))
    recording = load_recording(
        tmp_path / KINEMATICS_POSE_FILE, tmp_path / JOINT_STATES_FILE, OMX_CHAIN
    )
    assert len(recording) == 100 and recording.dropped_poses == 0
    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)


def test_time_block_split_draws_from_the_blocks_that_hold_samples() -> None:
    # Three samples stamped by a clock at 0 before the others: a million empty blocks between.
    gap = make_recording(10_000)  # 100 s
    stamps = np.concatenate([[0.0, 0.01, 0.02], gap.stamps[3:] + 1e6])
    gap = dataclasses.replace(gap, stamps=stamps)

    train, val = time_block_split([gap], train_ratio=0.8, block_s=1.0, seed=0)

    assert np.all(train ^ val)
    blocks = (stamps - stamps[0]) // 1.0
    held = np.unique(blocks)
    assert len(np.unique(blocks[val])) == round(0.2 * len(held))  # of the 101 that hold samples


def test_time_block_split_joins_a_short_last_block_to_the_one_before() -> None:
    # 20 s and one sample at 100 Hz in 10 s blocks: blocks of 1,000, 1,000 and 1 rows.
    recording = make_recording(2_001)
    for seed in range(8):
        _, val = time_block_split([recording], train_ratio=0.5, block_s=10.0, seed=seed)
        assert val.sum() in (1_000, 1_001), seed  # never the lone last sample


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


def strip_header(path: Path) -> None:
    """The file as `ros2 topic echo --csv > file` leaves it, before sed adds the header."""
    path.write_text(''.join(path.read_text().splitlines(keepends=True)[1:]))


def rewrite_rows(
    path: Path, edit: Callable[[list[str]], list[str]], header: str | None = None
) -> None:
    """Every data row's fields through edit; header None: no header line."""
    lines = path.read_text().splitlines()[1:]
    rows = [','.join(edit(line.split(','))) for line in lines]
    path.write_text(''.join(f'{line}\n' for line in ([header] if header else []) + rows))


@pytest.mark.parametrize('headerless', ['pose', 'joint', 'both'])
def test_reads_ros2_topic_echo_output_without_header_line(
    tmp_path: Path, headerless: str, caplog: pytest.LogCaptureFixture
) -> None:
    pose_csv, joint_csv, joints = recording_files(tmp_path)
    expected = load_recording(pose_csv, joint_csv, OMX_CHAIN)
    if headerless in ('pose', 'both'):
        strip_header(pose_csv)
    if headerless in ('joint', 'both'):
        strip_header(joint_csv)
    caplog.set_level(logging.INFO, logger='iknet_train.data')

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    np.testing.assert_array_equal(recording.joints, expected.joints)
    np.testing.assert_array_equal(recording.poses, expected.poses)
    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)
    assert not recording.cut_short
    notes = [r.getMessage() for r in caplog.records if 'no header line' in r.getMessage()]
    expected_notes = []
    if headerless in ('pose', 'both'):
        expected_notes.append(
            f'{pose_csv}: no header line; read as `ros2 topic echo --csv` output of a stamped '
            'KinematicsPose (13 fields)'
        )
    if headerless in ('joint', 'both'):
        expected_notes.append(
            f'{joint_csv}: no header line; read as `ros2 topic echo --csv` output of a '
            'JointState of 5 joints (23 fields)'
        )
    assert notes == expected_notes


def test_headerless_files_with_a_frame_id_and_four_joints(tmp_path: Path) -> None:
    joints = sample_joints(
        20, np.array([j.reach for j in OMX_CHAIN.joints]), np.random.default_rng(3)
    )
    stamps = START_NS + PERIOD_NS * np.arange(20)
    pose_csv, joint_csv = write_recording(tmp_path, stamps, joints, OMX_CHAIN)  # no gripper
    for path in (pose_csv, joint_csv):
        rewrite_rows(path, lambda fields: [*fields[:2], 'world', *fields[3:]])

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)


def test_headerless_line_numbers_are_file_lines(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    edit_cell(pose_csv, 3, 'position_x', 'nan')
    strip_header(pose_csv)

    with pytest.raises(ValueError, match=r"line 4, column 'position_x': 'nan'"):
        load_recording(pose_csv, joint_csv, OMX_CHAIN)


NOT_ECHO = 'no header line (line 1 holds values) and line 1 is not `ros2 topic echo --csv` output'
POSE_LAYOUT = (
    'expected a stamped KinematicsPose, 13 fields: sec and nanosec (integers), frame_id, then '
    '10 numbers (position x y z, orientation x y z w, max_accelerations_scaling_factor, '
    'max_velocity_scaling_factor, tolerance)'
)
JOINT_LAYOUT = (
    'expected a JointState, 3 + 4n fields for n joints: sec and nanosec (integers), frame_id, '
    'n names, then n positions, n velocities and n efforts (numbers)'
)
FIVE_JOINT_HEADER = ','.join(joint_states_columns(5))


def _unstamped_poses(pose_csv: Path, joint_csv: Path) -> None:
    rewrite_rows(pose_csv, lambda fields: fields[3:])  # KinematicsPose without a Header


def _text_in_headerless_pose(pose_csv: Path, joint_csv: Path) -> None:
    rewrite_rows(pose_csv, lambda fields: [*fields[:3], 'abc', *fields[4:]])


def _position_only_joint_states(pose_csv: Path, joint_csv: Path) -> None:
    # ros2 topic echo --csv prints an empty velocity or effort array as one empty field.
    rewrite_rows(joint_csv, lambda fields: [*fields[:13], '', ''])


def _joint_states_missing_a_field(pose_csv: Path, joint_csv: Path) -> None:
    rewrite_rows(joint_csv, lambda fields: fields[:-1])


def _number_for_a_joint_name(pose_csv: Path, joint_csv: Path) -> None:
    rewrite_rows(joint_csv, lambda fields: [*fields[:3], '1', *fields[4:]])


def _files_swapped(pose_csv: Path, joint_csv: Path) -> None:
    text = joint_csv.read_text()
    joint_csv.write_text(pose_csv.read_text())
    pose_csv.write_text(text)
    strip_header(pose_csv)


HEADERLESS_BAD = {
    'KinematicsPose without stamps': (
        _unstamped_poses,
        'pose',
        '10 numbers and no stamps, a KinematicsPose without std_msgs/Header: poses need stamps '
        'to be paired with joint states, so record with the open_manipulator_msgs fork that adds '
        'the header, or with `ros2 run iknet recorder` (it stamps poses on receipt); '
        + POSE_LAYOUT,
    ),
    'text for a number': (
        _text_in_headerless_pose,
        'pose',
        "position_x is 'abc', not a number; " + POSE_LAYOUT,
    ),
    'position-only joint states': (
        _position_only_joint_states,
        'joint',
        '15 fields: 5 names, 5 positions and empty velocity and effort arrays; '
        f'{JOINT_LAYOUT}; prepend the header line {FIVE_JOINT_HEADER} to read it',
    ),
    'a field missing': (
        _joint_states_missing_a_field,
        'joint',
        f'22 fields, which is not 3 + 4n; {JOINT_LAYOUT}',
    ),
    'number for a name': (
        _number_for_a_joint_name,
        'joint',
        f"23 fields, so 5 joints, but name0 is '1', not a name; {JOINT_LAYOUT}",
    ),
    'files swapped': (_files_swapped, 'pose', f'23 fields; {POSE_LAYOUT}'),
}


@pytest.mark.parametrize('case', HEADERLESS_BAD, ids=list(HEADERLESS_BAD))
def test_headerless_files_of_other_layouts_get_an_error_saying_what_is_expected(
    tmp_path: Path, case: str
) -> None:
    spoil, culprit, problem = HEADERLESS_BAD[case]
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    spoil(pose_csv, joint_csv)
    path = pose_csv if culprit == 'pose' else joint_csv

    with pytest.raises(ValueError) as raised:
        load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert str(raised.value) == f'{path}: {NOT_ECHO} this tool reads: {problem}'


def test_position_only_joint_states_read_under_the_full_header(tmp_path: Path) -> None:
    """The fix the error above suggests works: short rows under the header, none dropped."""
    pose_csv, joint_csv, joints = recording_files(tmp_path, n=20)
    rewrite_rows(joint_csv, lambda fields: [*fields[:13], '', ''], header=FIVE_JOINT_HEADER)

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert len(recording) == 20 and not recording.cut_short
    np.testing.assert_allclose(recording.joints, joints, atol=1e-12)


def cut_last_line(path: Path, keep: int | None = None, newline: bool = False) -> None:
    """The file as a kill leaves it: its last line cut after keep characters (default half)."""
    lines = path.read_text().splitlines()
    keep = len(lines[-1]) // 2 if keep is None else keep
    lines[-1] = lines[-1][:keep]
    path.write_text('\n'.join(lines) + ('\n' if newline else ''))


def _cut_in_a_number(path: Path) -> None:
    cut_last_line(path)


def _cut_after_a_comma(path: Path) -> None:
    line = path.read_text().splitlines()[-1]
    cut_last_line(path, keep=line.index(',', len(line) // 2) + 1)


def _cut_then_newline_added(path: Path) -> None:
    cut_last_line(path, newline=True)  # an editor saved the file since


def _cut_in_the_last_number(path: Path) -> None:
    lines = path.read_text().splitlines()
    lines[-1] = lines[-1][: lines[-1].rindex(',') + 1] + '-'  # was -1.5e-05, say
    path.write_text('\n'.join(lines))


CUTS = {
    'in a number': (_cut_in_a_number, r'\d+ of \d+ fields'),
    'after a comma': (_cut_after_a_comma, r'\d+ of \d+ fields'),
    'newline added later': (_cut_then_newline_added, r'\d+ of \d+ fields'),
    'in the last number': (_cut_in_the_last_number, r"no newline, and \w+ is '-'"),
}


@pytest.mark.parametrize('file', ['pose', 'joint'])
@pytest.mark.parametrize('cut', CUTS, ids=list(CUTS))
def test_a_cut_off_last_line_is_dropped_with_a_warning(
    tmp_path: Path, cut: str, file: str, caplog: pytest.LogCaptureFixture
) -> None:
    pose_csv, joint_csv, joints = recording_files(tmp_path, n=20)
    path = pose_csv if file == 'pose' else joint_csv
    spoil, reason = CUTS[cut]
    spoil(path)

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert len(recording) == 19 and recording.cut_short
    np.testing.assert_allclose(recording.joints, joints[:19], atol=1e-12)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f'{path}: dropped its last line 21 (')
    assert warning.endswith('): cut off, as a killed writer leaves it')
    assert re.search(reason, warning), warning


def test_a_whole_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    for path in (pose_csv, joint_csv):
        path.write_text(path.read_text().rstrip('\n'))

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert len(recording) == 20 and not recording.cut_short


def test_a_cut_off_line_in_the_middle_is_an_error_naming_it(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    lines = pose_csv.read_text().splitlines(keepends=True)
    lines[4] = ','.join(lines[4].split(',')[:6]) + '\n'
    pose_csv.write_text(''.join(lines))

    with pytest.raises(ValueError) as raised:
        load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert str(raised.value) == (
        f"{pose_csv}: line 5, column 'orientation_x': '' is not a finite number"
    )


def test_a_cut_off_line_joined_to_the_next_is_an_error_naming_it(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    lines = joint_csv.read_text().splitlines(keepends=True)
    lines[4] = lines[4][: len(lines[4]) // 2]  # no newline: line 6 continues line 5
    joint_csv.write_text(''.join(lines))

    with pytest.raises(ValueError, match=r'Expected 23 fields in line 5, saw \d+') as raised:
        load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert str(joint_csv) in str(raised.value)


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen([sys.executable, '-c', ''])
    process.wait()
    return process.pid


def write_metadata(directory: Path, **fields: object) -> Path:
    metadata = {
        'status': 'recording',
        'host': socket.gethostname(),
        'pid': None,
        'chain': OMX_CHAIN.to_dict(),
    }
    metadata.update(fields)
    path = directory / METADATA_FILE
    path.write_text(json.dumps({k: v for k, v in metadata.items() if v is not None}))
    return path


METADATA_CASES = {
    'complete': ({'status': 'complete', 'pid': 'alive'}, None),
    'recorder killed': (
        {'pid': 'dead'},
        r'cut short: its recorder \(pid {pid} on this host\) was killed before it finished '
        r"\(metadata.json still says 'recording'\); rows up to its last flush are used",
    ),
    'recorder running': (
        {'pid': 'alive'},
        r'still being recorded: its recorder \(pid {pid} on this host\) is running',
    ),
    'recorded on another host': (
        {'pid': 'alive', 'host': 'elsewhere'},
        r"never finished: metadata.json still says 'recording' and it was recorded on host "
        r"'elsewhere', so it is still running elsewhere or was cut short",
    ),
    'no pid': ({}, r'never finished: .* recorded without a pid'),
    'recorder failed': (
        {'status': 'failed', 'stop_reason': 'error: disk full'},
        r'the recorder failed \(error: disk full\); the rows it wrote before are used',
    ),
}


@pytest.mark.parametrize('case', METADATA_CASES, ids=list(METADATA_CASES))
def test_an_unfinished_recording_is_read_with_a_warning_saying_why(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    fields, warning = METADATA_CASES[case]
    recording_files(tmp_path / 'rec', n=20)
    pid = {'dead': dead_pid(), 'alive': os.getpid(), None: None}[fields.get('pid')]
    write_metadata(tmp_path / 'rec', **{**fields, 'pid': pid})

    (recording,) = load_recordings(find_recordings([tmp_path]), OMX_CHAIN)

    assert len(recording) == 20
    assert recording.cut_short == (warning is not None)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if warning is None:
        assert warnings == []
    else:
        (text,) = warnings
        assert text.startswith(f'{tmp_path / "rec"}: ')
        assert re.search(warning.format(pid=pid), text), text


def test_empty_recordings_in_a_glob_are_left_out_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    recording_files(tmp_path / 'a', n=20)
    write_metadata(tmp_path / 'a', status='complete')
    # Stopped before any joint state (no joint_states.csv), killed before its first flush.
    (tmp_path / 'b').mkdir()
    (tmp_path / 'b' / KINEMATICS_POSE_FILE).write_text(','.join(KINEMATICS_POSE_COLUMNS) + '\n')
    write_metadata(tmp_path / 'b', status='complete')
    (tmp_path / 'c').mkdir()
    (tmp_path / 'c' / KINEMATICS_POSE_FILE).write_text('')
    (tmp_path / 'c' / JOINT_STATES_FILE).write_text('')
    write_metadata(tmp_path / 'c')
    (recording,) = load_recordings(find_recordings([str(tmp_path / '*')]), OMX_CHAIN)
    assert len(recording) == 20 and recording.source == str(tmp_path / 'a')
    for name in ('b', 'c'):
        assert f'{tmp_path / name}: an empty recording (' in caplog.text
    assert '(kinematics_pose.csv without a row); left out' in caplog.text
    # Alone, an empty recording is an error that says so, and what the recorder skipped.
    with pytest.raises(ValueError, match='an empty recording'):
        load_recordings(find_recordings([tmp_path / 'b']), OMX_CHAIN)
    skipped = {'joint_states': {'written': 0, 'skipped': {'missing_joints': 200}}}
    write_metadata(tmp_path / 'b', status='complete', streams=skipped)
    with pytest.raises(ValueError, match=r'recorder skipped 200 joint_states \(missing_joints\)'):
        load_recordings(find_recordings([tmp_path / 'b']), OMX_CHAIN)
    # Joint states but no pose: an arm without /kinematics_pose, recorded from that topic.
    recording_files(tmp_path / 'd', n=20)
    (tmp_path / 'd' / KINEMATICS_POSE_FILE).write_text(','.join(KINEMATICS_POSE_COLUMNS) + '\n')
    streams = {'joint_states': {'written': 20, 'skipped': {}}}
    topics = {'kinematics_pose': '/kinematics_pose'}
    write_metadata(
        tmp_path / 'd', status='complete', streams=streams, topics=topics, pose_source='topic'
    )
    with pytest.raises(ValueError, match='20 joint states came, but nothing on /kinematics_pose'):
        load_recordings(find_recordings([tmp_path / 'd']), OMX_CHAIN)
    # Poses but no joint state: a joint_states_topic typo, named.
    recording_files(tmp_path / 'e', n=20)
    (tmp_path / 'e' / JOINT_STATES_FILE).unlink()
    streams = {'kinematics_pose': {'written': 20, 'skipped': {}}}
    topics = {'joint_states': '/joint_state', 'kinematics_pose': '/kinematics_pose'}
    write_metadata(
        tmp_path / 'e', status='complete', streams=streams, topics=topics, pose_source='topic'
    )
    said = r'20 poses came, but nothing on /joint_state: is joint_states_topic right\?'
    with pytest.raises(ValueError, match=said):
        load_recordings(
            [(tmp_path / 'e' / KINEMATICS_POSE_FILE, tmp_path / 'e' / JOINT_STATES_FILE)],
            OMX_CHAIN,
        )


def test_a_killed_recording_with_a_cut_off_line_is_read_up_to_its_last_flush(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pose_csv, joint_csv, joints = recording_files(tmp_path, n=20)
    write_metadata(tmp_path, pid=dead_pid())
    cut_last_line(joint_csv)

    recording = load_recording(pose_csv, joint_csv, OMX_CHAIN)

    assert len(recording) == 19 and recording.cut_short
    np.testing.assert_allclose(recording.joints, joints[:19], atol=1e-12)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert 'was killed' in warnings[0] and str(joint_csv) in warnings[1]
    assert drop_repeats(recording).cut_short


def test_a_recording_made_for_another_chain_is_refused(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    # The Jazzy URDF puts joint1 at z = 0 (../shared/FACTS.md): its poses are 17 mm lower.
    joint1 = dataclasses.replace(OMX_CHAIN.joints[0], origin_xyz=(0.012, 0.0, 0.0))
    jazzy = dataclasses.replace(OMX_CHAIN, joints=(joint1, *OMX_CHAIN.joints[1:]))
    metadata = write_metadata(tmp_path, status='complete', chain=jazzy.to_dict())

    with pytest.raises(ValueError) as raised:
        load_recording(pose_csv, joint_csv, OMX_CHAIN)
    assert str(raised.value) == (
        f'{metadata}: the recording was made for another arm: its poses come from chain '
        "'open_manipulator_x', not from the chain 'open_manipulator_x' asked for "
        '(joint1 origin_xyz (0.012, 0.0, 0.0) vs (0.012, 0.0, 0.017))'
    )

    renamed = dataclasses.replace(OMX_CHAIN, name='my_arm')
    write_metadata(tmp_path, status='complete', chain=renamed.to_dict())
    with pytest.raises(ValueError, match=r"chain 'my_arm', not from the chain 'open_manipu"):
        load_recording(pose_csv, joint_csv, OMX_CHAIN)


def test_unreadable_metadata_is_an_error_naming_it(tmp_path: Path) -> None:
    pose_csv, joint_csv, _ = recording_files(tmp_path, n=20)
    (tmp_path / METADATA_FILE).write_text('{"status": ')

    with pytest.raises(ValueError, match=f'{tmp_path / METADATA_FILE}: not a readable JSON'):
        load_recording(pose_csv, joint_csv, OMX_CHAIN)


def test_a_folder_given_for_a_csv_file_is_named_as_one(tmp_path: Path) -> None:
    (tmp_path / 'poses').mkdir()
    joints = tmp_path / JOINT_STATES_FILE
    joints.write_text('')
    with pytest.raises(FileNotFoundError, match='poses is a folder, not a CSV file'):
        load_recording(tmp_path / 'poses', joints, OMX_CHAIN)
