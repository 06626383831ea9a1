"""What an iknet-train run in an --out folder was started with, and whether it finished.

The snapshot --resume carries on is pytorch-pfn-extras' state (model, optimizer, schedule), which
says nothing of the arm or the flags: a run resumed with another arm's flags trained on and
labelled the model as that arm's. And a new run in the same --out wrote its snapshot over a
stopped run's, so that run could no longer be carried on. The record beside the snapshot makes
both checkable. It is the snapshot's name with .json added, and moves with it.
"""

from __future__ import annotations

import errno
import itertools
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: --out is not guarded there
    fcntl = None

from iknet_core.checkpoint import partial_path

logger = logging.getLogger(__name__)

# Flags that may differ when a run is resumed: --epochs takes the place of --max-time (the
# iteration count is checked against the snapshot's schedule instead).
RESUME_MAY_CHANGE = ('epochs',)
# How to train on from a run's model with other flags.
FURTHER = 'to train further from its model, start a new run with --init-from the model it saved'
# iknet-train's flags (argparse dests) recorded besides the settings: what the samples and the
# loss are. Not --data's paths (recordings may move) nor --amp and --device (another machine).
RECORDED_FLAGS = (
    'seed',
    'sample_fk_weight',
    'synthetic',
    'synthetic_ranges',
    'train_val_ratio',
    'val_block_s',
)


def run_record(
    chain: dict[str, Any],
    model: str,
    model_config: dict[str, Any],
    settings: dict[str, Any],
    flags: dict[str, Any],
) -> dict[str, Any]:
    """The record of a run: its arm (Chain.to_dict()), model, the settings its flags and the
    model's defaults make, and other flags that shape it (RECORDED_FLAGS), as JSON gives them
    back (tuples as lists), so that a record read compares equal."""
    record = {
        'chain': chain,
        'model': model,
        'model_config': model_config,
        'settings': {k: v for k, v in settings.items() if k not in RESUME_MAY_CHANGE},
        **{flag: flags[flag] for flag in RECORDED_FLAGS},
    }
    return json.loads(json.dumps(record))


def record_path(snapshot: Path) -> Path:
    """Where the record of the run a snapshot (path) is of lies."""
    return snapshot.with_name(f'{snapshot.name}.json')


def write_run_record(
    snapshot: Path, record: dict[str, Any], finished: bool, stopped_early_at: int | None = None
) -> None:
    """Write the record beside snapshot: just before the run writes that snapshot (its own,
    not an earlier run's), and once more when it finishes (stopped_early_at: the epoch early
    stopping ended it at). Whole or not at all (a temporary file renamed over it): a Ctrl-C
    mid-write leaves the record that was there."""
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    ended = {'finished': finished, 'stopped_early_at': stopped_early_at}
    text = json.dumps({**record, **ended}, indent=2, sort_keys=True) + '\n'
    path = record_path(snapshot)
    partial = partial_path(path)
    partial.write_text(text)
    partial.replace(path)


