"""`iknet-train --max-time`: how many epochs fit a wall-clock budget (a GPU lease, a tuning
trial), fitted early in the run from its own timed iterations so the one-cycle schedule still
anneals by the end: a run merely cut off at the deadline would stop at a high learning rate."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch

from iknet_core.device import synchronize

# Iterations left out of the timing (the first ones allocate and warm caches), then timed.
UNTIMED_ITERATIONS = 3
TIMED_ITERATIONS = 30
# Share of the remaining time planned: epochs vary (snapshots, a busy machine).
PLANNED_SHARE = 0.9


def epochs_that_fit(
    remaining_s: float, first_epoch_rest_s: float, epoch_s: float, most: int
) -> int:
    """Epochs, the first (of which first_epoch_rest_s is still to run) included, that fit in
    remaining_s at epoch_s each: at least 1, at most `most`."""
    spare = PLANNED_SHARE * remaining_s - first_epoch_rest_s
    later = math.floor(spare / epoch_s) if epoch_s > 0.0 else most
    return max(1, min(most, 1 + later))


def synced_clock(device: torch.device) -> float:
    """Wall-clock time once the device has finished what was queued."""
    synchronize(device)
    return time.monotonic()


def seconds_taken(run: Callable[[], object], device: torch.device) -> float:
    started = synced_clock(device)
    run()
    return synced_clock(device) - started


class TimeBudget:
    """Times the first epoch and says, once, how many epochs fit: from iterations in its middle
    plus a timed validation where it is long, else from the whole epoch (its validation,
    snapshot and log included: the costs an epoch of few iterations is mostly made of)."""

    def __init__(
        self,
        seconds: float,
        started: float,
        device: torch.device,
        iters_per_epoch: int,
        validate: Callable[[], object],
    ) -> None:
        """validate: one validation pass, timed here where the epoch is not timed whole."""
        self.deadline = started + seconds
        self.device = device
        self.iters_per_epoch = iters_per_epoch
        # Timed from the end of iteration `first` (0-based; -1: from now) to the end of `last`,
        # whose epoch-end work (validation, snapshot) is in the window only when it ends the epoch.
        self.whole_epoch = iters_per_epoch < UNTIMED_ITERATIONS + TIMED_ITERATIONS + 2
        self.validation_s = 0.0 if self.whole_epoch else seconds_taken(validate, device)
        self.first = -1 if self.whole_epoch else UNTIMED_ITERATIONS - 1
        self.last = iters_per_epoch - 1 if self.whole_epoch else self.first + TIMED_ITERATIONS
        self.clock = synced_clock(device)
        self.iteration_s: float | None = None
        self.epoch_s: float | None = None
        self.first_epoch_ends: float | None = None  # when the first epoch should end, once timed

    def iteration_done(self, index: int, most_epochs: int) -> int | None:
        """After iteration `index` of the first epoch: the epochs that fit once timed, or None."""
        if self.iteration_s is not None or index not in (self.first, self.last):
            return None
        if index == self.first:
            self.clock = synced_clock(self.device)
            return None
        now = synced_clock(self.device)
        self.iteration_s = (now - self.clock) / (self.last - self.first)
        self.epoch_s = self.iters_per_epoch * self.iteration_s + self.validation_s
        rest = 0.0 if self.whole_epoch else self.epoch_s - (index + 1) * self.iteration_s
        self.first_epoch_ends = now + rest
        return epochs_that_fit(self.deadline - now, rest, self.epoch_s, most_epochs)

    def overrun_s(self) -> float:
        """Seconds the first epoch should run past the deadline (0: it ends in time), once
        timed: at least one epoch runs, whatever the budget."""
        ends = self.first_epoch_ends
        return 0.0 if ends is None else max(0.0, ends - self.deadline)

    def timing(self) -> str:
        """What the plan was made from, for the log."""
        if self.whole_epoch:
            return f'an epoch {self.epoch_s:.1f} s'
        iteration_ms = self.iteration_s * 1e3
        return f'an iteration {iteration_ms:.1f} ms, validation {self.validation_s:.1f} s'

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline
