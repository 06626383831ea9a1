"""Batched kernels on every core: the batch is cut into row blocks that run on threads while the
compiled kernels release the GIL (numba's prange would need its threading layer and a slower
first compile, for what a thread pool does here)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from functools import cache
from itertools import pairwise

# Below this many rows per block a thread hand-off costs more than it saves.
MIN_ROWS_PER_BLOCK = 64


@cache
def available_cores() -> int:
    """Cores this process may run on (its affinity, not the machine's count)."""
    if hasattr(os, 'sched_getaffinity'):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


@cache
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix='iknet-batch')


def run_in_blocks(rows: int, threads: int, run: Callable[[slice], None]) -> None:
    """run(block) for consecutive row blocks covering range(rows), on up to `threads` threads
    (0: every available core); exceptions propagate. run must only touch its own rows."""
    if rows < 2 * MIN_ROWS_PER_BLOCK:  # before asking the OS for the cores: single queries
        run(slice(0, rows))
        return
    threads = threads or available_cores()
    blocks = max(1, min(threads, rows // MIN_ROWS_PER_BLOCK))
    if blocks == 1:
        run(slice(0, rows))
        return
    edges = [rows * b // blocks for b in range(blocks + 1)]
    pool = _pool(threads)  # one pool per thread count, whatever the batch size
    futures = [pool.submit(run, slice(start, stop)) for start, stop in pairwise(edges)]
    wait(futures)  # every block has ended before an error propagates: they share the arrays
    for future in futures:
        future.result()
