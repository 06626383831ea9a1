"""The command-line executables' front door (`iknet-*`, `ros2 run iknet NAME`): a Ctrl-C while a
tool's imports still load (torch takes seconds) ends it as one in its main does, with its status
and no traceback; so does output piped into a reader that stops reading (`| head`).

An import that the signal cuts short may fail as an ImportError (numpy's C core does), so the
signal is recorded rather than told by the exception.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from iknet_core.interrupts import signals_as_interrupt

# Status of a stop by Ctrl-C: a tool's, as a shell expects (exits_on_interrupt); a node that
# launch starts ends with 0 (launch: finished cleanly), as its main does.
TOOL_INTERRUPTED = 128 + signal.SIGINT
NODE_INTERRUPTED = 0

# The pip-installed commands and the module whose main each runs.
TOOLS = {
    'iknet-train': 'iknet_train.train',
    'iknet-test': 'iknet_train.evaluate',
    'iknet-export': 'iknet_train.export',
    'iknet-bench': 'iknet_train.bench',
    'iknet-chain': 'iknet_train.chain_tool',
    'iknet-convert': 'iknet_train.convert',
    'iknet-finetune-study': 'iknet_train.finetune_study',
    'iknet-tune': 'iknet_train.tune',
    'iknet-path-bench': 'iknet_train.path_bench',
    'iknet-sample-bench': 'iknet_train.sample_bench',
}


def run(module: str, interrupted_status: int = TOOL_INTERRUPTED) -> NoReturn:
    """Import module and exit with its main()'s status; interrupted_status where a Ctrl-C
    comes while it imports (unless the process was started with SIGINT ignored, as a script's
    background job is: it stays so). A signal came where signals_as_interrupt's list grew."""

    def unraisable(hook_args: sys.UnraisableHookArgs) -> None:
        # Raised in a garbage-collector callback, the interrupt is dropped: recorded already.
        if not (len(received) > 1 and isinstance(hook_args.exc_value, KeyboardInterrupt)):
            python_hook(hook_args)

    received: list[int] = []  # until signals_as_interrupt's own, below
    python_hook = sys.unraisablehook
    sys.unraisablehook = unraisable
    try:
        with signals_as_interrupt([signal.SIGINT]) as received:
            main = importlib.import_module(module).main
    except BaseException:
        if len(received) > 1:
            sys.exit(interrupted_status)
        raise
    finally:
        sys.unraisablehook = python_hook
    if len(received) > 1:  # its KeyboardInterrupt was dropped, or caught by an import's fallback
        sys.exit(interrupted_status)
    try:
        # Python's own handler is back: Ctrl-C raises KeyboardInterrupt in main. Output to a
        # pipe is flushed here, not at exit, where a reader that went would fail it unseen.
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went (`| head -1`): end as a shell tool killed by SIGPIPE does, and keep
        # Python's flush at exit from failing on the closed pipe again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 128 + signal.SIGPIPE
    sys.exit(status)


def _command(module: str) -> Callable[[], NoReturn]:
    """A console script's target: run(module)."""

    def start() -> NoReturn:
        run(module)

    return start


# The console scripts' targets (pyproject.toml [project.scripts]).
train = _command(TOOLS['iknet-train'])
test = _command(TOOLS['iknet-test'])
export = _command(TOOLS['iknet-export'])
bench = _command(TOOLS['iknet-bench'])
chain = _command(TOOLS['iknet-chain'])
convert = _command(TOOLS['iknet-convert'])
finetune_study = _command(TOOLS['iknet-finetune-study'])
tune = _command(TOOLS['iknet-tune'])
path_bench = _command(TOOLS['iknet-path-bench'])
sample_bench = _command(TOOLS['iknet-sample-bench'])


def failed(prog: str, error: Exception) -> int:
    """A tool's end on an error it refuses with: one line, 'prog: error: ...', and status 1. A
    closed pipe (`| head`) is no error of the tool's: raised on to run(), which ends as a shell
    tool does (tools catch OSError for files they cannot read or write; a broken pipe is one)."""
    if isinstance(error, BrokenPipeError):
        raise error
    print(f'{prog}: error: {error}', file=sys.stderr)
    return 1
