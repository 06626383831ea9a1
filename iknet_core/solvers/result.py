"""What every IK solver answers for one pose, so the server and benchmark treat backends alike."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Tolerance:
    """When FK of a solution counts as reaching the target.

    The defaults are the issue's p99 target (0.001 mm) and an angle that quaternions rounded to
    6 decimals, as in recordings, still meet.
    """

    position: float = 1e-6  # m
    orientation: float = 1e-5  # rad

    def __post_init__(self) -> None:
        if not (self.position >= 0.0 and self.orientation >= 0.0):
            raise ValueError(f'tolerances must be >= 0, got {self}')

    def met(self, position_errors: np.ndarray, orientation_errors: np.ndarray) -> np.ndarray:
        """(...,) m, (...,) rad -> (...,) bool; NaN errors never meet it."""
        return (position_errors <= self.position) & (orientation_errors <= self.orientation)


DEFAULT_TOLERANCE = Tolerance()


# Not frozen: a frozen dataclass sets each field through object.__setattr__, which made up a
# tenth of an analytic query inside the server. Treat it as read-only all the same.
@dataclass(slots=True)
class Solutions:
    """Solutions of one pose, best first by the branch policy (`policy.rank`).

    joints: (k, n) rad; position_errors: (k,) m and orientation_errors: (k,) rad of FK(joints)
    against the target; within_limits: (k,) every joint inside the software limits;
    meets_tolerance: (k,) the errors are within the tolerance and every joint within its reach
    (a solution the arm cannot take never counts). k is 0 only when the solver produced nothing.
    """

    joints: np.ndarray
    position_errors: np.ndarray
    orientation_errors: np.ndarray
    within_limits: np.ndarray
    meets_tolerance: np.ndarray

    def __len__(self) -> int:
        return len(self.joints)

    @property
    def success(self) -> bool:
        """The best solution reaches the target within the tolerance."""
        return bool(len(self) and self.meets_tolerance[0])

    @property
    def left_limits(self) -> bool:
        """The best solution had to leave the software limits (say so to the user)."""
        return bool(len(self) and not self.within_limits[0])
