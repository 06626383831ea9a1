"""A person moving the unpowered arm: seeded random reaches and pauses over the workspace."""

from __future__ import annotations

import numpy as np

from iknet_collect.motion import Trajectory
from iknet_core.kinematics import OMX_CHAIN, OMX_HAND_GUIDED_RANGES
from iknet_core.kinematics.fk import joint_frames

HAND_GUIDED_RANGES = np.array(OMX_HAND_GUIDED_RANGES)  # (4, 2) rad: where targets are drawn
# A hand keeps the wrist and the tip above the table the base stands on (m).
MIN_HEIGHT = 0.0
PAUSE_PROBABILITY = 0.3
PAUSE_S = (0.3, 2.0)
PEAK_SPEED = (0.4, 1.4)  # rad/s at the fastest joint, mid-reach
MOVE_S = (0.6, 6.0)
LOCAL_MOVE_PROBABILITY = 0.5
LOCAL_STEP = 0.6  # rad, largest change of one joint in a small adjustment
# People turn the base past pi (the pose of q1 - 2 pi): some reaches go there on purpose.
PAST_PI_PROBABILITY = 0.1


def clear_of_table(q: np.ndarray) -> np.ndarray:
    """(..., 4) -> (...,) bool: the wrist and the tip are above the table."""
    _, origins, tip, _ = joint_frames(OMX_CHAIN, q)
    return (origins[-1][..., 2] >= MIN_HEIGHT) & (tip[..., 2] >= MIN_HEIGHT)


class HandGuidedMotion:
    """Reach, pause, adjust: an endless trajectory, the same for the same seed and start."""

    def __init__(self, rng: np.random.Generator, start: np.ndarray, t0: float = 0.0) -> None:
        self.rng = rng
        self.trajectory = Trajectory(np.asarray(start, dtype=np.float64))
        self._time = t0

    def sample(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Joints (rad) and velocities (rad/s) at time t (s), planning further moves as needed."""
        while self._time <= t:
            self._plan_next()
        return self.trajectory.sample(t)

    def _plan_next(self) -> None:
        if self.rng.random() < PAUSE_PROBABILITY:
            self._time += self.rng.uniform(*PAUSE_S)
            return
        here = self.trajectory.final
        target = self._target(here)
        distance = float(np.max(np.abs(target - here)))
        # Minimum jerk peaks at 1.875 * distance / duration.
        duration = 1.875 * distance / self.rng.uniform(*PEAK_SPEED)
        duration = float(np.clip(duration, *MOVE_S))
        self.trajectory.append(self._time + duration, target, start=self._time)
        self._time += duration

    def _target(self, here: np.ndarray) -> np.ndarray:
        low, high = HAND_GUIDED_RANGES[:, 0], HAND_GUIDED_RANGES[:, 1]
        while True:
            if self.rng.random() < LOCAL_MOVE_PROBABILITY:
                moved = self.rng.random(4) < 0.5
                step = self.rng.uniform(-LOCAL_STEP, LOCAL_STEP, 4) * moved
                target = np.clip(here + step, low, high)
            else:
                target = self.rng.uniform(low, high)
                if self.rng.random() < PAST_PI_PROBABILITY:
                    target[0] = self.rng.uniform(np.pi, high[0])
            # The whole reach must stay above the table, not just its end.
            path = here + np.linspace(0.125, 1.0, 8)[:, None] * (target - here)
            if clear_of_table(path).all():
                return target