def read_run_record(snapshot: Path) -> dict[str, Any] | None:
    """The record of the run snapshot is of; None where there is none (a run before records)
    or it is not readable JSON (a crash mid-write: the checks it serves are then skipped)."""
    try:
        record = json.loads(record_path(snapshot).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def check_resumed_run(snapshot: Path, record: dict[str, Any]) -> None:
    """ValueError naming what differs between the run the snapshot is of (its record, beside
    it) and these flags' run."""
    started = read_run_record(snapshot)
    if started is None:
        logger.warning(
            '%s has no run record beside it (%s): the flags the run was started with cannot be '
            'checked, and --resume carries it on with these',
            snapshot, record_path(snapshot).name,
        )  # fmt: skip
        return
    if started.get('stopped_early_at') is not None:
        raise ValueError(
            f'--resume {snapshot} is the snapshot of a run that early stopping ended at epoch '
            f'{started["stopped_early_at"]} (its validation loss had stopped falling) and that '
            f'saved its model: {FURTHER}'
        )
    differs = [key for key in record if key in started and started[key] != record[key]]
    if 'chain' in differs:
        before, now = started['chain'].get('name'), record['chain'].get('name')
        arms = f'{before!r}; these flags train for {now!r}'
        if before == now:
            arms = f"{before!r} whose joints or links differ from these flags' arm"
        raise ValueError(
            f'--resume {snapshot} is a snapshot of a run for arm {arms}: give the --chain/--urdf '
            '(or --data) the run was started with'
        )
    if differs:
        details = '; '.join(_difference(key, started[key], record[key]) for key in sorted(differs))
        raise ValueError(
            f'--resume {snapshot} was started with other flags ({details}): --resume carries a '
            f'run on with the flags it was started with. {carry_on_advice(started)}'
        )


def carry_on_advice(started: dict[str, Any] | None) -> str:
    """What to do instead of resuming a run (its record, None if it has none) with other
    flags: a run that did not finish saved no model to --init-from yet."""
    if started is not None and not started.get('finished', True):
        return f'That run did not finish: carry it on with its own flags first; then {FURTHER}'
    return FURTHER


def _difference(key: str, before: Any, now: Any) -> str:
    if isinstance(before, dict) and isinstance(now, dict):
        keys = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
        return ', '.join(f'{k}: {before.get(k)!r} then, {now.get(k)!r} now' for k in keys)
    return f'{key}: {before!r} then, {now!r} now'


def keep_unfinished_snapshot(snapshot: Path, resume: Path | None) -> Path | None:
    """Move snapshot (a run's --out/snapshot) aside with its record where that run did not
    finish (its record says so), rather than let this run write over it; the path it was moved
    to, or None. Not the snapshot this run resumes: it carries that one on."""
    record = read_run_record(snapshot)
    if not snapshot.is_file() or record is None or record.get('finished', True):
        return None
    if resume is not None and resume.resolve() == snapshot.resolve():
        return None
    stamp = time.strftime('%Y%m%d-%H%M%S')
    kept = snapshot.with_name(f'{snapshot.name}.unfinished-{stamp}')
    for count in itertools.count(2):  # never over one kept in the same second
        if not (kept.exists() or record_path(kept).exists()):
            break
        kept = snapshot.with_name(f'{snapshot.name}.unfinished-{stamp}-{count}')
    snapshot.rename(kept)
    record_path(snapshot).rename(record_path(kept))
    logger.warning(
        '%s held the snapshot of a run that did not finish: kept as %s (carry that run on '
        'with its flags and --resume %s)',
        snapshot.parent, kept, kept,
    )  # fmt: skip
    return kept


# The lock file of an --out folder: a POSIX record lock (lockf), which NFS carries to the other
# machines (a lock on the folder itself stayed on the machine that took it); it names its holder.
LOCK_FILE = '.iknet-train.lock'


@contextmanager
def out_folder_held(out: Path) -> Iterator[None]:
    """Within it, the --out folder (created if need be) is this run's: another process's run
    into it is refused with a ValueError naming this one's host and pid, so that no two runs
    mix their snapshots, records and logs. The lock is this process's (a POSIX lock): its own
    runs may use the folder in turn (iknet-tune's trials, tests). Where the file system takes
    no locks, or on Windows, a warning, and the folder is not guarded."""
    if fcntl is None:
        logger.warning('%s is not guarded against a second run on this system (no fcntl)', out)
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    with open(out / LOCK_FILE, 'a+') as lock:
        try:
            fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EAGAIN):
                logger.warning('%s cannot be locked (%s): not guarded', out, error.strerror)
                yield
                return
            lock.seek(0)
            holder = lock.read().strip() or 'another process'
            raise ValueError(
                f'{out} is the --out of another iknet-train run that is still going ({holder}): '
                'give this run another --out'
            ) from None
        lock.seek(0)
        lock.truncate()
        lock.write(f'host {socket.gethostname()}, pid {os.getpid()}\n')
        lock.flush()
        yield
