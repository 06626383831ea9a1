"""`ros2 run iknet recorder`: records /kinematics_pose and /joint_states to CSV, losing nothing.

Each recording is a new directory holding kinematics_pose.csv and joint_states.csv (the headers of
`ros2 topic echo --csv` files) and metadata.json. Rows reach the disk every `flush_period` s.
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from typing import Any

import numpy as np
import rclpy
from open_manipulator_msgs.msg import KinematicsPose
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.timer import Timer
from sensor_msgs.msg import JointState

from iknet_collect.csv_writer import (
    DurableCsvWriter,
    RecordingError,
    create_recording_dir,
    write_json_atomic,
)
from iknet_collect.legacy_pose import legacy_pose
from iknet_collect.message_rows import (
    BadMessageError,
    has_header,
    joint_state_record,
    kinematics_pose_values,
    message_stamp_ns,
    pose_row,
)
from iknet_collect.stream_stats import StreamStats
from iknet_core.csv_schema import (
    JOINT_STATES_FILE,
    KINEMATICS_POSE_COLUMNS,
    KINEMATICS_POSE_FILE,
    METADATA_FILE,
    joint_states_columns,
)
from iknet_core.kinematics.robots import named_chain
from iknet_core.kinematics.urdf import chain_from_urdf
from iknet_ros.node_parameters import choice_validator, declare
from iknet_ros.node_runtime import run_node

POSE_SOURCES = ('topic', 'fk')
RELIABILITIES = ('reliable', 'best_effort')
# 10 s of messages at 100 Hz: a disk stall of seconds queues messages instead of dropping them.
QUEUE_DEPTH = 1000
WARNING_PERIOD_S = 5.0
# A recording whose arm joints all stay this close (rad; a slide's m) to the first joint state's
# is of one pose: said as it ends (a few encoder ticks of a held arm are not a motion).
STILL_RAD = 0.01
# Joint states this long with no pose on the pose topic get a warning (once): an arm without
# /kinematics_pose, recorded without pose_source fk, records nothing to train on. So do poses
# with no joint state (a joint_states_topic with a typo recorded a whole session of nothing).
SILENT_STREAM_WARNING_S = 5.0


def _now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


class Recorder(Node):
    def __init__(self) -> None:
        super().__init__('recorder')
        # Set once the recording exists; a node that failed before (a bad parameter) has nothing
        # to finish when rclpy destroys it.
        self.pose_writer: DurableCsvWriter | None = None
        self.add_on_set_parameters_callback(
            choice_validator({'pose_source': POSE_SOURCES, 'reliability': RELIABILITIES})
        )
        pose_topic = declare(self, 'kinematics_pose_topic', '/kinematics_pose', 'pose topic')
        joint_topic = declare(self, 'joint_states_topic', '/joint_states', 'joint state topic')
        parent = declare(
            self, 'output_dir', '~/iknet_recordings', 'parent folder of the recording folders'
        )
        name = declare(
            self, 'recording_name', '', 'folder of this recording; empty: a UTC timestamp'
        )
        self.pose_source = declare(
            self,
            'pose_source',
            'topic',
            'topic: poses from the pose topic; fk: FK of each joint state, for stacks without one',
        )
        chain_name = declare(
            self,
            'chain',
            'open_manipulator_x',
            'robot chain of the poses: open_manipulator_x, or panda, ur5, so101 (their URDFs come '
            'from example-robot-data)',
        )
        urdf = declare(
            self, 'urdf', '', "the arm as a .urdf/.urdf.xacro file or URDF XML; '' = chain"
        )
        base_link = declare(self, 'base_link', '', 'link the chain starts at, in urdf')
        tip_link = declare(self, 'tip_link', '', 'link the chain ends at (end effector), in urdf')
        self.duration = declare(
            self,
            'duration',
            0.0,
            'stop after this many s from the first message; 0 records until stopped',
            float_range=(0.0, 1e7),
        )
        flush_period = declare(
            self,
            'flush_period',
            0.5,
            'seconds between pushes of rows to the disk',
            float_range=(0.01, 1.0),
        )
        reliability = declare(
            self,
            'reliability',
            'reliable',
            'reliable (loses nothing; ROBOTIS and ros2_control publish reliably) or best_effort '
            '(for best-effort publishers, which a reliable subscription never hears)',
        )
        self.chain = (
            chain_from_urdf(urdf, base_link, tip_link) if urdf else named_chain(chain_name)
        )
        self.done = False
        self.exit_code = 0
        self.stop_reason = ''
        self.joint_names: tuple[str, ...] | None = None
        self.joint_writer: DurableCsvWriter | None = None
        self.first_joints: np.ndarray | None = None  # the arm's, to tell a still arm
        self.arm_moved = False
        self.joint_stats = StreamStats(joint_topic)
        self.pose_stats = StreamStats(pose_topic if self.pose_source == 'topic' else 'fk')
        self.pose_stamp_source = 'fk of joint_states'
        self.no_pose_warned = False
        self.no_joint_state_warned = False
        self.publishers_warned: set[str] = set()
        if self.pose_source == 'topic':
            self.pose_stamp_source = 'header' if has_header(KinematicsPose) else 'receipt'

        started = datetime.datetime.now(datetime.timezone.utc).strftime('%Y%m%dT%H%M%SZ')
        self.directory = create_recording_dir(parent, name or started, numbered=not name)
        self.started = {'wall': _now_iso(), 'ros_time': self.get_clock().now().nanoseconds / 1e9}
        # duration counts from the first message: discovery must not eat into a recording. A
        # timer of its own ends it on time, not at the next flush (up to flush_period later).
        self.duration_timer: Timer | None = None
        self.topics = {'joint_states': joint_topic}
        if self.pose_source == 'topic':
            self.topics['kinematics_pose'] = pose_topic
        qos = QoSProfile(
            history=HistoryPolicy.KEEP_LAST,
            depth=QUEUE_DEPTH,
            reliability=ReliabilityPolicy.RELIABLE
            if reliability == 'reliable'
            else ReliabilityPolicy.BEST_EFFORT,
        )
        self.qos = {'reliability': reliability, 'depth': QUEUE_DEPTH}
        self.pose_writer = DurableCsvWriter.create(
            self.directory / KINEMATICS_POSE_FILE, KINEMATICS_POSE_COLUMNS
        )
        # Whole from the start: a recording killed before it finishes keeps this one.
        self.write_metadata('recording')

        self.create_subscription(JointState, joint_topic, self.on_joint_state, qos)
        if self.pose_source == 'topic':
            self.create_subscription(KinematicsPose, pose_topic, self.on_pose, qos)
        self.create_timer(flush_period, self.on_timer)
        self.get_logger().info(
            f'recording {", ".join(self.topics.values())} (poses: {self.pose_source}) '
            f'into {self.directory}'
            + (f' for {self.duration:g} s' if self.duration else ' until stopped')
        )

    def on_joint_state(self, message: JointState) -> None:
        if self.done:  # messages still queued when the duration ended or an error stopped it
            return
        receipt = self.get_clock().now().nanoseconds
        try:
            record = joint_state_record(message, receipt, self.chain.joint_names, self.joint_names)
            self.joint_stats.check_order(record.stamp_ns, receipt)
            if self.joint_writer is None:
                # The first good message fixes the joint set and so the header.
                self.joint_names = record.names
                self.joint_writer = DurableCsvWriter.create(
                    self.directory / JOINT_STATES_FILE, joint_states_columns(len(record.names))
                )
                self.write_metadata('recording')  # with the joint names, should it be killed
            self.joint_writer.write(record.row)
            self.joint_stats.wrote(record.stamp_ns, receipt)
            if self.first_joints is None:
                self.first_joints = record.chain_positions
            elif not self.arm_moved:
                moved = np.abs(record.chain_positions - self.first_joints).max() > STILL_RAD
                self.arm_moved = bool(moved)
            if record.joints_changed:
                self.get_logger().warning(
                    f'{self.joint_stats.topic} names {list(message.name)} now, '
                    f'{list(self.joint_names)} at first: written in the first ones (a joint '
                    'missing now with empty values, one added left out)',
                    throttle_duration_sec=WARNING_PERIOD_S,
                )
            self.saw_message()
            if self.pose_source == 'fk':
                values = [*legacy_pose(record.chain_positions, self.chain).tolist(), 0.0, 0.0, 0.0]
                self.pose_writer.write(pose_row(record.stamp_ns, '', values))
                self.pose_stats.wrote(record.stamp_ns, receipt)
        except BadMessageError as bad:
            self.skip(self.joint_stats, bad)
        except RecordingError as error:
            self.fail(error)

    def on_pose(self, message: KinematicsPose) -> None:
        if self.done:
            return
        receipt = self.get_clock().now().nanoseconds
        try:
            values = kinematics_pose_values(message)
            stamp = message_stamp_ns(message, receipt)
            self.pose_stats.check_order(stamp, receipt)
            frame_id = message.header.frame_id if has_header(type(message)) else ''
            self.pose_writer.write(pose_row(stamp, frame_id, values))
            self.pose_stats.wrote(stamp, receipt)
            if self.pose_stats.written == 1:
                self.write_metadata('recording')  # how poses are stamped, should it be killed
            self.saw_message()
        except BadMessageError as bad:
            self.skip(self.pose_stats, bad)
        except RecordingError as error:
            self.fail(error)

    def saw_message(self) -> None:
        if self.duration and self.duration_timer is None:
            self.duration_timer = self.create_timer(self.duration, self.on_duration)

    def on_duration(self) -> None:
        self.duration_timer.cancel()
        if not self.done:
            self.stop_reason = f'duration of {self.duration:g} s reached'
            self.done = True

    def skip(self, stats: StreamStats, bad: BadMessageError) -> None:
        stats.skip(bad.reason)
        total = sum(stats.skipped.values())
        self.get_logger().warning(
            f'skipped a message on {stats.topic} ({bad}); {total} skipped there so far',
            throttle_duration_sec=WARNING_PERIOD_S,
        )

    def on_timer(self) -> None:
        try:
            self.sync()
        except RecordingError as error:
            self.fail(error)
        self.warn_of_a_silent_stream()
        self.warn_of_publishers()

    def warn_of_publishers(self) -> None:
        """Once per topic, where more than one node publishes it: their messages go into one
        file by stamp, and another arm's (or a replay's, or unstamped ones, stamped on receipt)
        would pair with this arm's poses."""
        for topic in self.topics.values():
            count = self.count_publishers(topic)
            if count > 1 and topic not in self.publishers_warned:
                self.publishers_warned.add(topic)
                self.get_logger().warning(
                    f'{count} publishers on {topic}: their messages are recorded as one stream, '
                    "by stamp (another arm's, or a bag's played beside the arm, mix into this "
                    "recording's; a gripper's driver alone, without the arm's joints, is skipped)"
                )

    def warn_of_a_silent_stream(self) -> None:
        """Once each, where one of the two streams has come for SILENT_STREAM_WARNING_S and the
        other has not: an arm without /kinematics_pose (recorded without pose_source fk), or a
        joint_states_topic typo, records nothing to train on."""
        if not self.no_pose_warned and self.alone(self.joint_stats, self.pose_stats):
            self.no_pose_warned = True
            self.get_logger().warning(
                f'{self.joint_stats.written} joint states and nothing on '
                f'{self.topics["kinematics_pose"]} in {SILENT_STREAM_WARNING_S:g} s: an arm '
                'without it records with pose_source fk (poses by FK of the joint states, with '
                'its urdf, base_link and tip_link)'
            )
        if not self.no_joint_state_warned and self.alone(self.pose_stats, self.joint_stats):
            self.no_joint_state_warned = True
            topic = self.joint_stats.topic
            self.get_logger().warning(
                f'{self.pose_stats.written} poses and nothing on {topic} in '
                f'{SILENT_STREAM_WARNING_S:g} s ({self.count_publishers(topic)} publishers of '
                'it): is joint_states_topic right?'
            )

    def alone(self, heard: StreamStats, silent: StreamStats) -> bool:
        """Whether heard's stamps span SILENT_STREAM_WARNING_S with nothing from silent (with
        poses from their topic: FK poses come with each joint state)."""
        if self.pose_source != 'topic' or heard.first_ns is None or silent.written:
            return False
        return (
            not silent.skipped and heard.last_ns - heard.first_ns >= SILENT_STREAM_WARNING_S * 1e9
        )

    def sync(self) -> None:
        self.pose_writer.sync()
        if self.joint_writer is not None:
            self.joint_writer.sync()

    def fail(self, error: RecordingError) -> None:
        """Stop recording for good: a full disk does not heal by retrying 100 times a second.
        The first error is the reason: the metadata that then cannot be written either is its
        consequence."""
        if not self.exit_code:
            if not self.done:
                self.get_logger().error(f'recording stopped: {error}')
            self.stop_reason = f'error: {error}'
        self.exit_code = 1
        self.done = True

    def write_metadata(self, status: str) -> None:
        data: dict[str, Any] = {
            'status': status,
            'stop_reason': self.stop_reason,
            'host': socket.gethostname(),
            'pid': os.getpid(),  # with host, tells a live recording from one cut short by a kill
            'topics': self.topics,
            'qos': getattr(self, 'qos', None),
            'pose_source': self.pose_source,
            'pose_stamp': self.pose_stamp(),
            'chain': self.chain.to_dict(),
            'joint_names': list(self.joint_names or ()),
            'start': self.started,
            'stop': None,
            'files': {'kinematics_pose': KINEMATICS_POSE_FILE, 'joint_states': JOINT_STATES_FILE},
            'streams': {
                'joint_states': self.joint_stats.summary(),
                'kinematics_pose': self.pose_stats.summary(),
            },
        }
        if status != 'recording':
            data['stop'] = {
                'wall': _now_iso(),
                'ros_time': self.get_clock().now().nanoseconds / 1e9,
            }
        write_json_atomic(self.directory / METADATA_FILE, data)

    def pose_stamp(self) -> str:
        """metadata's pose_stamp: 'receipt' also where every pose's header stamp was zero (the
        loader pairs such poses with the joint state before each, not within 2 ms)."""
        if self.pose_source == 'topic' and self.pose_stats.all_on_receipt:
            return 'receipt'
        return self.pose_stamp_source

    def finish(self) -> None:
        """Flush and close both files, write the final metadata and report the counts."""
        status = 'failed' if self.exit_code else 'complete'
        if not self.done:  # the spin ended from outside: a signal shut the context down
            self.stop_reason = 'stopped by signal'
        for writer in (self.pose_writer, self.joint_writer):
            if writer is None:
                continue
            try:
                writer.close()
            except RecordingError as error:
                self.fail(error)
                status = 'failed'
        if status == 'complete' and self.joint_writer is not None and not self.arm_moved:
            self.get_logger().warning(
                f"the arm's joints stayed within {STILL_RAD} rad (a slide: m) of the first joint "
                "state's: a recording of one pose, which teaches a model nothing of the rest "
                '(move the arm as it records: hand-guided, with torque off, or by its controller)'
            )
        if self.joint_writer is None:
            skipped = dict(self.joint_stats.skipped)
            self.get_logger().warning(
                f'no joint state written from {self.joint_stats.topic}: '
                + (f'every one was skipped {skipped}' if skipped else 'none arrived')
            )
        try:
            self.write_metadata(status)
        except RecordingError as error:
            # The last write: said here, as fail() is silent once the recording is done.
            self.get_logger().error(f'the recording is not marked finished: {error}')
            self.fail(error)
            status = 'failed'
        # Counted as handed to the files: after a write error, the last of them may not be on
        # disk (whole lines that are are read; a cut one is dropped).
        counted = (
            'recorded' if status == 'complete' else 'handed to the files, the last may be lost'
        )
        self.get_logger().info(
            f'{status} ({self.stop_reason}): {self.joint_stats.written} joint states, '
            f'{self.pose_stats.written} poses {counted}, in {self.directory}; skipped joint '
            f'states {dict(self.joint_stats.skipped)}, poses {dict(self.pose_stats.skipped)}'
        )

    def destroy_node(self) -> None:
        if self.pose_writer is None:
            super().destroy_node()
        elif self.context.ok():
            self.finish()
            super().destroy_node()
        else:
            # A signal shut the context down, and with it the node's /rosout publisher: each
            # line logged through it would add "Failed to publish log message to rosout".
            # Destroyed first, the node leaves its logger writing to the console alone.
            super().destroy_node()
            self.finish()


def main(args: list[str] | None = None) -> int:
    try:
        node = run_node(Recorder, args, finished=lambda recorder: recorder.done)
    except (RecordingError, ValueError, ParameterException) as error:
        rclpy.logging.get_logger('recorder').error(str(error))
        return 1
    return node.exit_code if node is not None else 0  # None: stopped while starting


if __name__ == '__main__':
    sys.exit(main())
