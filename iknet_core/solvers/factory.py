"""Solvers by name, as the server's `solver` parameter and the CLIs' `--solver` give them."""

from __future__ import annotations

from pathlib import Path

from iknet_core.kinematics.chain import OMX_CHAIN
from iknet_core.solvers.analytic import AnalyticSolver
from iknet_core.solvers.base import Solver
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.refined import RefinedSolver, constant_proposer
from iknet_core.solvers.result import DEFAULT_TOLERANCE, Tolerance

# 'refine-from-zero' is the baseline of the benchmark: refinement without a learned seed.
SOLVER_NAMES = ('analytic', 'network', 'network+refine', 'refine-from-zero')


def build_solver(
    name: str,
    model_path: Path | str | None = None,
    device: str = 'auto',
    backend: str = 'compiled',
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    max_iterations: int = 100,
    proposer: NetworkProposer | None = None,
    orientation_weight: float = 0.1,
) -> Solver:
    """A solver by name; `proposer` shares one loaded network between several solvers.

    orientation_weight (m/rad): what a radian of orientation error costs against a metre of
    position error, in refinement and in ranking; it decides where unreachable targets end.
    """
    if name not in SOLVER_NAMES:
        raise ValueError(f'solver must be one of {SOLVER_NAMES}, got {name!r}')
    if name == 'analytic':
        return AnalyticSolver(OMX_CHAIN, tolerance, orientation_weight)
    if name == 'refine-from-zero':
        refiner = Refiner(OMX_CHAIN, tolerance, orientation_weight, max_iterations)
        return RefinedSolver(constant_proposer([0.0] * OMX_CHAIN.n_joints), refiner, name)
    proposer = proposer or NetworkProposer(model_path, device, backend)
    # The network alone: its hypotheses ranked by FK error, no iterations.
    iterations = max_iterations if name == 'network+refine' else 0
    refiner = Refiner(proposer.chain, tolerance, orientation_weight, iterations)
    return RefinedSolver(proposer, refiner, name)
