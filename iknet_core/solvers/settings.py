"""The settings that travel together through the solver stack, from a CLI flag or a server
parameter down to the compiled kernels, which receive them by name (`KernelSettings`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import NamedTuple

from numba import njit

from iknet_core.solvers.result import DEFAULT_TOLERANCE, Tolerance


class KernelSettings(NamedTuple):
    """SolverSettings as numba takes them: a named tuple of scalars, read by field name."""

    position_tolerance: float  # m
    orientation_tolerance: float  # rad
    orientation_weight: float  # m/rad
    max_iterations: int
    duplicate_tolerance: float  # rad
    restarts: int
    restart_iterations: int


@dataclass(frozen=True)
class SolverSettings:
    """How every solver refines and ranks.

    orientation_weight (m/rad): what a radian of orientation error costs against a metre of
    position error, in refinement and in ranking; it decides where unreachable targets end.
    max_iterations: most Levenberg-Marquardt iterations per seed. duplicate_tolerance (rad):
    solutions whose joints all differ by less are one solution (refinement stops at the
    tolerance, so two seeds of one branch end up to ~1e-4 rad apart; distinct branches of a
    4-DOF arm differ by tenths of a radian). restarts: when no seed of a pose meets the
    tolerance, refine again from up to this many joint vectors spread over the joints' range
    (restart_iterations each), until one does: a 6- or 7-joint arm from a single seed misses
    ~10-60 % of reachable poses (TRAC-IK and rtb's LM restart from random joints likewise).
    batch_threads: threads a batched refinement runs on; 0 = every core this process may use
    (a single query always runs on the caller's thread).
    """

    tolerance: Tolerance = DEFAULT_TOLERANCE
    orientation_weight: float = 0.1
    max_iterations: int = 100
    duplicate_tolerance: float = 1e-3
    restarts: int = 50
    restart_iterations: int = 30
    batch_threads: int = 0

    def __post_init__(self) -> None:
        if not self.orientation_weight >= 0.0:
            raise ValueError(
                f'orientation_weight must be >= 0 m/rad, got {self.orientation_weight}'
            )
        if self.max_iterations < 0:
            raise ValueError(f'max_iterations must be >= 0, got {self.max_iterations}')
        if self.restarts < 0 or self.restart_iterations < 0:
            raise ValueError(
                f'restarts and restart_iterations must be >= 0, got {self.restarts} and '
                f'{self.restart_iterations}'
            )
        if self.batch_threads < 0:
            raise ValueError(f'batch_threads must be >= 0, got {self.batch_threads}')
        if not self.duplicate_tolerance > 0.0:
            raise ValueError(
                f'duplicate_tolerance must be > 0 rad, got {self.duplicate_tolerance}'
            )

    @property
    def is_position_only(self) -> bool:
        return math.isinf(self.tolerance.orientation)

    @property
    def task_dimensions(self) -> int:
        """What a target constrains: 3 for a position, 6 for a whole pose. An arm with more
        joints has joints to spare, and a continuum of solutions."""
        return 3 if self.is_position_only else 6

    def position_only(self) -> SolverSettings:
        """The same settings for reaching a position in any orientation: orientation neither
        steers the refinement nor ranks solutions, and any orientation meets the tolerance."""
        return replace(
            self,
            tolerance=Tolerance(self.tolerance.position, math.inf),
            orientation_weight=0.0,
        )

    def kernel(self) -> tuple[float, float, float, int, float, int, int]:
        """The KernelSettings values as a plain tuple, for a kernel to name with `named`.

        numba types a plain tuple argument in C (~0.1 us) and a named tuple in Python (~1.2 us
        per call, several times that with cold caches between service requests).
        """
        return tuple(
            KernelSettings(
                position_tolerance=float(self.tolerance.position),
                orientation_tolerance=float(self.tolerance.orientation),
                orientation_weight=float(self.orientation_weight),
                max_iterations=int(self.max_iterations),
                duplicate_tolerance=float(self.duplicate_tolerance),
                restarts=int(self.restarts),
                restart_iterations=int(self.restart_iterations),
            )
        )


@njit(cache=True)
def named(values: tuple[float, float, float, int, float, int, int]) -> KernelSettings:
    """SolverSettings.kernel()'s values as the KernelSettings they are, inside a kernel."""
    return KernelSettings(*values)


DEFAULT_SETTINGS = SolverSettings()
