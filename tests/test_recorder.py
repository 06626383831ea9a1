"""The recorder: exact CSV headers, FK-consistent rows, durability under signals, bad input."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
from open_manipulator_msgs.msg import KinematicsPose
from processes import NODE_START_S
from rclpy.qos import QoSProfile
from recording_helpers import read_csv, stamp_of, start_recorder, start_sim, wait_for
from sensor_msgs.msg import JointState

from iknet_collect.csv_writer import DurableCsvWriter, RecordingError, create_recording_dir
from iknet_collect.message_rows import (
    BadMessageError,
    joint_state_record,
    message_stamp_ns,
)
from iknet_collect.stream_stats import CLOCK_STEP_MESSAGES, StreamStats
from iknet_core.csv_schema import KINEMATICS_POSE_COLUMNS, joint_states_columns
from iknet_core.kinematics import OMX_CHAIN, Chain, pose_from_joints
from iknet_core.kinematics.transforms import canonical_quaternion
from iknet_train.data import load_recording

JOINT_HEADER = list(joint_states_columns(5))
POSE_HEADER = list(KINEMATICS_POSE_COLUMNS)
NAMES = ['joint1', 'joint2', 'joint3', 'joint4', 'gripper']


# --- units: stamps, checks, files ---------------------------------------------------------


class _Stamp:
    def __init__(self, sec: int, nanosec: int) -> None:
        self.sec, self.nanosec = sec, nanosec


class _Header:
    def __init__(self, sec: int, nanosec: int) -> None:
        self.stamp, self.frame_id = _Stamp(sec, nanosec), ''


class PoseWithoutHeader:
    """Stand-in for ROBOTIS's original KinematicsPose, which has no header."""

    @classmethod
    def get_fields_and_field_types(cls) -> dict[str, str]:
        return {'pose': 'geometry_msgs/Pose', 'tolerance': 'double'}


def test_pose_stamp_is_the_header_stamp_or_the_receipt_time():
    with_header = KinematicsPose()
    with_header.header.stamp.sec, with_header.header.stamp.nanosec = 12, 345
    assert message_stamp_ns(with_header, receipt_ns=99) == 12_000_000_345
    assert message_stamp_ns(PoseWithoutHeader(), receipt_ns=99) == 99
    # A zero stamp means the publisher did not stamp it.
    assert message_stamp_ns(KinematicsPose(), receipt_ns=99) == 99


def _joint_state(**fields) -> JointState:
    message = JointState(name=NAMES, position=[0.1, 0.2, 0.3, 0.4, 0.0], **fields)
    message.header.stamp.sec = 5
    return message


def test_joint_state_rows_follow_the_message_and_empty_arrays_leave_empty_columns():
    record = joint_state_record(_joint_state(), 0, OMX_CHAIN.joint_names, None)
    assert len(record.row) == len(JOINT_HEADER)
    assert record.row[:8] == ['5', '0', '', *NAMES]
    assert record.row[13:] == [''] * 10
    np.testing.assert_array_equal(record.chain_positions, [0.1, 0.2, 0.3, 0.4])
    three = JointState(name=['joint1', 'joint2', 'joint3', 'joint4'], position=[0.0] * 4)
    assert len(joint_state_record(three, 1, OMX_CHAIN.joint_names, None).row) == 3 + 4 * 4


def test_nan_beyond_the_chains_positions_is_an_empty_field_not_a_skipped_message():
    """ros2_control's joint_state_broadcaster sends NaN for interfaces a joint lacks (efforts on
    most arms), a gripper may too: those values are left empty, the chain's positions kept."""
    message = _joint_state(velocity=[0.0, 0.5, math.nan, 0.0, math.inf], effort=[math.nan] * 5)
    message.position[4] = math.nan  # the gripper's, not the chain's
    record = joint_state_record(message, 0, OMX_CHAIN.joint_names, None)
    assert record.row[8:13] == ['0.1', '0.2', '0.3', '0.4', '']
    assert record.row[13:18] == ['0.0', '0.5', '', '0.0', '']
    assert record.row[18:] == [''] * 5
    np.testing.assert_array_equal(record.chain_positions, [0.1, 0.2, 0.3, 0.4])


