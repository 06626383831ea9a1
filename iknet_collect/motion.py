"""Smooth joint motions: quintic segments (minimum jerk between rests) joined into trajectories."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Segment:
    """Quintic from (q0, v0) at `start` to (q1, v1) at `end`, zero acceleration at both ends.

    With v0 = v1 = 0 it is the minimum-jerk move people make when they reach for something.
    Times in s, joints in rad, velocities in rad/s.
    """

    start: float
    end: float
    q0: np.ndarray
    q1: np.ndarray
    v0: np.ndarray
    v1: np.ndarray

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Position and velocity at time t (clamped to the segment)."""
        duration = self.end - self.start
        s = min(max((t - self.start) / duration, 0.0), 1.0)
        s2, s3 = s * s, s * s * s
        h00 = 1.0 - 10.0 * s3 + 15.0 * s3 * s - 6.0 * s3 * s2
        h10 = s - 6.0 * s3 + 8.0 * s3 * s - 3.0 * s3 * s2
        h11 = -4.0 * s3 + 7.0 * s3 * s - 3.0 * s3 * s2
        d00 = -30.0 * s2 + 60.0 * s3 - 30.0 * s2 * s2
        d10 = 1.0 - 18.0 * s2 + 32.0 * s3 - 15.0 * s2 * s2
        d11 = -12.0 * s2 + 28.0 * s3 - 15.0 * s2 * s2
        q = h00 * self.q0 + (1.0 - h00) * self.q1 + duration * (h10 * self.v0 + h11 * self.v1)
        v = d00 * (self.q0 - self.q1) / duration + d10 * self.v0 + d11 * self.v1
        return q, v


class Trajectory:
    """Segments in time order; holds the first start before them and the last goal after them."""

    def __init__(self, hold: np.ndarray, velocity: np.ndarray | None = None) -> None:
        """Start at `hold`; the first segment leaves it at `velocity` (default at rest)."""
        self.segments: list[Segment] = []
        self._ends: list[float] = []
        self._hold = np.asarray(hold, dtype=np.float64)
        self._velocity = np.zeros_like(self._hold) if velocity is None else np.asarray(velocity)

    @property
    def end_time(self) -> float:
        return self._ends[-1] if self._ends else float('-inf')

    @property
    def final(self) -> np.ndarray:
        return self.segments[-1].q1 if self.segments else self._hold

    def append(
        self,
        end: float,
        q1: np.ndarray,
        v1: np.ndarray | None = None,
        start: float | None = None,
    ) -> None:
        """Continue from the current end (or rest at `start`) to q1 at time `end`."""
        q0 = self.final
        v0 = self.segments[-1].v1 if self.segments else self._velocity
        begin = self.end_time if start is None else start
        if not end > begin:
            raise ValueError(f'segment must end after it starts: {begin} -> {end}')
        v1 = np.zeros_like(q0) if v1 is None else np.asarray(v1, dtype=np.float64)
        self.segments.append(Segment(begin, end, q0, np.asarray(q1, dtype=np.float64), v0, v1))
        self._ends.append(end)

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Joints (rad) and velocities (rad/s) at time t (s)."""
        if not self.segments:
            return self._hold.copy(), np.zeros_like(self._hold)
        index = bisect.bisect_left(self._ends, t)
        if index == len(self.segments):
            return self.final.copy(), np.zeros_like(self._hold)
        segment = self.segments[index]
        if t < segment.start:  # a pause between segments, or before the first one
            rest = segment.q0 if index == 0 else self.segments[index - 1].q1
            return rest.copy(), np.zeros_like(self._hold)
        return segment.sample(t)
