"""argparse types of the files and folders the command-line tools write: refused at the start
where they could not be written, instead of a traceback once the work is done; and a report's
files written all together or not at all."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path


def output_file(text: str) -> Path:
    """A file a tool writes when its work is done: refused where it could not be written then
    (a directory, a file where a folder on its path should be, a folder this user cannot write
    in)."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f'{text} is a directory; give a file name')
    _check_can_create(path.parent, text)
    return path


def figure_file(text: str) -> Path:
    """output_file, named with a suffix matplotlib writes (.png, .pdf, .svg, ...): without one
    it would write another file than the one named, with another it would fail at the end."""
    path = output_file(text)
    from matplotlib.backend_bases import FigureCanvasBase  # only where a figure is asked for

    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in formats:
        raise argparse.ArgumentTypeError(
            f'{text}: name a figure file ending in one of '
            f'{", ".join("." + suffix for suffix in sorted(formats))}'
        )
    return path


def output_dir(text: str) -> Path:
    """A folder a tool writes into, checked as output_file's file is."""
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f'{text} is a file, not a folder')
    _check_can_create(path, text)
    return path


def optional_output_dir(text: str) -> Path | None:
    """output_dir, or None for '' (no output)."""
    return output_dir(text) if text else None


def _check_can_create(folder: Path, text: str) -> None:
    """folder, or its nearest existing parent (the rest is made), is a folder this user can
    write in."""
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise argparse.ArgumentTypeError(f'{text}: {existing} is a file, not a folder')
    # A file made and dropped, not os.access: that says yes to root everywhere, /proc and
    # read-only mounts included.
    try:
        tempfile.TemporaryFile(dir=existing).close()  # unnamed where the system allows it
    except OSError as error:
        raise argparse.ArgumentTypeError(
            f'{text}: cannot write in {existing}: {error.strerror}'
        ) from error


@contextlib.contextmanager
def written_together(folder: Path) -> Iterator[Path]:
    """A hidden folder inside folder to write files into, under the names they will have; as
    the block ends they are moved into folder (each over the file of its name); where it raises
    (Ctrl-C while a figure is drawn) nothing is moved and folder is left as it was, so a report
    is never part new and part stale."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix='.partial-', dir=folder))
    try:
        yield staging
        staged = sorted(staging.rglob('*'), key=lambda path: len(path.parts))
        for path in staged:  # all checked before the first moves
            target = folder / path.relative_to(staging)
            if target.exists() and target.is_dir() != path.is_dir():
                kind = 'a folder' if target.is_dir() else 'a file'
                raise OSError(f'{target} is {kind}; move it to write the report')
        for path in staged:
            target = folder / path.relative_to(staging)
            if path.is_dir():
                target.mkdir(exist_ok=True)
            else:
                os.replace(path, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
