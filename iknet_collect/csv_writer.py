"""Files of a recording that survive a crash: a fresh directory, fsynced CSVs, atomic metadata."""

from __future__ import annotations

import contextlib
import csv
import itertools
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO


class RecordingError(RuntimeError):
    """The recording cannot go on (directory taken or unwritable, disk full); a clear message."""


def create_recording_dir(parent: str | Path, name: str, numbered: bool = False) -> Path:
    """parent/name, made if needed; refuses a non-empty one so nothing is ever overwritten.
    numbered (a name the recorder chose, its start time to the second): a new folder, name-2,
    name-3, ... where name is taken, so two recorders started in one second both record."""
    target = Path(parent).expanduser() / name
    for folder in (target.parent, *target.parent.parents):
        if folder.exists() and not folder.is_dir():
            raise RecordingError(f'cannot record into {target}: {folder} is a file, not a folder')
    try:
        if numbered:
            target = _new_numbered_dir(target)
        target.mkdir(parents=True, exist_ok=True)
        if any(target.iterdir()):
            raise RecordingError(f'{target} already exists and is not empty; choose another name')
        probe = target / '.write_test'
        probe.write_bytes(b'')
        probe.unlink()
    except OSError as error:
        raise RecordingError(f'cannot record into {target}: {error.strerror or error}') from error
    return target


def _new_numbered_dir(target: Path) -> Path:
    """target, or target-2, target-3, ...: the first that did not exist, made here (mkdir is
    atomic: of two recorders asking at once, one gets each)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    for count in itertools.count(1):
        candidate = target if count == 1 else target.with_name(f'{target.name}-{count}')
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        return candidate
    raise AssertionError('unreachable')


class DurableCsvWriter:
    """Rows of one CSV file; sync() pushes them to the disk (flush + fsync)."""

    def __init__(self, file: TextIO, header: Sequence[str]) -> None:
        self.path = Path(file.name)
        self.rows = 0
        self._file = file
        self._writer = csv.writer(self._file, lineterminator='\n')
        self._call(self._writer.writerow, header)

    @classmethod
    def create(cls, path: Path, header: Sequence[str]) -> DurableCsvWriter:
        """A new file; an existing one is never overwritten."""
        try:
            file = open(path, 'x', newline='', encoding='utf-8')  # noqa: SIM115 - closed in close()
        except OSError as error:
            raise RecordingError(f'cannot create {path}: {error.strerror or error}') from error
        return cls(file, header)

    def write(self, row: Sequence[str]) -> None:
        self._call(self._writer.writerow, row)
        self.rows += 1

    def sync(self) -> None:
        if not self._file.closed:
            self._call(self._file.flush)
            self._call(os.fsync, self._file.fileno())

    def close(self) -> None:
        if self._file.closed:
            return
        try:
            self.sync()
        finally:
            # The sync above already reported why the data did not reach the disk.
            with contextlib.suppress(OSError):
                self._file.close()

    def _call(self, function: Any, *args: Any) -> Any:
        try:
            return function(*args)
        except OSError as error:
            raise self._error(error) from error

    def _error(self, error: OSError) -> RecordingError:
        return RecordingError(f'cannot write {self.path}: {error.strerror or error}')


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Replace path with data in one step: a crash leaves the old or the new file, never half."""
    temporary = path.with_name(f'.{path.name}.tmp')
    try:
        with open(temporary, 'w', encoding='utf-8') as file:
            json.dump(data, file, indent=2)
            file.write('\n')
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)  # a full disk leaves a part-written one otherwise
        raise RecordingError(f'cannot write {path}: {error.strerror or error}') from error
