"""rosbag2 recordings (sqlite3 or MCAP) as training data, read without ROS by `rosbags`.

A bag becomes the recorder's CSV pair through the recorder's own row functions, so a bag and a
recording of the same messages load alike: same stamps rule (the header's when it has a nonzero
one, else the time the bag logged the message), same checks, same pairing by stamp.
"""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from iknet_collect.csv_writer import DurableCsvWriter, write_json_atomic
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
from iknet_core.kinematics.chain import Chain
from iknet_train.data import DEFAULT_TOLERANCE_S, Recording, load_recording

logger = logging.getLogger(__name__)

BAG_SUFFIXES = ('.mcap', '.db3')
JOINT_STATE_TYPE = 'sensor_msgs/msg/JointState'
KINEMATICS_POSE_TYPE = 'open_manipulator_msgs/msg/KinematicsPose'
# Both KinematicsPose definitions in use: ROBOTIS's, and a fork's with a header first. A bag
# that stores no definitions (sqlite3 bags before Iron) is read with the one its bytes fit.
_POSE_FIELDS = """geometry_msgs/Pose pose
float64 max_accelerations_scaling_factor
float64 max_velocity_scaling_factor
float64 tolerance
"""
KINEMATICS_POSE_DEFINITIONS = (_POSE_FIELDS, 'std_msgs/Header header\n' + _POSE_FIELDS)


# A bag that opens but does not read is most often one whose recorder was killed.
CUT_SHORT_HINT = (
    " (a bag cut short, as a killed 'ros2 bag record' leaves it, can often be repaired: "
    "'ros2 bag reindex' for its metadata, 'mcap recover' for an MCAP file)"
)


class BagError(ValueError):
    """A bag that cannot give training data; the message names the bag and the problem."""


class _BagNames(logging.Filter):
    """Names the bag where reading its conversion names the temporary folder: that folder is
    gone by the time a user reads the error or log line, and the bag is what they gave."""

    def __init__(self, directory: str, bag: Path | str) -> None:
        super().__init__()
        self.directory, self.bag = directory, str(bag)

    def text(self, text: str) -> str:
        for name in (KINEMATICS_POSE_FILE, JOINT_STATES_FILE, METADATA_FILE):
            converted = str(Path(self.directory, name))
            text = text.replace(converted, f'{self.bag} (converted to {name})')
        return text.replace(self.directory, self.bag)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = self.text(record.getMessage()), None
        return True


def is_bag(path: Path | str) -> bool:
    """A rosbag2 directory (metadata.yaml inside) or a .mcap / .db3 file."""
    path = Path(path)
    if path.is_dir():
        return (path / 'metadata.yaml').is_file()
    return path.is_file() and path.suffix in BAG_SUFFIXES


def bags_below(folder: Path | str) -> list[Path]:
    """The rosbag2 bags in a folder or below it: bag directories, and .mcap / .db3 files that
    are not part of one (a folder of `ros2 bag record` runs, beside CSV recordings or not)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    directories = sorted({metadata.parent for metadata in folder.rglob('metadata.yaml')})
    files = sorted(
        path
        for suffix in BAG_SUFFIXES
        for path in folder.rglob(f'*{suffix}')
        if path.is_file() and not any(d == path.parent or d in path.parents for d in directories)
    )
    return [*directories, *files]


def bag_identity(bag: Path | str) -> Path:
    """The bag a path names, resolved: a bag file inside a bag directory is that directory."""
    path = Path(bag).resolve()
    if path.is_file() and (path.parent / 'metadata.yaml').is_file():
        return path.parent
    return path


def converted_from(pose_csv: Path | str) -> Path | None:
    """The bag iknet-convert made this recording from (its metadata.json's source_bag, resolved
    as bag_identity does), or None for a recorder's or a hand-made one."""
    path = Path(pose_csv).parent / METADATA_FILE
    try:
        source = json.loads(path.read_text(encoding='utf-8')).get('source_bag')
    except (OSError, ValueError, AttributeError):
        return None  # no metadata, or not ours: the recording's own reading says what is wrong
    return bag_identity(source) if isinstance(source, str) else None