@pytest.mark.parametrize(
    ('message', 'reason'),
    [
        (JointState(name=NAMES, position=[0.1, math.nan, 0.3, 0.4, 0.0]), 'not_finite'),
        (_joint_state(effort=[0.0] * 3), 'wrong_length'),
        (JointState(name=NAMES, position=[0.0] * 4), 'wrong_length'),
        (JointState(name=['joint1', 'gripper'], position=[0.0, 0.0]), 'missing_joints'),
    ],
)
def test_bad_joint_states_are_refused_with_a_reason(message, reason):
    with pytest.raises(BadMessageError) as error:
        joint_state_record(message, 1, OMX_CHAIN.joint_names, tuple(NAMES))
    assert error.value.reason == reason


def test_another_joint_set_is_written_in_the_first_messages_joints():
    # The gripper's driver gone halfway through a recording: every later joint state was skipped.
    arm = JointState(name=NAMES[:4], position=[0.1, 0.2, 0.3, 0.4], velocity=[0.0, 0.5, 0.0, 0.0])
    record = joint_state_record(arm, 1, OMX_CHAIN.joint_names, tuple(NAMES))
    assert record.joints_changed and len(record.row) == len(JOINT_HEADER)
    assert record.row[3:8] == NAMES and record.row[8:13] == ['0.1', '0.2', '0.3', '0.4', '']
    assert record.row[13:18] == ['0.0', '0.5', '0.0', '0.0', ''] and record.row[18:] == [''] * 5
    # A joint the first message did not have: left out of the row.
    more = JointState(name=[*NAMES, 'joint5'], position=[0.1, 0.2, 0.3, 0.4, 0.01, 9.0])
    record = joint_state_record(more, 1, OMX_CHAIN.joint_names, tuple(NAMES))
    assert record.row[3:8] == NAMES and record.row[8:13] == ['0.1', '0.2', '0.3', '0.4', '0.01']
    assert not joint_state_record(
        _joint_state(), 1, OMX_CHAIN.joint_names, tuple(NAMES)
    ).joints_changed


def test_the_same_joints_in_another_order_are_recorded_as_they_come():
    # Each row names its joints (the loader reads them by name): half a recording was skipped.
    order = ['gripper', 'joint4', 'joint3', 'joint2', 'joint1']
    message = JointState(name=order, position=[0.0, 0.4, 0.3, 0.2, 0.1])
    record = joint_state_record(message, 1, OMX_CHAIN.joint_names, tuple(NAMES))
    assert record.row[3:8] == order
    np.testing.assert_array_equal(record.chain_positions, [0.1, 0.2, 0.3, 0.4])


def test_stream_stats_counts_gaps_and_refuses_stamps_going_back():
    stats = StreamStats('/joint_states')
    for stamp in [0, 10, 20, 30, 60, 70]:
        stats.wrote(stamp * 10**6, stamp * 10**6)
    with pytest.raises(BadMessageError, match='stamp_not_increasing'):
        stats.check_order(70 * 10**6, 80 * 10**6)
    summary = stats.summary()
    assert summary['written'] == 6 and summary['gaps'] == 1
    assert summary['largest_gaps'][0] == {'after_stamp': 0.03, 'length_s': 0.03}
    assert summary['rate_hz'] == pytest.approx(5 / 0.07)


