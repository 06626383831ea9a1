"""IK solver backends with one result format: closed form, refinement, and any seed proposer."""

from iknet_core.solvers.kernel_cache import drop_stale_kernels

drop_stale_kernels()  # before any kernel loads from numba's cache

# ruff: noqa: E402 - the kernels may load only after the stale check

from iknet_core.solvers.analytic import AnalyticSolver
from iknet_core.solvers.base import Proposer, Solver
from iknet_core.solvers.policy import BranchPolicy
from iknet_core.solvers.refine import Refinement, Refiner
from iknet_core.solvers.refined import RefinedSolver, constant_proposer
from iknet_core.solvers.result import Solutions, Tolerance
from iknet_core.solvers.settings import SolverSettings

__all__ = [
    'AnalyticSolver',
    'BranchPolicy',
    'Proposer',
    'RefinedSolver',
    'Refinement',
    'Refiner',
    'Solutions',
    'Solver',
    'SolverSettings',
    'Tolerance',
    'constant_proposer',
]
