"""Recordings from CSV: find them, check them, pair poses with joint states by stamp.

Poses and joint states come from two topics that each drop messages now and then, so rows are
paired by stamp (nearest within a tolerance), never by index. Every problem with a file is a
ValueError naming the file, the line or column, and what is wrong.

Files straight from `ros2 topic echo --csv` (no header line) are read when their first line has
exactly the layout of a stamped KinematicsPose or a JointState. A recorder killed with SIGKILL
leaves metadata.json saying 'recording' and possibly a cut-off last line: the rows up to its last
flush are read, with a warning, and the Recording says it was cut short.
"""

from __future__ import annotations

import csv
import dataclasses
import glob
import json
import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from iknet_core.csv_schema import (
    JOINT_STATES_FILE,
    KINEMATICS_POSE_FILE,
    METADATA_FILE,
    ORIENTATION_COLUMNS,
    POSE_COLUMNS,
    STAMP_COLUMNS,
    headerless_joint_states_columns,
    headerless_kinematics_pose_columns,
    is_data_line,
    is_number,
    is_text_column,
    joint_count_from_columns,
)
from iknet_core.kinematics.chain import Chain, chain_difference
from iknet_core.kinematics.fk import pose_from_joints
from iknet_core.solvers.path_timing import slide_units
from iknet_core.solvers.policy import continuous_joints, into_reach, joint_bounds

logger = logging.getLogger(__name__)

# Matching messages carry stamps within about 0.1 ms; the topics run at 100 Hz (10 ms apart).
DEFAULT_TOLERANCE_S = 0.002
# A pose the recorder stamped on receipt (ROBOTIS's KinematicsPose has no header: metadata.json's
# pose_stamp) came after the joint state published with it, by the transport's lag: it is paired
# with the latest joint state stamped up to this long before it (under the controller's 10 ms
# period). Paired by the nearest stamp within DEFAULT_TOLERANCE_S, 78 % of such poses were
# dropped on a loaded machine (lags of 1.5 to 6.3 ms).
RECEIPT_LAG_S = 0.009
# A recording whose share of poses without a partner is above this gets a warning, not a line
# of information: stamps from two clocks, or a lag the tolerance does not cover.
DROPPED_WARNING_SHARE = 0.1
# Recorded joints this far (rad; a slide's slide_units of it) beyond the chain's reach get a
# warning: the reach holds what a hand-guided arm does past its limits.
BEYOND_REACH_RAD = 0.05
# Recorded quaternions are unit length to float precision; anything further off is not a pose.
QUATERNION_NORM_TOLERANCE = 1e-3
# Recorded positions whose median distance from FK of the recorded joints is over this share of
# the arm's stretched length are not of this arm as described: degrees for radians, millimetres
# for metres, joints named in the wrong order, another tip frame. A warning says so; an arm that
# deviates from its description by a few per cent (the fine-tuning case) stays below it.
FK_MISMATCH_SHARE = 0.1
# Enough of a file's end to hold its last two lines (a joint_states line is well under 1 KiB).
_TAIL_BYTES = 1 << 16


@dataclass
class Recording:
    """Paired samples of one recording, in time order, and how complete its files were."""

    source: str
    stamps: np.ndarray  # (N,) s
    poses: np.ndarray  # (N, 7) m and unit quaternion (x, y, z, w)
    joints: np.ndarray  # (N, n_joints) rad, in chain order
    dropped_poses: int = 0
    dropped_joint_states: int = 0
    # The rows end before the recording did: its recorder was killed, failed or still runs
    # (metadata.json), or a cut-off last line was dropped.
    cut_short: bool = False

    def __len__(self) -> int:
        return len(self.stamps)