def test_a_stamp_far_ahead_is_skipped_alone_unless_the_clock_stepped():
    # Stamps from the publisher's clock, 2 s behind the recorder's; 10 ms apart.
    stats, ms = StreamStats('/joint_states'), 10**6
    clock = 1_000_000 * ms

    def offer(stamp: int, receipt: int) -> str:
        try:
            stats.check_order(stamp, receipt)
        except BadMessageError as bad:
            stats.skip(bad.reason)
            return bad.reason
        stats.wrote(stamp, receipt)
        return 'written'

    for tick in range(5):
        assert offer(clock - 2000 * ms + 10 * tick * ms, clock + 10 * tick * ms) == 'written'
    # One stamp an hour ahead: skipped, and the messages after it are written (before, every
    # later one was 'stamp_not_increasing': the rest of the recording lost).
    assert offer(clock + 3600_000 * ms, clock + 50 * ms) == 'stamp_ahead'
    for tick in range(6, 10):
        assert offer(clock - 2000 * ms + 10 * tick * ms, clock + 10 * tick * ms) == 'written'
    # Late messages (a stall) have stamps further behind: written.
    assert offer(clock - 2000 * ms + 100 * ms, clock + 900 * ms) == 'written'
    # The publisher's clock steps 60 s forward: CLOCK_STEP_MESSAGES in a row agree, and the
    # stream goes on from there.
    reasons = [
        offer(clock + 58_000 * ms + 10 * tick * ms, clock + 10 * tick * ms)
        for tick in range(100, 100 + CLOCK_STEP_MESSAGES + 3)
    ]
    assert reasons == ['stamp_ahead'] * (CLOCK_STEP_MESSAGES - 1) + ['written'] * 4
    assert stats.skipped == {'stamp_ahead': CLOCK_STEP_MESSAGES}
    # Far behind the last written stamp: skipped, with what to do about it.
    with pytest.raises(BadMessageError, match='a new recorder records from the new time'):
        stats.check_order(clock, clock + 2000 * ms)


def test_a_first_stamp_far_ahead_is_skipped_and_unstamped_messages_confirm_no_clock_step():
    ms, clock = 10**6, 10**15
    stats = StreamStats('/joint_states')
    # The first message stamped an hour ahead of when it came: written, it made every later
    # one 'stamp_not_increasing'.
    with pytest.raises(BadMessageError, match=r'stamp_ahead: 3600\.000 s later, against the time'):
        stats.check_order(clock + 3600_000 * ms, clock)
    stats.check_order(clock - 5 * ms, clock)  # the stream's own: written
    stats.wrote(clock - 5 * ms, clock)
    # A stream behind this clock (sim time): messages stamped on receipt (no stamp of their
    # own) are ahead of it, and never confirm a step however many come.
    sim = StreamStats('/joint_states')
    sim.wrote(5_000 * ms, clock)
    for tick in range(1, 3 * CLOCK_STEP_MESSAGES):
        receipt = clock + 10 * tick * ms
        with pytest.raises(BadMessageError, match='stamp_ahead'):
            sim.check_order(receipt, receipt)
    sim.check_order(5_000 * ms + 10 * ms * 3 * CLOCK_STEP_MESSAGES, receipt + 10 * ms)
    assert not sim.all_on_receipt and stats.on_receipt == 0


def test_recording_dir_is_never_reused(tmp_path):
    first = create_recording_dir(tmp_path, 'a')
    (first / 'x').write_text('data')
    with pytest.raises(RecordingError, match='not empty'):
        create_recording_dir(tmp_path, 'a')
    (tmp_path / 'file').write_text('')
    with pytest.raises(RecordingError, match='file is a file, not a folder'):
        create_recording_dir(tmp_path / 'file', 'b')
    # A name the recorder chose (its start, to the second): two recorders in one second both
    # record, the second into a numbered folder, even where the first has written nothing yet.
    chosen = create_recording_dir(tmp_path / 'runs', '20261128T200111Z', numbered=True)
    again = create_recording_dir(tmp_path / 'runs', '20261128T200111Z', numbered=True)
    assert (chosen.name, again.name) == ('20261128T200111Z', '20261128T200111Z-2')
    with pytest.raises(RecordingError, match='cannot record into'):
        create_recording_dir(tmp_path / 'file', 'b', numbered=True)


@pytest.mark.skipif(not Path('/dev/full').exists(), reason='needs /dev/full')
def test_full_disk_is_a_clear_error():
    writer = DurableCsvWriter(open('/dev/full', 'w'), ['a', 'b'])  # noqa: SIM115 - closed below
    writer.write(['1', '2'])
    with pytest.raises(RecordingError, match='cannot write /dev/full: No space left'):
        writer.sync()
    with pytest.raises(RecordingError, match='No space left'):
        writer.close()
    writer.close()  # closed for good: no second error