def load_bag(bag: Path | str, chain: Chain, tolerance_s: float = DEFAULT_TOLERANCE_S) -> Recording:
    """The bag's poses paired by stamp with the chain's joints, as load_recording gives them."""
    with tempfile.TemporaryDirectory(prefix='iknet-bag-') as directory:
        pose_csv, joint_csv = convert_bag(bag, directory, chain)
        streams = json.loads((Path(directory) / METADATA_FILE).read_text())['streams']
        for name, counts in streams.items():  # iknet-convert prints them; said here for the rest
            if counts['skipped']:
                logger.warning('%s: skipped %s messages %s', bag, name, counts['skipped'])
        names = _BagNames(directory, bag)
        data_logger = logging.getLogger(load_recording.__module__)
        data_logger.addFilter(names)
        try:
            recording = load_recording(pose_csv, joint_csv, chain, tolerance_s)
        except ValueError as error:
            raise BagError(names.text(str(error))) from error
        finally:
            data_logger.removeFilter(names)
    return replace(recording, source=str(bag))


def convert_bag(bag: Path | str, out_dir: Path | str, chain: Chain) -> tuple[Path, Path]:
    """Write the recorder's kinematics_pose.csv, joint_states.csv and metadata.json for a bag.

    Poses come from the bag's KinematicsPose topic, or by FK of the chain's joints when it has
    only joint states. Messages the recorder would skip are skipped and counted in metadata.json.
    """
    from rosbags.rosbag2 import Reader

    bag, out_dir = Path(bag), Path(out_dir)
    if not is_bag(bag):
        files = sorted(bag.glob('*.db3')) + sorted(bag.glob('*.mcap')) if bag.is_dir() else []
        hint = ''
        if len(files) == 1:
            hint = (
                f'; it holds {files[0].name} but no metadata.yaml (a recording killed before it '
                f'closed?): give that file, {files[0]}'
            )
        elif files:
            hint = (
                f'; it holds {len(files)} storage files but no metadata.yaml (a recording killed '
                f'before it closed?): `ros2 bag reindex {bag}` writes it'
            )
        raise BagError(f'{bag}: not a rosbag2 bag (a directory with metadata.yaml, or a .mcap or '
                       f'.db3 file){hint}')  # fmt: skip
    pose_path, joint_path = out_dir / KINEMATICS_POSE_FILE, out_dir / JOINT_STATES_FILE
    if out_dir.exists() and not out_dir.is_dir():
        raise BagError(f'{out_dir} is a file: convert into a folder')
    if pose_path.exists() or joint_path.exists():
        raise BagError(f'{out_dir} already holds a recording: convert into a new folder')
    made = [folder for folder in (out_dir, *out_dir.parents) if not folder.exists()]
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _convert(bag, out_dir, chain, pose_path, joint_path, Reader)
    except BagError:
        for path in (pose_path, joint_path, out_dir / METADATA_FILE):
            path.unlink(missing_ok=True)  # no half-written recording left for a reader to trust
        for folder in made:  # nor the empty folders made for it, innermost first
            if any(folder.iterdir()):
                break
            folder.rmdir()
        raise


