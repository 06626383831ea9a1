"""Per-topic bookkeeping for a recording: order checks, counts, rate, gaps and skips."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from iknet_collect.message_rows import NS_PER_S, BadMessageError

# An interval this many times the median period counts as a gap (a lost or late message).
GAP_FACTOR = 1.5
LARGEST_GAPS_LISTED = 10
# A stamp more than STAMP_AHEAD_S later, against the time it came, than the stream's stamps so
# far (the first message's: than the time it came) is a bad stamp and skipped ('stamp_ahead'),
# unless CLOCK_STEP_MESSAGES in a row agree with it: then the publisher's clock stepped forward
# (or runs ahead of this machine's), and the stream goes on from there. Written, one stamp an
# hour ahead made every later message 'stamp_not_increasing': the rest of the recording was
# lost. Late messages (a stall, a queue) come with stamps further behind, never ahead, so they
# pass. A message stamped on receipt (no stamp of its own) never confirms a step: in a stream
# behind this clock (sim time, a replay), ten of them in a row would have moved it ahead for good.
STAMP_AHEAD_S = 1.0
CLOCK_STEP_MESSAGES = 10


class StreamStats:
    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.written = 0
        self.first_ns: int | None = None
        self.last_ns: int | None = None
        self.skipped: Counter[str] = Counter()
        self._intervals: list[int] = []
        # Written messages stamped on receipt (no stamp of their own): where all are, a pose
        # stream pairs as stamped on receipt (metadata pose_stamp).
        self.on_receipt = 0
        # The latest stamp-minus-receipt of a written message, and of a run of messages ahead
        # of it (with its length): what STAMP_AHEAD_S and CLOCK_STEP_MESSAGES judge.
        self._offset_ns: int | None = None
        self._ahead: tuple[int, int] | None = None

    @property
    def all_on_receipt(self) -> bool:
        """Whether every message written so far (one at least) was stamped on receipt."""
        return 0 < self.written == self.on_receipt

    def check_order(self, stamp_ns: int, receipt_ns: int) -> None:
        """BadMessageError unless the stamp is later than the last written one, and not
        ahead of the stream's stamps so far (STAMP_AHEAD_S) unless its clock stepped. A
        message with no stamp of its own comes stamped receipt_ns."""
        offset = stamp_ns - receipt_ns
        step = STAMP_AHEAD_S * NS_PER_S
        reference = 0 if self._offset_ns is None else self._offset_ns
        if offset > reference + step:
            start, count = self._ahead if self._ahead else (offset, 0)
            self._ahead = (start, count + 1) if abs(offset - start) <= step else (offset, 1)
            if offset == 0 or self._ahead[1] < CLOCK_STEP_MESSAGES:
                raise BadMessageError(
                    'stamp_ahead',
                    f'{(offset - reference) / NS_PER_S:.3f} s later, against the time it came, '
                    f'than {"the stamps before it" if self._offset_ns is not None else "that"} '
                    f'on {self.topic}',
                )
        self._ahead = None
        if self.last_ns is not None and stamp_ns <= self.last_ns:
            behind = (self.last_ns - stamp_ns) / NS_PER_S
            hint = ''
            if behind > STAMP_AHEAD_S:
                hint = (
                    ': every message is skipped until the stamps pass the last one written (the '
                    "publisher's clock stepped back, or another publisher's stamps are older: "
                    'a new recorder records from the new time)'
                )
            raise BadMessageError(
                'stamp_not_increasing',
                f'{stamp_ns} ns, {behind:.3f} s before the last written on {self.topic}{hint}',
            )

    def wrote(self, stamp_ns: int, receipt_ns: int) -> None:
        if self.last_ns is None:
            self.first_ns = stamp_ns
        else:
            self._intervals.append(stamp_ns - self.last_ns)
        self.last_ns = stamp_ns
        self.written += 1
        offset = stamp_ns - receipt_ns
        self.on_receipt += offset == 0
        # The least delayed message sets it: a late one must not make the next on time look
        # ahead. A confirmed step forward moves it on.
        self._offset_ns = offset if self._offset_ns is None else max(self._offset_ns, offset)

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