# --- the node over DDS ----------------------------------------------------------------------


def _metadata(directory: Path) -> dict:
    return json.loads((directory / 'metadata.json').read_text())


def _check_recording(directory: Path, rate_hz: float | None = 100.0) -> None:
    """Exact headers, rising stamps, each pose = FK(joints at the same stamp), rates."""
    joint_header, joint_rows = read_csv(directory / 'joint_states.csv')
    pose_header, pose_rows = read_csv(directory / 'kinematics_pose.csv')
    assert joint_header == JOINT_HEADER
    assert pose_header == POSE_HEADER
    assert all(len(row) == len(JOINT_HEADER) for row in joint_rows)
    assert all(len(row) == len(POSE_HEADER) for row in pose_rows)
    for rows in (joint_rows, pose_rows):
        stamps = np.array([stamp_of(row) for row in rows])
        assert (np.diff(stamps) > 0).all()
        if rate_hz:
            # The simulator's timer skips the periods a busy machine makes it miss (92.9 Hz
            # under load): the median period is the configured one, the mean rate at most it.
            periods = np.diff(stamps) / 1e9
            assert np.median(periods) == pytest.approx(1 / rate_hz, rel=0.05)
            assert rate_hz / 2 < len(periods) / periods.sum() < rate_hz * 1.05
    joints = {stamp_of(row): [float(v) for v in row[8:12]] for row in joint_rows}
    paired = [row for row in pose_rows if stamp_of(row) in joints]
    assert len(paired) >= len(pose_rows) - 2, 'poses carry the stamps of their joint states'
    q = np.array([joints[stamp_of(row)] for row in paired])
    recorded = np.array([[float(v) for v in row[3:10]] for row in paired])
    expected = pose_from_joints(OMX_CHAIN, q)
    np.testing.assert_allclose(recorded[:, :3], expected[:, :3], atol=1e-6)
    np.testing.assert_allclose(canonical_quaternion(recorded[:, 3:]), expected[:, 3:], atol=1e-6)


def test_sim_and_recorder_write_fk_consistent_csvs_at_the_configured_rate(processes, tmp_path):
    start_sim(processes, tmp_path, torque_enabled=False, seed=5)
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run', duration=3.0
    )
    assert recorder.wait(timeout=30) == 0
    directory = tmp_path / 'out' / 'run'
    _check_recording(directory)
    metadata = _metadata(directory)
    assert metadata['status'] == 'complete'
    assert Chain.from_dict(metadata['chain']) == OMX_CHAIN
    assert metadata['topics'] == {
        'joint_states': '/joint_states',
        'kinematics_pose': '/kinematics_pose',
    }
    streams = metadata['streams']
    assert streams['joint_states']['written'] == len(read_csv(directory / 'joint_states.csv')[1])
    stamps = [stamp_of(row) for row in read_csv(directory / 'joint_states.csv')[1]]
    rate = (len(stamps) - 1) / ((stamps[-1] - stamps[0]) / 1e9)
    assert streams['joint_states']['rate_hz'] == pytest.approx(rate, rel=1e-6)
    assert streams['joint_states']['median_period_s'] == pytest.approx(0.01, rel=0.05)
    assert 'gaps' in streams['kinematics_pose'] and streams['kinematics_pose']['skipped'] == {}
    assert 'stayed within' not in (tmp_path / 'recorder.log').read_text()  # hand-guided


def test_a_recording_of_a_still_arm_says_so(processes, tmp_path):
    start_sim(processes, tmp_path)  # torque on: holding its pose
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run', duration=1.0
    )
    assert recorder.wait(timeout=30) == 0
    log = (tmp_path / 'recorder.log').read_text()
    assert "the arm's joints stayed within 0.01 rad (a slide: m) of the first joint" in log, log


def _rows(path: Path) -> int:
    return len(read_csv(path)[1]) if path.exists() else 0