def _convert(
    bag: Path, out_dir: Path, chain: Chain, pose_path: Path, joint_path: Path, reader_type: Any
) -> tuple[Path, Path]:
    """convert_bag's work; BagError leaves files behind for convert_bag to remove."""
    try:
        reader = reader_type(bag)
        reader.open()
    except Exception as error:  # rosbags raises several kinds for unreadable bags
        raise BagError(
            f'{bag}: cannot open it as a rosbag2 bag: {error}{CUT_SHORT_HINT}'
        ) from error
    try:
        joints_topic = _one_topic(bag, reader, JOINT_STATE_TYPE, '/joint_states')
        pose_topic, first_pose = _pose_topic(bag, reader, chain)
        typestore = _typestore(bag, reader, pose_topic, first_pose)
        # The recorder's bookkeeping, so a bag skips and counts what a live recording would.
        joint_stats, pose_stats = StreamStats(joints_topic), StreamStats(pose_topic or 'fk')
        joint_writer: DurableCsvWriter | None = None
        joint_names: tuple[str, ...] | None = None
        pose_has_header = True  # until a pose says otherwise
        pose_writer = DurableCsvWriter.create(pose_path, KINEMATICS_POSE_COLUMNS)
        try:
            topics = [joints_topic] + ([pose_topic] if pose_topic else [])
            connections = [c for c in reader.connections if c.topic in topics]
            for connection, log_time_ns, data in _messages(bag, reader, connections):
                message = _deserialize(bag, typestore, data, connection.msgtype)
                try:
                    if connection.topic == joints_topic:
                        record = joint_state_record(
                            message, log_time_ns, chain.joint_names, joint_names
                        )
                        joint_stats.check_order(record.stamp_ns, log_time_ns)
                        if joint_writer is None:  # the first good message fixes the joint set
                            joint_names = record.names
                            joint_writer = DurableCsvWriter.create(
                                joint_path, joint_states_columns(len(record.names))
                            )
                        joint_writer.write(record.row)
                        joint_stats.wrote(record.stamp_ns, log_time_ns)
                        if pose_topic is None:
                            pose = legacy_pose(record.chain_positions, chain).tolist()
                            pose_writer.write(pose_row(record.stamp_ns, '', [*pose, 0, 0, 0]))
                            pose_stats.wrote(record.stamp_ns, log_time_ns)
                    else:
                        values = kinematics_pose_values(message)
                        pose_has_header = has_header(type(message))
                        frame = message.header.frame_id if pose_has_header else ''
                        stamp = message_stamp_ns(message, log_time_ns)
                        pose_stats.check_order(stamp, log_time_ns)
                        pose_writer.write(pose_row(stamp, frame, values))
                        pose_stats.wrote(stamp, log_time_ns)
                except BadMessageError as bad:
                    stats = joint_stats if connection.topic == joints_topic else pose_stats
                    stats.skip(bad.reason)
        finally:
            pose_writer.close()
            if joint_writer is not None:
                joint_writer.close()
    finally:
        reader.close()
    if joint_writer is None:
        raise BagError(
            f'{bag}: no usable {JOINT_STATE_TYPE} message on {joints_topic} (skipped: '
            f'{dict(joint_stats.skipped) or "none"}; the chain needs {chain.joint_names})'
        )
    write_json_atomic(
        out_dir / METADATA_FILE,
        {
            'status': 'complete',
            'stop_reason': f'converted from the bag {bag}',
            'source_bag': str(Path(bag).resolve()),
            'topics': {'joint_states': joints_topic, 'kinematics_pose': pose_topic},
            'pose_source': 'topic' if pose_topic else 'fk',
            'pose_stamp': _pose_stamp(
                pose_topic, pose_has_header and not pose_stats.all_on_receipt
            ),
            'chain': chain.to_dict(),
            'joint_names': list(joint_names or ()),
            'files': {'kinematics_pose': KINEMATICS_POSE_FILE, 'joint_states': JOINT_STATES_FILE},
            'streams': {
                'joint_states': joint_stats.summary(),
                'kinematics_pose': pose_stats.summary(),
            },
        },
    )
    return pose_path, joint_path


def _pose_stamp(pose_topic: str | None, stamped: bool) -> str:
    """metadata.json's pose_stamp, as the recorder writes it: poses without a stamp of their
    own (a header-less KinematicsPose, ROBOTIS's; or every header stamp zero) are stamped with
    the bag's log time, their receipt, which the loader pairs with the joint state before each
    (data.RECEIPT_LAG_S)."""
    if pose_topic is None:
        return 'fk of joint_states'
    return 'header, else the bag log time' if stamped else 'receipt'


