"""Recordings from CSV: find them, check them, pair poses with joint states by stamp.

Poses and joint states come from two topics that each drop messages now and then, so rows are
paired by stamp (nearest within a tolerance), never by index. Every problem with a file is a
ValueError naming the file, the line or column, and what is wrong.
"""

from __future__ import annotations

import glob
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from iknet_core.csv_schema import (
    JOINT_STATES_FILE,
    KINEMATICS_POSE_FILE,
    ORIENTATION_COLUMNS,
    POSE_COLUMNS,
    STAMP_COLUMNS,
)
from iknet_core.kinematics.chain import Chain

logger = logging.getLogger(__name__)

# Matching messages carry stamps within about 0.1 ms; the topics run at 100 Hz (10 ms apart).
DEFAULT_TOLERANCE_S = 0.002
# Recorded quaternions are unit length to float precision; anything further off is not a pose.
QUATERNION_NORM_TOLERANCE = 1e-3
_HEADER_LINES = 1  # CSV line of data row i is i + 2 (1-based, after the header)


@dataclass
class Recording:
    """Paired samples of one recording, in time order."""

    source: str
    stamps: np.ndarray  # (N,) s
    poses: np.ndarray  # (N, 7) m and unit quaternion (x, y, z, w)
    joints: np.ndarray  # (N, n_joints) rad, in chain order
    dropped_poses: int = 0
    dropped_joint_states: int = 0

    def __len__(self) -> int:
        return len(self.stamps)


def find_recordings(paths: Sequence[str | Path]) -> list[tuple[Path, Path]]:
    """(kinematics_pose.csv, joint_states.csv) pairs in directories or globs of directories."""
    pairs: list[tuple[Path, Path]] = []
    for entry in paths:
        text = str(entry)
        matches = sorted(glob.glob(text)) if glob.has_magic(text) else [text]
        if not matches:
            raise FileNotFoundError(f'no files match {text!r}')
        for match in map(Path, matches):
            if not match.is_dir():
                raise ValueError(
                    f'{match}: --data takes recording directories; pass CSV files with '
                    '--kinematics-pose-csv and --joint-states-csv'
                )
            found = sorted(match.rglob(KINEMATICS_POSE_FILE))
            if not found:
                raise FileNotFoundError(f'{match}: no {KINEMATICS_POSE_FILE} in it or below')
            for pose_csv in found:
                joint_csv = pose_csv.with_name(JOINT_STATES_FILE)
                if not joint_csv.is_file():
                    raise FileNotFoundError(f'{pose_csv}: no {JOINT_STATES_FILE} beside it')
                pairs.append((pose_csv, joint_csv))
    return pairs


def load_recordings(
    pairs: Sequence[tuple[Path | str, Path | str]],
    chain: Chain,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> list[Recording]:
    return [load_recording(p, j, chain, tolerance_s) for p, j in pairs]


def load_recording(
    pose_csv: Path | str,
    joint_csv: Path | str,
    chain: Chain,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> Recording:
    """One recording: poses paired by stamp with the chain's joints (gripper etc. left out)."""
    pose_csv, joint_csv = Path(pose_csv), Path(joint_csv)
    pose_table = _read_table(pose_csv)
    joint_table = _read_table(joint_csv)
    _require_columns(pose_csv, pose_table, STAMP_COLUMNS + POSE_COLUMNS)
    pose_stamps = _stamps(pose_csv, pose_table)
    poses = _numeric(pose_csv, pose_table, list(POSE_COLUMNS))
    _check_quaternions(pose_csv, poses[:, 3:])
    joint_stamps = _stamps(joint_csv, joint_table)
    joints = _chain_joints(joint_csv, joint_table, chain)

    pose_rows, joint_rows = _pair_by_stamp(
        pose_csv, pose_stamps, joint_csv, joint_stamps, tolerance_s
    )
    recording = Recording(
        source=str(pose_csv.parent),
        stamps=pose_stamps[pose_rows] * 1e-9,
        poses=poses[pose_rows],
        joints=joints[joint_rows],
        dropped_poses=len(pose_stamps) - len(pose_rows),
        dropped_joint_states=len(joint_stamps) - len(np.unique(joint_rows)),
    )
    logger.info(
        '%s: %d pairs; dropped %d of %d poses and %d of %d joint states without a partner '
        'within %.1f ms',
        recording.source,
        len(recording),
        recording.dropped_poses,
        len(pose_stamps),
        recording.dropped_joint_states,
        len(joint_stamps),
        tolerance_s * 1e3,
    )
    return recording


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f'{path}: no such file')
    try:
        # Text first: numbers are checked column by column so errors can name the line.
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f'{path}: empty file (no header line)') from None
    except pd.errors.ParserError as error:
        raise ValueError(f'{path}: not a CSV file this tool can read ({error})') from None
    if table.empty:
        raise ValueError(f'{path}: no data rows after the header')
    return table


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
                f'{path}: line {row + _HEADER_LINES + 1}, column {column!r}: '
                f'{text.iloc[row]!r} is not a finite number'
            )
        values[:, index] = number
    return values