@pytest.mark.parametrize('signal_number', [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_mid_recording_leaves_complete_files(processes, tmp_path, signal_number):
    start_sim(processes, tmp_path, torque_enabled=False)
    # SIGHUP (a closed terminal) as a user's shell leaves it, whatever this test runs under
    # (nohup ignores it, and the recorder then keeps it ignored).
    hangup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        recorder = start_recorder(
            processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run'
        )
    finally:
        signal.signal(signal.SIGHUP, hangup)
    directory = tmp_path / 'out' / 'run'
    wait_for(lambda: _rows(directory / 'joint_states.csv') > 100, NODE_START_S, 'rows on disk')
    os.kill(recorder.pid, signal_number)
    assert recorder.wait(timeout=15) == 0
    for name in ('joint_states.csv', 'kinematics_pose.csv'):
        assert (directory / name).read_text().endswith('\n')
    _check_recording(directory, rate_hz=None)
    metadata = _metadata(directory)
    assert metadata['status'] == 'complete' and metadata['stop'] is not None
    for stream, name in (
        ('joint_states', 'joint_states.csv'),
        ('kinematics_pose', 'kinematics_pose.csv'),
    ):
        assert metadata['streams'][stream]['written'] == _rows(directory / name)
    log = (tmp_path / 'recorder.log').read_text()
    assert 'complete (stopped by signal)' in log
    assert 'Failed to publish log message to rosout' not in log


def test_sigkill_loses_at_most_the_last_second(processes, ros, tmp_path):
    start_sim(processes, tmp_path, torque_enabled=False)
    node = ros.node('kill_witness')
    seen: list[int] = []
    node.create_subscription(
        JointState,
        'joint_states',
        lambda m: seen.append(m.header.stamp.sec * 10**9 + m.header.stamp.nanosec),
        QoSProfile(depth=1000),
    )
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run'
    )
    path = tmp_path / 'out' / 'run' / 'joint_states.csv'
    assert ros.spin_until(lambda: _rows(path) > 100, 60.0), 'recorder wrote nothing'
    first = min(stamp_of(row) for row in read_csv(path)[1])

    def older_than_a_second() -> list[int]:
        """What the witness saw since the recording's first row and over a second ago."""
        return [s for s in seen if first <= s < seen[-1] - 10**9] if seen else []

    # Wait on the witness itself (a busy machine discovers it late, and the recorder may have
    # started well before it): more than 100 of its messages must be older than the last second.
    assert ros.spin_until(lambda: len(older_than_a_second()) > 150, 60.0), (
        f'witness saw {len(seen)} messages, {len(older_than_a_second())} of them in the window'
    )
    recorder.kill()
    recorder.wait(timeout=10)
    recorded = {stamp_of(row) for row in read_csv(path)[1]}
    older = older_than_a_second()
    assert len(older) > 100
    missing = [s for s in older if s not in recorded]
    assert not missing, f'{len(missing)} rows older than 1 s lost'
    # The metadata a kill leaves says what was recorded: both topics, the QoS, the joints.
    metadata = _metadata(tmp_path / 'out' / 'run')
    assert metadata['status'] == 'recording' and metadata['qos']['reliability'] == 'reliable'
    assert set(metadata['topics']) == {'joint_states', 'kinematics_pose'}
    assert metadata['joint_names'] == NAMES


def test_malformed_messages_are_counted_and_skipped(processes, ros, tmp_path):
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run'
    )
    node = ros.node('bad_publisher')
    joints = node.create_publisher(JointState, 'joint_states', QoSProfile(depth=100))
    poses = node.create_publisher(KinematicsPose, 'kinematics_pose', QoSProfile(depth=100))
    assert ros.spin_until(
        lambda: joints.get_subscription_count() > 0 and poses.get_subscription_count() > 0, 15.0
    )
    ros.spin_until(lambda: False, 0.5)  # let both sides finish matching

    def joint_state(tick: int, names=NAMES, position=None) -> JointState:
        message = JointState(name=names, position=position or [0.1 * tick, 0.0, 0.0, 0.0, 0.0])
        message.header.stamp.sec, message.header.stamp.nanosec = 100, tick * 10**7
        return message

    def pose(tick: int, xyz=(0.1, 0.0, 0.2), quaternion=(0.0, 0.0, 0.0, 1.0)) -> KinematicsPose:
        message = KinematicsPose()
        message.header.stamp.sec, message.header.stamp.nanosec = 100, tick * 10**7
        p, o = message.pose.position, message.pose.orientation
        p.x, p.y, p.z = xyz
        o.x, o.y, o.z, o.w = quaternion
        return message

    for tick in range(5):
        joints.publish(joint_state(tick))
        poses.publish(pose(tick))
    joints.publish(joint_state(5, position=[math.nan, 0.0, 0.0, 0.0, 0.0]))
    joints.publish(joint_state(6, position=[0.0, 0.0, 0.0]))
    joints.publish(
        joint_state(7, names=['joint1', 'joint2', 'joint4', 'gripper'], position=[0.0] * 4)
    )
    joints.publish(joint_state(2))  # stamp going back
    joints.publish(joint_state(8, names=NAMES[:4], position=[0.8, 0.0, 0.0, 0.0]))  # no gripper
    poses.publish(pose(5, xyz=(math.inf, 0.0, 0.0)))
    poses.publish(pose(6, quaternion=(0.0, 0.0, 0.0, 0.0)))
    poses.publish(pose(1))  # stamp going back
    for tick in range(10, 15):
        joints.publish(joint_state(tick))
        poses.publish(pose(tick))

    directory = tmp_path / 'out' / 'run'
    wait_for(
        lambda: (
            _rows(directory / 'joint_states.csv') == 11
            and _rows(directory / 'kinematics_pose.csv') == 10
        ),
        15,
        'the good rows',
    )
    assert recorder.poll() is None, 'the recorder survived bad input'
    recorder.send_signal(signal.SIGINT)
    assert recorder.wait(timeout=15) == 0
    streams = _metadata(directory)['streams']
    assert streams['joint_states']['skipped'] == {
        'not_finite': 1,
        'wrong_length': 1,
        'missing_joints': 1,
        'stamp_not_increasing': 1,
    }
    assert streams['kinematics_pose']['skipped'] == {
        'not_finite': 1,
        'bad_quaternion': 1,
        'stamp_not_increasing': 1,
    }
    log = (tmp_path / 'recorder.log').read_text()
    assert 'skipped a message' in log and 'written in the first ones' in log
    # The row without the gripper, in the header's joints, reads as the others do.
    recording = load_recording(
        directory / 'kinematics_pose.csv', directory / 'joint_states.csv', OMX_CHAIN
    )
    assert len(recording) == 10  # each pose paired by its stamp