def find_recordings(
    paths: Sequence[str | Path], *, none_below_ok: bool = False
) -> list[tuple[Path, Path]]:
    """(kinematics_pose.csv, joint_states.csv) pairs in directories or globs of directories;
    none_below_ok: a directory without any is no error (it holds bags, for the caller)."""
    pairs: list[tuple[Path, Path]] = []
    for entry in paths:
        text = str(entry)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if not matches:
            raise FileNotFoundError(f'no files match {text!r}')
        for match in map(Path, matches):
            if not match.exists():
                raise FileNotFoundError(f'{match}: no such recording directory')
            if not match.is_dir():
                raise ValueError(
                    f'{match}: --data takes recording directories; pass CSV files with '
                    '--kinematics-pose-csv and --joint-states-csv'
                )
            found = sorted(match.rglob(KINEMATICS_POSE_FILE))
            if not found and not none_below_ok:
                raise FileNotFoundError(
                    f'{match}: no {KINEMATICS_POSE_FILE} and no rosbag2 bag in it or below'
                )
            for pose_csv in found:
                joint_csv = pose_csv.with_name(JOINT_STATES_FILE)
                recorder_made = (pose_csv.parent / METADATA_FILE).is_file()
                if not joint_csv.is_file() and not recorder_made:  # else: an empty recording
                    raise FileNotFoundError(f'{pose_csv}: no {JOINT_STATES_FILE} beside it')
                pairs.append((pose_csv, joint_csv))
    return pairs


class EmptyRecordingError(ValueError):
    """A recorder's folder with no rows in a file (stopped before a message, killed before its
    first flush)."""


