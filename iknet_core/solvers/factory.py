"""Solvers by name, as the server's `solver` parameter and the CLIs' `--solver` give them: the one
place where iknet-test, iknet-bench and ik_server get their solvers, so they answer alike."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from iknet_core.kinematics.chain import Chain
from iknet_core.kinematics.omx_ik import OmxAnalyticIK
from iknet_core.solvers.analytic import AnalyticSolver
from iknet_core.solvers.base import Solver
from iknet_core.solvers.network import NetworkProposer
from iknet_core.solvers.refine import Refiner
from iknet_core.solvers.refined import RefinedSolver, constant_proposer
from iknet_core.solvers.settings import DEFAULT_SETTINGS, SolverSettings

# 'refine-from-zero' is the baseline of the benchmark: refinement without a learned seed.
SOLVER_NAMES = ('analytic', 'network', 'network+refine', 'refine-from-zero')
NETWORK_SOLVERS = ('network', 'network+refine')


def build_solver(
    name: str,
    chain: Chain,
    network: NetworkProposer | None = None,
    settings: SolverSettings = DEFAULT_SETTINGS,
) -> Solver:
    """The named solver for chain; `network` (a loaded model) is needed by the network solvers
    and may be shared between several of them."""
    if name not in SOLVER_NAMES:
        raise ValueError(f'solver must be one of {SOLVER_NAMES}, got {name!r}')
    if network is not None and network.chain != chain:
        raise ValueError(
            f'the model {network.model_path} was trained for chain {network.chain.name!r}, '
            f'not for {chain.name!r}: give a model of that arm, or a solver that needs none '
            '(refine-from-zero)'
        )
    if name == 'analytic':
        if settings.is_position_only:
            raise ValueError(
                'analytic solves whole poses; for a position only use network+refine or '
                'refine-from-zero'
            )
        return AnalyticSolver(chain, settings)
    if name == 'refine-from-zero':
        zero = constant_proposer(np.zeros(chain.n_joints))
        return RefinedSolver(zero, Refiner(chain, settings), name)
    if network is None:
        raise ValueError(f'solver {name!r} needs a trained model')
    # The network alone: its hypotheses ranked by FK error, no iterations.
    if name == 'network':
        settings = replace(settings, max_iterations=0, restarts=0)
    return RefinedSolver(network, Refiner(chain, settings), name)


def available_solvers(chain: Chain, network: NetworkProposer | None) -> tuple[str, ...]:
    """The solver names build_solver can serve for this chain with or without a model."""
    names = ['refine-from-zero']
    try:
        OmxAnalyticIK(chain)
        names.insert(0, 'analytic')
    except ValueError:
        pass  # not an OM-X-like arm: no closed form
    if network is not None:
        names += NETWORK_SOLVERS
    return tuple(name for name in SOLVER_NAMES if name in names)