def test_poses_whose_header_stamps_are_zero_are_paired_as_stamped_on_receipt(
    processes, ros, tmp_path
):
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run'
    )
    node = ros.node('unstamped_publisher')
    poses = node.create_publisher(KinematicsPose, 'kinematics_pose', QoSProfile(depth=100))
    assert ros.spin_until(lambda: poses.get_subscription_count() > 0, 15.0)
    ros.spin_until(lambda: False, 0.5)  # let both sides finish matching
    for _ in range(5):
        message = KinematicsPose()  # stamp zero
        message.pose.orientation.w = 1.0
        poses.publish(message)
    path = tmp_path / 'out' / 'run' / 'kinematics_pose.csv'
    wait_for(lambda: _rows(path) == 5, 15, 'the poses on disk')
    # Said from the first pose on: a recording killed now would keep this metadata.
    assert _metadata(tmp_path / 'out' / 'run')['pose_stamp'] == 'receipt'
    recorder.send_signal(signal.SIGINT)
    assert recorder.wait(timeout=15) == 0
    # 'header' made the loader pair them within 2 ms of a joint state's own stamp.
    assert _metadata(tmp_path / 'out' / 'run')['pose_stamp'] == 'receipt'


def test_pose_source_fk_gives_the_same_csvs(processes, tmp_path):
    # Run until each has rows on disk, not for a duration: each one's clock starts at its own
    # first message, and on a busy machine one recorder matched the simulator 2.75 s after the
    # other, so two 2.5 s recordings shared no stamp.
    start_sim(processes, tmp_path, torque_enabled=False, seed=7)
    out = tmp_path / 'out'
    recorders = {
        'topic': start_recorder(processes, tmp_path, output_dir=out, recording_name='topic'),
        'fk': start_recorder(
            processes, tmp_path, 'recorder_fk', output_dir=out, recording_name='fk',
            pose_source='fk',
        ),
    }  # fmt: skip
    for name in recorders:
        csv_file = out / name / 'joint_states.csv'
        wait_for(lambda csv_file=csv_file: _rows(csv_file) > 200, NODE_START_S, f'{csv_file} rows')
    for recorder in recorders.values():
        os.kill(recorder.pid, signal.SIGINT)
    assert [recorder.wait(timeout=30) for recorder in recorders.values()] == [0, 0]
    assert _metadata(out / 'fk')['topics'] == {'joint_states': '/joint_states'}
    for name in ('joint_states.csv', 'kinematics_pose.csv'):
        header_topic, rows_topic = read_csv(out / 'topic' / name)
        header_fk, rows_fk = read_csv(out / 'fk' / name)
        assert header_topic == header_fk
        by_stamp = {stamp_of(row): row for row in rows_topic}
        common = [row for row in rows_fk if stamp_of(row) in by_stamp]
        assert len(common) > 150  # the later one's 200 rows on disk, recorded by both
        assert all(row == by_stamp[stamp_of(row)] for row in common)