def _one_topic(
    bag: Path, reader: Any, msgtype: str, preferred: str, optional: bool = False
) -> str | None:
    """The topic of msgtype to read: the only one, else the preferred name; BagError otherwise."""
    topics = sorted({c.topic for c in reader.connections if c.msgtype == msgtype})
    if len(topics) == 1:
        return topics[0]
    if preferred in topics:
        return preferred
    if not topics and optional:
        return None
    found = ', '.join(f'{c.topic} ({c.msgtype})' for c in reader.connections) or 'no topics'
    problem = f'several {msgtype} topics ({topics}) and none is {preferred}' if topics else (
        f'no {msgtype} topic'
    )  # fmt: skip
    raise BagError(f'{bag}: {problem}; it holds {found}')


def _pose_topic(
    bag: Path, reader: Any, chain: Chain
) -> tuple[str | None, tuple[Any, int, bytes] | None]:
    """The KinematicsPose topic to read and its first message, or None, None for poses by FK:
    a topic recorded with no messages gives no poses, just as a topic never recorded does."""
    topic = _one_topic(bag, reader, KINEMATICS_POSE_TYPE, '/kinematics_pose', True)
    first = None if topic is None else _first_message(bag, reader, topic)
    if first is None:
        logger.info(
            '%s: no %s message; poses are FK of the joint states (chain %s)',
            bag, KINEMATICS_POSE_TYPE, chain.name,
        )  # fmt: skip
        return None, None
    return topic, first


def _first_message(bag: Path, reader: Any, topic: str) -> tuple[Any, int, bytes] | None:
    """The topic's first message (connection, log time, bytes), or None if it has none."""
    connections = [c for c in reader.connections if c.topic == topic]
    messages = _messages(bag, reader, connections)
    first = next(messages, None)
    messages.close()
    return first


def _typestore(
    bag: Path, reader: Any, pose_topic: str | None, first: tuple[Any, int, bytes] | None
) -> Any:
    """The standard ROS 2 types, plus KinematicsPose from the bag's own definition if it stores
    one, else from the variant whose size fits the first pose message (first)."""
    from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore

    typestore = get_typestore(Stores.LATEST)
    if pose_topic is None:
        return typestore
    connection = next(c for c in reader.connections if c.topic == pose_topic)
    definition = getattr(connection, 'msgdef', None)
    text = getattr(definition, 'data', '') if definition is not None else ''
    if text:
        idl = 'IDL' in str(getattr(definition, 'format', ''))
        try:
            types = get_types_from_idl(text) if idl else get_types_from_msg(
                text, KINEMATICS_POSE_TYPE
            )  # fmt: skip
            typestore.register(types)
        except Exception as error:  # rosbags' TypesysError and parse errors
            raise BagError(
                f'{bag}: the definition of {KINEMATICS_POSE_TYPE} it stores does not parse: '
                f'{error}'
            ) from error
        return typestore
    for variant in KINEMATICS_POSE_DEFINITIONS:
        candidate = get_typestore(Stores.LATEST)
        candidate.register(get_types_from_msg(variant, KINEMATICS_POSE_TYPE))
        if _fits(candidate, first[2]):
            return candidate
    raise BagError(f'{bag}: the messages on {pose_topic} fit neither KinematicsPose definition')


def _messages(bag: Path, reader: Any, connections: list) -> Iterator[tuple[Any, int, bytes]]:
    """reader.messages, with a damaged file's errors as BagError naming the bag."""
    try:
        yield from reader.messages(connections)
    except Exception as error:  # rosbags raises several kinds for damaged storage
        raise BagError(f'{bag}: reading its messages failed: {error}{CUT_SHORT_HINT}') from error


def _fits(typestore: Any, data: bytes) -> bool:
    """The bytes deserialize as KinematicsPose and serialize back to the same length."""
    try:
        message = typestore.deserialize_cdr(data, KINEMATICS_POSE_TYPE)
        return len(typestore.serialize_cdr(message, KINEMATICS_POSE_TYPE)) == len(data)
    except Exception:  # a misfit shows as any of several decoding errors
        return False


def _deserialize(bag: Path, typestore: Any, data: bytes, msgtype: str) -> Any:
    try:
        return typestore.deserialize_cdr(data, msgtype)
    except Exception as error:
        raise BagError(f'{bag}: a {msgtype} message does not decode: {error}') from error