def _stamps(path: Path, table: pd.DataFrame) -> np.ndarray:
    """Stamps in ns (int64), checked to never go back in time."""
    _require_columns(path, table, STAMP_COLUMNS)
    sec, nanosec = _numeric(path, table, list(STAMP_COLUMNS)).T
    stamps = sec.astype(np.int64) * 1_000_000_000 + nanosec.astype(np.int64)
    backwards = np.flatnonzero(np.diff(stamps) < 0)
    if backwards.size:
        row = int(backwards[0]) + 1
        raise ValueError(
            f'{path}: stamps are not monotonic: line {row + _HEADER_LINES + 1} '
            f'({stamps[row] * 1e-9:.9f} s) is earlier than the line before '
            f'({stamps[row - 1] * 1e-9:.9f} s)'
        )
    return stamps


def _check_quaternions(path: Path, quaternions: np.ndarray) -> None:
    norm = np.linalg.norm(quaternions, axis=1)
    bad = np.abs(norm - 1.0) > QUATERNION_NORM_TOLERANCE
    if bad.any():
        row = int(np.argmax(bad))
        raise ValueError(
            f'{path}: line {row + _HEADER_LINES + 1}, columns {list(ORIENTATION_COLUMNS)}: '
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
    joints = np.empty((len(table), chain.n_joints))
    for index, joint_name in enumerate(chain.joint_names):
        matches = names == joint_name
        count = matches.sum(1)
        if (count != 1).any():
            row = int(np.argmax(count != 1))
            problem = 'is missing from' if count[row] == 0 else 'appears twice in'
            raise ValueError(
                f'{path}: line {row + _HEADER_LINES + 1}: joint {joint_name!r} {problem} the '
                f'name columns {list(names[row])}'
            )
        entry = matches.argmax(1)
        for column_index in np.unique(entry):
            rows = entry == column_index
            column = position_columns[column_index]
            values = _numeric(path, table, [column])[:, 0]
            joints[rows, index] = values[rows]
    return joints


def _pair_by_stamp(
    pose_csv: Path,
    pose_stamps: np.ndarray,
    joint_csv: Path,
    joint_stamps: np.ndarray,
    tolerance_s: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Row indices (pose, joint) of messages whose stamps are nearest and within tolerance."""
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
        direction='nearest',
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
        n_blocks = int(block[-1]) + 1 if len(block) else 0
        n_val = round(n_blocks * (1.0 - train_ratio))
        if train_ratio < 1.0 and n_blocks > 1:
            n_val = min(max(n_val, 1), n_blocks - 1)
        val_blocks = rng.choice(n_blocks, size=n_val, replace=False)
        masks.append(~np.isin(block, val_blocks))
    train = np.concatenate(masks) if masks else np.zeros(0, dtype=bool)
    return train, ~train


def drop_repeats(recording: Recording) -> Recording:
    """Without consecutive identical joint rows (the arm at rest): they add no information."""
    keep = np.ones(len(recording), dtype=bool)
    keep[1:] = np.any(np.diff(recording.joints, axis=0) != 0.0, axis=1)
    return Recording(
        source=recording.source,
        stamps=recording.stamps[keep],
        poses=recording.poses[keep],
        joints=recording.joints[keep],
        dropped_poses=recording.dropped_poses,
        dropped_joint_states=recording.dropped_joint_states,
    )