def test_pose_source_fk_with_only_joint_states_published(processes, tmp_path):
    start_sim(processes, tmp_path, torque_enabled=False, publish_kinematics_pose=False)
    recorder = start_recorder(
        processes,
        tmp_path,
        output_dir=tmp_path / 'out',
        recording_name='run',
        pose_source='fk',
        duration=2.0,
    )
    assert recorder.wait(timeout=30) == 0
    _check_recording(tmp_path / 'out' / 'run', rate_hz=None)


def test_joint_states_with_no_pose_on_the_topic_get_a_warning(processes, tmp_path):
    # An arm without /kinematics_pose recorded from that topic: nothing to train on.
    start_sim(processes, tmp_path, torque_enabled=False, publish_kinematics_pose=False)
    start_recorder(processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run')
    log = _logged(tmp_path / 'recorder.log', 'and nothing on /kinematics_pose in 5 s')
    assert 'records with pose_source fk' in log


def test_poses_with_no_joint_state_and_two_publishers_of_a_topic_get_warnings(
    processes, ros, tmp_path
):
    # A joint_states_topic with a typo recorded a whole session of poses alone, without a word;
    # a second publisher of a topic mixes its messages into the recording.
    start_sim(processes, tmp_path, torque_enabled=False)
    node = ros.node('second_pose_publisher')
    node.create_publisher(KinematicsPose, 'kinematics_pose', QoSProfile(depth=10))
    start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run',
        joint_states_topic='/omx/joint_states',
    )  # fmt: skip
    log = _logged(
        tmp_path / 'recorder.log', 'and nothing on /omx/joint_states in 5 s (0 publishers of it)'
    )
    assert '2 publishers on /kinematics_pose' in log


def _logged(log: Path, text: str) -> str:
    """The node's log once it holds text (NODE_START_S at most)."""
    wait_for(lambda: text in log.read_text(), NODE_START_S, f'{text!r} in {log}')
    return log.read_text()


def test_refuses_a_used_or_unwritable_directory(processes, tmp_path):
    (tmp_path / 'out' / 'taken').mkdir(parents=True)
    (tmp_path / 'out' / 'taken' / 'kinematics_pose.csv').write_text('precious')
    taken = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='taken'
    )
    assert taken.wait(timeout=20) == 1
    assert 'not empty' in (tmp_path / 'recorder.log').read_text()
    assert (tmp_path / 'out' / 'taken' / 'kinematics_pose.csv').read_text() == 'precious'
    (tmp_path / 'file').write_text('')
    unwritable = start_recorder(processes, tmp_path, output_dir=tmp_path / 'file')
    assert unwritable.wait(timeout=20) == 1
    assert 'cannot record into' in (tmp_path / 'recorder.log').read_text()


def test_a_bad_parameter_is_one_error_line(processes, tmp_path):
    recorder = start_recorder(processes, tmp_path, output_dir=tmp_path / 'out', pose_source='x')
    assert recorder.wait(timeout=20) == 1
    log = (tmp_path / 'recorder.log').read_text()
    assert 'pose_source must be one of' in log and 'Traceback' not in log, log
    assert not (tmp_path / 'out').exists()
    bad_durations = {'-1': 'must be in [0.0, 10000000.0]', 'ten': "expecting type 'DOUBLE'"}
    for bad, reason in bad_durations.items():
        recorder = start_recorder(processes, tmp_path, output_dir=tmp_path / 'out', duration=bad)
        assert recorder.wait(timeout=20) == 1
        log = (tmp_path / 'recorder.log').read_text()
        assert reason in log and 'Traceback' not in log, log


def test_duration_counts_from_the_first_message(processes, tmp_path):
    # `duration:=1`, as a launch argument or -p gives it: whole seconds, typed as an integer.
    # A flush period as long as the duration: the recording must end on time, not at a flush.
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run', duration=1,
        flush_period=1.0,
    )  # fmt: skip
    directory = tmp_path / 'out' / 'run'
    wait_for((directory / 'metadata.json').exists, 20, 'the recorder to start')
    with pytest.raises(subprocess.TimeoutExpired):  # no message yet: the clock has not started
        recorder.wait(timeout=2.0)
    start_sim(processes, tmp_path, torque_enabled=False)
    assert recorder.wait(timeout=60) == 0
    stamps = [stamp_of(row) for row in read_csv(directory / 'joint_states.csv')[1]]
    # 1 s from the first message, not what was left of it; counted in stamps, not rows: a
    # simulator starved by a busy machine published 35 messages in that second.
    assert (stamps[-1] - stamps[0]) / 1e9 > 0.8, 'stopped before the duration'
    assert (stamps[-1] - stamps[0]) / 1e9 < 1.25, 'recorded on past the duration'
    assert _metadata(directory)['stop_reason'] == 'duration of 1 s reached'


def test_a_recording_of_a_urdf_arm_carries_its_chain_to_training(processes, tmp_path):
    from test_chain_tool import LONG_ARM

    from iknet_core.kinematics.urdf import chain_to_urdf
    from iknet_train.data import load_recording

    urdf = tmp_path / 'long_arm.urdf'
    urdf.write_text(chain_to_urdf(LONG_ARM))
    start_sim(processes, tmp_path, torque_enabled=False, seed=5)
    recorder = start_recorder(
        processes, tmp_path, output_dir=tmp_path / 'out', recording_name='run', duration=1.0,
        urdf=urdf, base_link='world', tip_link='end_effector_link', pose_source='fk',
    )  # fmt: skip
    assert recorder.wait(timeout=30) == 0
    directory = tmp_path / 'out' / 'run'
    assert Chain.from_dict(_metadata(directory)['chain']) == LONG_ARM
    pair = (directory / 'kinematics_pose.csv', directory / 'joint_states.csv')
    recording = load_recording(*pair, LONG_ARM)
    np.testing.assert_allclose(
        recording.poses[:, :3], pose_from_joints(LONG_ARM, recording.joints)[:, :3], atol=1e-6
    )
    with pytest.raises(ValueError, match="chain 'long_arm', not from the chain 'open_manipulator"):
        load_recording(*pair, OMX_CHAIN)


def test_metadata_that_cannot_be_written_keeps_the_old_file_and_leaves_no_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from iknet_collect import csv_writer

    path = tmp_path / 'metadata.json'
    csv_writer.write_json_atomic(path, {'status': 'recording'})

    def full_disk(_descriptor: int) -> None:
        raise OSError(errno.ENOSPC, 'No space left on device')

    monkeypatch.setattr(csv_writer.os, 'fsync', full_disk)
    with pytest.raises(RecordingError, match='No space left on device'):
        csv_writer.write_json_atomic(path, {'status': 'complete'})
    assert json.loads(path.read_text()) == {'status': 'recording'}
    assert [p.name for p in tmp_path.iterdir()] == ['metadata.json']