def load_recordings(
    pairs: Sequence[tuple[Path | str, Path | str]],
    chain: Chain,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> list[Recording]:
    """Every recording; an empty one is left out with a warning where others are not (a glob
    over a folder of recordings, one of them started and stopped with nothing to record)."""
    recordings, empty = [], []
    for pose_csv, joint_csv in pairs:
        try:
            recordings.append(load_recording(pose_csv, joint_csv, chain, tolerance_s))
        except EmptyRecordingError as error:
            empty.append(error)
    if empty and not recordings:
        raise empty[0]
    for error in empty:
        logger.warning('%s; left out', error)
    return recordings


def _check_not_empty(pose_csv: Path, joint_csv: Path) -> None:
    """EmptyRecordingError for a recorder's folder (metadata.json) with a file missing or
    holding no row."""
    metadata_path = pose_csv.parent / METADATA_FILE
    if not metadata_path.is_file():
        return
    for path in (pose_csv, joint_csv):
        if not path.is_file() or _rows_in(path) == 0:
            what = 'missing' if not path.is_file() else 'without a row'
            try:
                metadata = _read_metadata(metadata_path)
            except ValueError:
                metadata = {}  # the checks it serves are skipped
            raise EmptyRecordingError(
                f'{pose_csv.parent}: an empty recording ({path.name} {what})'
                f'{_nothing_on(metadata, path == pose_csv)}{_skipped(metadata, metadata_path)}'
            )


def _nothing_on(metadata: dict[str, Any], poses_missing: bool) -> str:
    """Where a recording has one stream but nothing of the other: '; N ... came, but nothing on
    TOPIC: ...', the likely cause (a topic name mistyped; an arm without /kinematics_pose);
    else ''."""
    try:
        streams = metadata.get('streams') or {}
        topics = metadata.get('topics') or {}
        came, other = ('joint_states', 'kinematics_pose')[:: 1 if poses_missing else -1]
        count = (streams.get(came) or {}).get('written', 0)
        topic = topics.get(other)
    except AttributeError:  # a metadata.json of another shape
        return ''
    if not count or (poses_missing and metadata.get('pose_source') != 'topic'):
        return ''
    what = 'joint states' if came == 'joint_states' else 'poses'
    hint = f'is {other}_topic right?' + (
        ' (an arm without it records with pose_source:=fk: poses by FK of the joint states)'
        if poses_missing
        else ''
    )
    return f'; {count} {what} came, but nothing on {topic}: {hint}'


def _skipped(metadata: dict[str, Any], metadata_path: Path) -> str:
    """What the recorder skipped, by stream and reason (metadata, metadata_path's), as '; the
    recorder skipped ...', or '' where it skipped nothing (or the file says nothing readable)."""
    try:
        streams = metadata.get('streams') or {}
        counts = [
            f'{count} {stream} ({reason})'
            for stream, summary in streams.items()
            for reason, count in (summary.get('skipped') or {}).items()
        ]
    except AttributeError:  # a metadata.json of another shape
        return ''
    return f'; the recorder skipped {", ".join(counts)} (see {metadata_path})' if counts else ''


def _rows_in(path: Path) -> int:
    """Lines holding a value (the header line aside), up to 2: a file with any row is not empty."""
    with path.open('rb') as file:
        lines = [line for _, line in zip(range(3), file, strict=False) if line.strip()]
    return max(len(lines) - 1, 0) if lines and not lines[0][:1].isdigit() else len(lines)


def load_recording(
    pose_csv: Path | str,
    joint_csv: Path | str,
    chain: Chain,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> Recording:
    """One recording: poses paired by stamp with the chain's joints (gripper etc. left out)."""
    pose_csv, joint_csv = Path(pose_csv), Path(joint_csv)
    _check_not_empty(pose_csv, joint_csv)
    unfinished = stamped_on_receipt = False
    # metadata.json describes the files of its folder.
    if pose_csv.parent.resolve() == joint_csv.parent.resolve():
        metadata_path = pose_csv.parent / METADATA_FILE
        if metadata_path.is_file():
            metadata = _read_metadata(metadata_path)
            unfinished = _check_metadata(metadata_path, metadata, chain)
            stamped_on_receipt = metadata.get('pose_stamp') == 'receipt'
    pose_table, pose_cut = _read_table(pose_csv, _KINEMATICS_POSE)
    joint_table, joint_cut = _read_table(joint_csv, _JOINT_STATES)
    _require_columns(pose_csv, pose_table, STAMP_COLUMNS + POSE_COLUMNS)
    pose_stamps = _stamps(pose_csv, pose_table)
    poses = _numeric(pose_csv, pose_table, list(POSE_COLUMNS))
    _check_quaternions(pose_csv, poses[:, 3:], pose_table.index)
    joint_stamps = _stamps(joint_csv, joint_table)
    recorded = _chain_joints(joint_csv, joint_table, chain)
    # Models and figures are about the arm, not how many turns a continuous joint has counted.
    joints = into_reach(chain, recorded)

    pose_rows, joint_rows = _pair_by_stamp(
        pose_csv, pose_stamps, joint_csv, joint_stamps, tolerance_s, stamped_on_receipt
    )
    recording = Recording(
        source=str(pose_csv.parent),
        stamps=pose_stamps[pose_rows] * 1e-9,
        poses=poses[pose_rows],
        joints=joints[joint_rows],
        dropped_poses=len(pose_stamps) - len(pose_rows),
        dropped_joint_states=len(joint_stamps) - len(np.unique(joint_rows)),
        cut_short=unfinished or pose_cut or joint_cut,
    )
    window = f'{tolerance_s * 1e3:.1f} ms'
    if stamped_on_receipt:
        window = f'{max(tolerance_s, RECEIPT_LAG_S) * 1e3:.1f} ms before each pose (on receipt)'
    many_dropped = recording.dropped_poses > DROPPED_WARNING_SHARE * len(pose_stamps)
    hint = ': stamps from two clocks, or a lag between the topics? (--tolerance-ms)'
    logger.log(
        logging.WARNING if many_dropped else logging.INFO,
        '%s: %d pairs%s; dropped %d of %d poses and %d of %d joint states without a partner '
        'within %s%s',
        recording.source,
        len(recording),
        ' (cut short)' if recording.cut_short else '',
        recording.dropped_poses,
        len(pose_stamps),
        recording.dropped_joint_states,
        len(joint_stamps),
        window,
        hint if many_dropped else '',
    )
    _warn_if_another_arm(recording, chain)
    if (moved := int((joints != recorded).any(1).sum())) > 0:
        logger.info(
            '%s: took %d joint states whole turns back into the reach of the joints that turn '
            'whole turns (policy.into_reach: the same arm)',
            recording.source, moved,
        )  # fmt: skip
    return recording


def _warn_if_another_arm(recording: Recording, chain: Chain) -> None:
    """Warn where FK of the recorded joints misses the recorded positions by more than
    FK_MISMATCH_SHARE of the arm's length (median): the data would train a model of nothing;
    where only some pairs miss by that much (a second publisher on a topic);
    and where joints go beyond the chain's reach (poses by FK of another arm's joints that share
    its joint names, an xArm's joint1..joint4 recorded as an OM-X's, match that FK)."""
    if not len(recording):
        return
    low, high = joint_bounds(chain, 'reach')
    margin = BEYOND_REACH_RAD * slide_units(chain)
    beyond = (~continuous_joints(chain)) & (
        (recording.joints < low - margin) | (recording.joints > high + margin)
    )
    if beyond.any():
        joint = int(np.argmax(beyond.sum(0)))
        values = recording.joints[beyond[:, joint], joint]
        logger.warning(
            '%s: %d of %d rows have joints beyond the reach of %s (%s up to %.3f, its reach '
            '[%.3f, %.3f]): recorded for another arm? (the recorder takes yours as urdf, '
            'base_link and tip_link)',
            recording.source, int(beyond.any(1).sum()), len(recording), chain.name or 'the chain',
            chain.joint_names[joint], values[np.argmax(np.abs(values))], low[joint], high[joint],
        )  # fmt: skip
    reached = pose_from_joints(chain, recording.joints)[:, :3]
    misses = np.linalg.norm(reached - recording.poses[:, :3], axis=-1)
    median = float(np.median(misses))
    mismatch_m = FK_MISMATCH_SHARE * chain.stretched_length
    far = misses > mismatch_m
    if median <= mismatch_m and far.any():
        # A few pairs, not the arm: a second publisher on a topic (a second simulator), or
        # poses and joint states from different moments.
        logger.warning(
            '%s: %d of %d pairs miss FK of their joints by more than %.0f mm (up to %.0f mm): '
            'two publishers on a topic, or poses and joint states from different moments? '
            'They are trained on as they are',
            recording.source, int(far.sum()), len(recording),
            mismatch_m * 1e3, misses.max() * 1e3,
        )  # fmt: skip
    if median > mismatch_m:
        logger.warning(
            '%s: FK of the recorded joints on %s misses the recorded positions by %.1f mm '
            '(median; the arm is %.0f mm stretched): is it this arm, are the joints in rad (m '
            'for a slide) and the poses in m, the joint names right, the pose that of %s?',
            recording.source, chain.name or 'the chain', median * 1e3,
            chain.stretched_length * 1e3, chain.tip_frame or 'the chain\'s tip',
        )  # fmt: skip


@dataclass(frozen=True)
class _Layout:
    """What one of the two files holds, for reading it without a header line."""

    columns: Callable[[Sequence[str]], tuple[str, ...]]  # header for a first data line
    describe: Callable[[tuple[str, ...]], str]  # the message those columns hold


_KINEMATICS_POSE = _Layout(
    headerless_kinematics_pose_columns, lambda columns: 'a stamped KinematicsPose'
)
_JOINT_STATES = _Layout(
    headerless_joint_states_columns,
    lambda columns: f'a JointState of {joint_count_from_columns(columns)} joints',
)


def _read_metadata(path: Path) -> dict[str, Any]:
    """A recorder's metadata.json as a dict; ValueError naming the file where it is not one."""
    try:
        metadata = json.loads(path.read_text(encoding='utf-8'))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f'{path}: not a readable JSON file ({error})') from None
    if not isinstance(metadata, dict):
        raise ValueError(f'{path}: expected a JSON object, got {type(metadata).__name__}')
    return metadata


def _metadata_chain(path: Path, metadata: dict[str, Any]) -> Chain | None:
    if metadata.get('chain') is None:
        return None
    try:
        return Chain.from_dict(metadata['chain'])
    except ValueError as error:
        raise ValueError(f'{path}: chain: {error}') from None


def recorded_chain(pairs: Sequence[tuple[Path | str, Path | str]]) -> Chain | None:
    """The chain the recorder wrote in the recordings' metadata.json (the arm they were made
    for), None where none says; ValueError naming two that differ."""
    found: dict[Chain, Path] = {}
    for pose_csv, _ in pairs:
        path = Path(pose_csv).parent / METADATA_FILE
        if path.is_file() and (chain := _metadata_chain(path, _read_metadata(path))):
            found.setdefault(chain, path.parent)
    if len(found) > 1:
        (a, first), (b, second) = list(found.items())[:2]
        raise ValueError(
            f'the recordings were made for different arms: {first} for {a.name!r}, {second} for '
            f'{b.name!r} ({chain_difference(a, b)}); give the arm with --chain or --urdf'
        )
    return next(iter(found), None)


def _check_metadata(path: Path, metadata: dict[str, Any], chain: Chain) -> bool:
    """Refuses a recording made for another chain; warns (and says True) if it never finished.
    metadata: the recording's metadata.json (path), read."""
    recorded = _metadata_chain(path, metadata)
    if recorded is not None and recorded != chain:
        raise ValueError(
            f'{path}: the recording was made for another arm: its poses come from chain '
            f'{recorded.name!r}, not from the chain {chain.name!r} asked for '
            f'({chain_difference(recorded, chain)})'
        )
    status = metadata.get('status')
    if status == 'recording':
        logger.warning('%s: %s', path.parent, _unfinished(metadata))
        return True
    if status == 'failed':
        logger.warning(
            '%s: the recorder failed (%s); the rows it wrote before are used',
            path.parent,
            metadata.get('stop_reason') or 'no reason given',
        )
        return True
    return False


def _unfinished(metadata: dict[str, Any]) -> str:
    """Why metadata.json still says 'recording': the recorder was killed, or still runs."""
    host, pid = metadata.get('host'), metadata.get('pid')
    valid_pid = isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 2**31
    # os.kill(pid, 0) only asks on POSIX; on Windows it would end the process.
    if host == socket.gethostname() and valid_pid and os.name == 'posix':
        if _process_exists(pid):
            return (
                f'still being recorded: its recorder (pid {pid} on this host) is running; '
                'the rows it has flushed so far are used'
            )
        return (
            f'cut short: its recorder (pid {pid} on this host) was killed before it finished '
            "(metadata.json still says 'recording'); rows up to its last flush are used"
        )
    where = f'on host {host!r}' if host != socket.gethostname() else 'without a pid'
    return (
        f"never finished: metadata.json still says 'recording' and it was recorded {where}, "
        'so it is still running elsewhere or was cut short; rows up to its last flush are used'
    )


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only checks that the process exists
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def _read_table(path: Path, layout: _Layout) -> tuple[pd.DataFrame, bool]:
    """The rows as text, indexed by their line in the file; True if a cut-off last line went."""
    if path.is_dir():
        raise FileNotFoundError(f'{path} is a folder, not a CSV file (--data takes folders)')
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such file')
    first_line, last_lines, ends_with_newline = _edge_lines(path)
    first = _fields(first_line)
    names = None
    if is_data_line(first):
        try:
            names = layout.columns(first)
        except ValueError as error:
            raise ValueError(
                f'{path}: no header line (line 1 holds values) and line 1 is not '
                f'`ros2 topic echo --csv` output this tool reads: {error}'
            ) from None
    try:
        # Text first: numbers are checked column by column so errors can name the line.
        table = pd.read_csv(
            path,
            dtype=str,
            keep_default_na=False,
            header=0 if names is None else None,
            names=names,
            index_col=False,
            encoding_errors='replace',  # a kill can cut a character in two
            skip_blank_lines=False,  # dropped below, once rows are numbered by their lines
        )
    except pd.errors.EmptyDataError:
        raise ValueError(f'{path}: empty file (no header line)') from None
    except pd.errors.ParserError as error:
        raise ValueError(f'{path}: not a CSV file this tool can read ({error})') from None
    first_data_line = 1 if names is not None else 2
    table.index = pd.RangeIndex(first_data_line, first_data_line + len(table))
    # Blank lines (spaces at most) hold no row: rows with nothing in their first field, then in
    # none of the others (a field a line lacks reads as '').
    first_empty = np.flatnonzero(table.iloc[:, 0].str.strip().eq('').to_numpy())
    blank = first_empty[table.iloc[first_empty, 1:].eq('').all(axis=1).to_numpy()]
    table = table.drop(index=table.index[blank])
    cut = False
    if not table.empty and (reason := _cut_off(table, last_lines, ends_with_newline)):
        logger.warning(
            '%s: dropped its last line %d (%s): cut off, as a killed writer leaves it',
            path,
            table.index[-1],
            reason,
        )
        table, cut = table.iloc[:-1], True
    if table.empty:
        raise ValueError(f'{path}: no data rows after the header')
    if names is not None:
        logger.info(
            '%s: no header line; read as `ros2 topic echo --csv` output of %s (%d fields)',
            path,
            layout.describe(names),
            len(names),
        )
    return table, cut


def _edge_lines(path: Path) -> tuple[str, list[str], bool]:
    """First line, the last two non-blank lines and whether the file ends with a newline."""
    with path.open('rb') as file:
        first = file.readline()
        size = file.seek(0, os.SEEK_END)
        file.seek(max(0, size - _TAIL_BYTES))
        tail = file.read()
    lines = tail.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    first_line = first.rstrip(b'\r\n').decode('utf-8-sig', errors='replace')
    last_lines = [line.decode('utf-8', errors='replace') for line in lines[-2:]]
    return first_line, last_lines, tail.endswith((b'\n', b'\r'))


def _fields(line: str) -> list[str]:
    return next(csv.reader([line]), [])


def _cut_off(table: pd.DataFrame, last_lines: list[str], ends_with_newline: bool) -> str:
    """Why the table's last row is a line a kill cut off, or '' when it is whole.

    A kill stops a writer anywhere in a line: the line then has fewer fields than the header and
    the line before it, or (no newline after it) a number cut in two. Files whose every row is
    short (empty velocity and effort arrays under a full header) keep their last row.
    """
    columns = list(table.columns)
    last = _fields(last_lines[-1])
    before = len(_fields(last_lines[-2])) if len(last_lines) > 1 else len(columns)
    if len(last) < min(len(columns), before):
        return f'{len(last)} of {len(columns)} fields'
    if not ends_with_newline:
        for column, text in zip(columns, last, strict=False):
            if text and not is_text_column(column) and not is_number(text):
                return f'no newline, and {column} is {text!r}'
    return ''


def _require_columns(path: Path, table: pd.DataFrame, required: Sequence[str]) -> None:
    missing = [column for column in required if column not in table.columns]
    if missing:
        raise ValueError(
            f'{path}: missing column(s) {missing}; the header has {list(table.columns)} '
            '(see iknet_core/csv_schema.py for the expected header)'
        )


def _numeric(path: Path, table: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """Columns as float64 (N, len(columns)); ValueError at the first non-finite value."""
    values = np.empty((len(table), len(columns)))
    for index, column in enumerate(columns):
        text = table[column]
        number = pd.to_numeric(text, errors='coerce').to_numpy(dtype=np.float64)
        bad = ~np.isfinite(number)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(
                f'{path}: line {table.index[row]}, column {column!r}: '
                f'{text.iloc[row]!r} is not a finite number'
            )
        values[:, index] = number
    return values


def _stamps(path: Path, table: pd.DataFrame) -> np.ndarray:
    """Stamps in ns (int64), checked to never go back in time."""
    _require_columns(path, table, STAMP_COLUMNS)
    sec, nanosec = _numeric(path, table, list(STAMP_COLUMNS)).T
    # builtin_interfaces/Time: whole seconds and nanoseconds under one second (a fractional sec
    # was cut to the second, and every pose paired with one joint state of it).
    for column, values, high in (('sec', sec, 2.0**63 / 1e9), ('nanosec', nanosec, 1e9)):
        bad = (values != np.floor(values)) | (values < 0) | (values >= high)
        if bad.any():
            row = int(np.argmax(bad))
            raise ValueError(
                f'{path}: line {table.index[row]}, column {column!r}: '
                f"{table[column].iloc[row]!r} is not a stamp's {column} (a whole number, "
                f'{"nanoseconds from 0 to 999999999" if column == "nanosec" else "from 0"})'
            )
    stamps = sec.astype(np.int64) * 1_000_000_000 + nanosec.astype(np.int64)
    backwards = np.flatnonzero(np.diff(stamps) < 0)
    if backwards.size:
        row = int(backwards[0]) + 1
        raise ValueError(
            f'{path}: stamps are not monotonic: line {table.index[row]} '
            f'({stamps[row] * 1e-9:.9f} s) is earlier than the line before '
            f'({stamps[row - 1] * 1e-9:.9f} s)'
        )
    return stamps


def _check_quaternions(path: Path, quaternions: np.ndarray, lines: pd.Index) -> None:
    norm = np.linalg.norm(quaternions, axis=1)
    bad = np.abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(
            f'{path}: line {lines[row]}, columns {list(ORIENTATION_COLUMNS)}: '
            f'quaternion norm {norm[row]:.6f} is not 1'
        )


def _chain_joints(path: Path, table: pd.DataFrame, chain: Chain) -> np.ndarray:
    """The chain's joints (N, n) by name from the name/position columns; others are left out."""
    n_entries = sum(1 for c in table.columns if c.startswith('name') and c[4:].isdigit())
    if n_entries == 0:
        raise ValueError(
            f'{path}: no name0, name1, ... columns; the header has {list(table.columns)}'
        )
    name_columns = [f'name{i}' for i in range(n_entries)]
    position_columns = [f'position{i}' for i in range(n_entries)]
    _require_columns(path, table, name_columns + position_columns)
    names = table[name_columns].to_numpy(dtype=str)
    unique, inverse = np.unique(names, return_inverse=True)  # a call per name, not per cell
    is_name = [is_number(name) and name not in chain.joint_names for name in unique.tolist()]
    numbers = np.array(is_name, dtype=bool)[inverse].reshape(names.shape)
    if numbers.any():
        row, entry = (int(i[0]) for i in np.nonzero(numbers))
        raise ValueError(
            f'{path}: line {table.index[row]}, column {name_columns[entry]!r}: '
            f'{str(names[row, entry])!r} is a number where a joint name belongs: the header names '
            f'{n_entries} joints, and the rows seem to hold fewer (a header of another arm?)'
        )
    joints = np.empty((len(table), chain.n_joints))
    for index, joint_name in enumerate(chain.joint_names):
        matches = names == joint_name
        count = matches.sum(1)
        if (count != 1).any():
            row = int(np.argmax(count != 1))
            problem = 'is missing from' if count[row] == 0 else 'appears twice in'
            raise ValueError(
                f'{path}: line {table.index[row]}: joint {joint_name!r} {problem} the '
                f'name columns {names[row].tolist()}'
            )
        entry = matches.argmax(1)
        for column_index in np.unique(entry):
            rows = entry == column_index
            # This joint's rows alone: in the others the column holds another joint's value,
            # which may be empty (a gripper's NaN; a joint the recorder had no value for).
            column = position_columns[column_index]
            joints[rows, index] = _numeric(path, table[rows], [column])[:, 0]
    return joints


def _pair_by_stamp(
    pose_csv: Path,
    pose_stamps: np.ndarray,
    joint_csv: Path,
    joint_stamps: np.ndarray,
    tolerance_s: float,
    stamped_on_receipt: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (pose, joint) of messages whose stamps are nearest and within tolerance;
    poses stamped_on_receipt: the latest joint state up to RECEIPT_LAG_S (or tolerance_s, the
    longer) before each."""
    if stamped_on_receipt:
        tolerance_s = max(tolerance_s, RECEIPT_LAG_S)
    tolerance_ns = round(tolerance_s * 1e9)
    if (
        pose_stamps[0] > joint_stamps[-1] + tolerance_ns
        or joint_stamps[0] > pose_stamps[-1] + tolerance_ns
    ):
        raise ValueError(
            f'no overlap in time: {pose_csv} spans {pose_stamps[0] * 1e-9:.3f} to '
            f'{pose_stamps[-1] * 1e-9:.3f} s, {joint_csv} spans {joint_stamps[0] * 1e-9:.3f} '
            f'to {joint_stamps[-1] * 1e-9:.3f} s'
        )
    merged = pd.merge_asof(
        pd.DataFrame({'stamp': pose_stamps, 'pose_row': np.arange(len(pose_stamps))}),
        pd.DataFrame({'stamp': joint_stamps, 'joint_row': np.arange(len(joint_stamps))}),
        on='stamp',
        direction='backward' if stamped_on_receipt else 'nearest',
        tolerance=tolerance_ns,
    )
    merged = merged.dropna(subset=['joint_row'])
    if merged.empty:
        raise ValueError(
            f'no pose in {pose_csv} has a joint state in {joint_csv} within '
            f'{tolerance_s * 1e3:g} ms (stamps from different clocks?)'
        )
    return merged['pose_row'].to_numpy(), merged['joint_row'].to_numpy(dtype=np.int64)


def time_block_split(
    recordings: Sequence[Recording], train_ratio: float, block_s: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Boolean masks (train, val) over the concatenated recordings, by whole time blocks.

    Neighbouring samples of a time series are near copies; a random row split would put them on
    both sides. Whole blocks of block_s seconds go to one side, drawn at random per recording.
    """
    if not 0.0 < train_ratio <= 1.0:
        raise ValueError(f'train ratio must be in (0, 1], got {train_ratio}')
    rng = np.random.default_rng(seed)
    masks = []
    for recording in recordings:
        block = ((recording.stamps - recording.stamps[0]) // block_s).astype(np.int64)
        # A last block of under half a block's time joins the one before: a recording whose
        # length is a whole number of blocks ended in a block of one row, which a draw could
        # make the whole validation set.
        if len(block) and block[-1] > 0:
            last = block == block[-1]
            if recording.stamps[-1] - recording.stamps[last][0] < 0.5 * block_s:
                block[last] = block[~last][-1]
        # The blocks that hold samples: a gap (a stamp from a clock at 0 before the others) left
        # empty blocks that took validation draws, and a billion of them filled the memory.
        held = np.unique(block)
        n_blocks = len(held)
        n_val = round(n_blocks * (1.0 - train_ratio))
        if train_ratio < 1.0 and n_blocks > 1:
            n_val = min(max(n_val, 1), n_blocks - 1)
        val_blocks = rng.choice(held, size=n_val, replace=False)
        masks.append(~np.isin(block, val_blocks))
    train = np.concatenate(masks) if masks else np.zeros(0, dtype=bool)
    return train, ~train


def drop_repeats(recording: Recording) -> Recording:
    """Without consecutive identical joint rows (the arm at rest): they add no information."""
    keep = np.ones(len(recording), dtype=bool)
    keep[1:] = np.any(np.diff(recording.joints, axis=0) != 0.0, axis=1)
    return dataclasses.replace(
        recording,
        stamps=recording.stamps[keep],
        poses=recording.poses[keep],
        joints=recording.joints[keep],
    )
