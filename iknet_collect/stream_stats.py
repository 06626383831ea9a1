"""Per-topic bookkeeping for a recording: order checks, counts, rate, gaps and skips."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from iknet_collect.message_rows import NS_PER_S, BadMessageError

# An interval this many times the median period counts as a gap (a lost or late message).
GAP_FACTOR = 1.5
LARGEST_GAPS_LISTED = 10


class StreamStats:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.written = 0
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.skipped: Counter[str] = Counter()
        self._intervals: list[int] = []

    def check_order(self, stamp_ns: int) -> None:
        """BadMessageError unless the stamp is later than the last written one."""
        if self.last_ns is not None and stamp_ns <= self.last_ns:
            raise BadMessageError(
                'stamp_not_increasing', f'{stamp_ns} ns after {self.last_ns} ns on {self.topic}'
            )

    def wrote(self, stamp_ns: int) -> None:
        if self.last_ns is None:
            self.first_ns = stamp_ns
        else:
            self._intervals.append(stamp_ns - self.last_ns)
        self.last_ns = stamp_ns
        self.written += 1

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def summary(self) -> dict[str, Any]:
        """JSON-able figures: count, stamp span, rate (Hz), median period (s) and gaps."""
        summary: dict[str, Any] = {
            'topic': self.topic,
            'written': self.written,
            'skipped': dict(self.skipped),
            'first_stamp': _seconds(self.first_ns),
            'last_stamp': _seconds(self.last_ns),
        }
        if not self._intervals:
            return summary
        intervals = np.array(self._intervals, dtype=np.int64)
        median = float(np.median(intervals))
        span = float(intervals.sum())
        gap_index = np.flatnonzero(intervals > GAP_FACTOR * median)
        largest = gap_index[np.argsort(intervals[gap_index])[::-1][:LARGEST_GAPS_LISTED]]
        # Stamp where each gap starts: first stamp plus the intervals before it.
        starts = self.first_ns + np.concatenate([[0], np.cumsum(intervals)])[largest]
        summary |= {
            'duration_s': span / NS_PER_S,
            'rate_hz': len(intervals) / span * NS_PER_S if span else None,
            'median_period_s': median / NS_PER_S,
            'gap_threshold_s': GAP_FACTOR * median / NS_PER_S,
            'gaps': len(gap_index),
            'gap_time_s': float(intervals[gap_index].sum() - len(gap_index) * median) / NS_PER_S,
            'largest_gaps': [
                {'after_stamp': _seconds(int(s)), 'length_s': int(intervals[i]) / NS_PER_S}
                for s, i in zip(starts, largest, strict=True)
            ],
        }
        return summary


def _seconds(stamp_ns: int | None) -> float | None:
    return None if stamp_ns is None else stamp_ns / NS_PER_S
