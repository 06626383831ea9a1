"""`refined(proposer)`: any source of seeds (the network, the closed form, a constant) plus
refinement, ranked by the branch policy. This is the `network+refine` backend once the network
proposes."""

from __future__ import annotations

import math
from dataclasses import fields, replace

import numpy as np
from numba import njit

from iknet_core.solvers import kernels
from iknet_core.solvers.base import (
    Proposer,
    check_max_solutions,
    check_pose,
    check_poses,
    check_seed,
)
from iknet_core.solvers.network_kernel import forward_pose
from iknet_core.solvers.parallel import run_in_blocks
from iknet_core.solvers.policy import BranchPolicy, joint_bounds, select_candidates
from iknet_core.solvers.refine import Refinement, Refiner
from iknet_core.solvers.result import Solutions

# On an arm with no joints to spare, restarts inside the software limits are capped at this: its
# few branches are found by a few spread-out seeds, and where none lies inside the limits every
# restart is lost. refine-from-zero's answers inside the limits, on 2,000 poses drawn inside them
# (UR5 with soft limits 0.15 rad inside its URDF's; a SCARA with a reach 0.1 rad wider), went
# from 99.25 / 98.7 % to 99.85 / 99.4 % (2 restarts), 99.9 / 99.65 % (4), 99.95 / 100 % (8) and
# 100 / 100 % (50), and its batched rate on the OM-X recording, 2.5 % of whose poses have no
# solution inside, from 205,000/s to 174,000, 158,000, 143,000 and 61,000/s.
BRANCH_RESTARTS = 8
# On an arm with joints to spare, a proposer that samples (a mixture model) draws this many
# samples per solution asked for where that is more than its own n_hypotheses, so that
# max_solutions: N returns N exact solutions of the continuum (no two within the policy's
# duplicate tolerance): some samples miss after refinement, and some refine to the same
# solution. A Panda model (8.1 mm mean raw error), 20 random poses, N = 64 / 256 / 1,000: one
# sample per solution gave 58 / 223 / 763 on average, two 63.6 / 252 / 969 (every one asked for
# on 95 / 95 / 90 % of the poses; 32 ms for 1,000 on one thread), three 64 / 256 / 989 in 50 %
# more time. An arm without joints to spare has a few branches, which the proposer's own
# samples find. More samples are drawn only while they times their whole-turn variants
# (BranchPolicy.turn_variants) stay within MAX_CANDIDATES: the policy's ranking takes time in
# the candidates times the solutions picked, and a UR5's 729 variants of 4,096 samples took a
# request for 2**32 - 1 solutions 93 s. (n_hypotheses samples are drawn whatever their
# variants, as before.)
SAMPLES_PER_SOLUTION = 2
# Rounds of more samples where fewer than max_solutions came out exact (_topped_up): the
# shipped Panda model's 1,000 asked of 40 random poses, 985 on average (the worst 797) in one
# draw, 997 (940) with two more rounds, in 15 % more time.
TOP_UP_ROUNDS = 2
MAX_CANDIDATES = 4096
# A solver with one seed (refine-from-zero) asked for several solutions refines this many seeds
# per solution asked for as well, uniform inside the limits: its one seed finds one.
SPREAD_SEEDS_PER_SOLUTION = 8


@njit(cache=True)
def _refine_closest(
    hypotheses,
    position,
    rotation,
    joints,
    tip,
    reach,
    orientation_weight,
    refine_bounds,
    refine_settings,
    stop_on_stall,
    shifts,
    policy_bounds,
    full_turn,
    policy_settings,
    seed,
    has_seed,
    max_solutions,
):
    """A single query's first try in one compiled call: the best-looking of the hypotheses
    (K, n) refined alone, then ranked, in Solutions' field order. Each step is the kernel that
    solve_batch uses; done from Python they cost ~20 us of calls and small arrays per query.
    The arguments after rotation: the chain, Refiner.kernel_arguments(), the policy's."""
    k, n = hypotheses.shape
    positions, rotations = position.reshape((1, 3)), rotation.reshape((1, 3, 3))
    closest = np.empty(1, dtype=np.int64)
    kernels.closest_hypotheses(
        hypotheses.reshape((1, k, n)), positions, rotations, joints, tip, reach,
        orientation_weight, closest,
    )  # fmt: skip
    refined = hypotheses[closest[0] : closest[0] + 1].copy()
    errors = np.empty((1, 2))
    iterations = np.empty(1, dtype=np.int64)
    converged = np.empty(1, dtype=np.bool_)
    kernels.refine_batch(
        refined, positions, rotations, joints, tip, refine_bounds, refine_settings,
        stop_on_stall, (0, 1), errors, iterations, converged,
    )  # fmt: skip
    return select_candidates(
        refined, errors[:, 0].copy(), errors[:, 1].copy(), shifts, policy_bounds, full_turn,
        policy_settings, seed, has_seed, max_solutions,
    )  # fmt: skip


@njit(cache=True)
def _network_refine_closest(
    network,
    hypotheses,
    position,
    rotation,
    joints,
    tip,
    reach,
    orientation_weight,
    refine_bounds,
    refine_settings,
    stop_on_stall,
    shifts,
    policy_bounds,
    full_turn,
    policy_settings,
    seed,
    has_seed,
    max_solutions,
):
    """_refine_closest with the compiled network's hypotheses (K, n), written into hypotheses,
    made in the same call: network is CompiledNetwork.weights. Calling the network apart cost
    ~7 us (of a single query's 35 then, 27 now) in array checks, allocations and the dispatch
    of its 20 arguments. The arguments are spelled out: with *args numba types them in Python
    (~2.5 us)."""
    forward_pose(position, rotation, network, hypotheses)
    return _refine_closest(
        hypotheses, position, rotation, joints, tip, reach, orientation_weight, refine_bounds,
        refine_settings, stop_on_stall, shifts, policy_bounds, full_turn, policy_settings, seed,
        has_seed, max_solutions,
    )  # fmt: skip


class RefinedSolver:
    """Refines every hypothesis of the proposer (and the caller's seed), then ranks them."""

    def __init__(self, proposer: Proposer, refiner: Refiner, name: str = 'refined') -> None:
        self.proposer = proposer
        self.refiner = refiner
        self.chain = refiner.chain
        self.name = name
        self.policy = BranchPolicy(self.chain, refiner.settings)
        # With restarts to follow (they polish their best result to the end), a hypothesis that
        # stalls is given up early instead of crawling through every iteration: on a 7-joint
        # arm a quarter of the best-looking hypotheses stall.
        self._retries = refiner.settings.restarts > 0
        arrays = refiner.compiled.arrays
        chain_arguments = (arrays.joints, arrays.tip, self.policy.reach_bounds)
        policy_arguments = self.policy.kernel_arguments(None, 1)
        # _refine_closest's arguments for K hypotheses, and for a lone seed, which restarts at
        # once (no other seed could reach the pose first).
        self._first_try_arguments, self._lone_seed_arguments = (
            (
                *chain_arguments,
                refiner.orientation_weight,
                *refiner.kernel_arguments(restarts),
                self._retries,
                *policy_arguments,
            )
            for restarts in (False, True)
        )
        # A network compiled to numba runs inside the first try's kernel.
        self._network = getattr(proposer, 'compiled_network', None)
        n = self.chain.n_joints
        spare = n > refiner.settings.task_dimensions
        if self._network is not None and self._network.n_joints != n:
            raise ValueError(
                f'the network answers {self._network.n_joints} joints, the chain '
                f'{self.chain.name!r} has {n}'
            )
        # Restarts inside the limits (where the settings restart at all) on an arm with joints
        # to spare: its solutions inside them form a continuum that restarts find. On an arm
        # with none, only where the proposer gave one seed (refine-from-zero, a one-hypothesis
        # network; K hypotheses offer the other branches), and at most BRANCH_RESTARTS: where
        # no branch lies inside, each restart is lost (settings.restarts of them cost ~350 us a
        # pose on the OM-X's hand-guided poses past its limits, 2.5 % of its test recording).
        self._spare = spare
        limits_settings = refiner.settings
        if not spare:
            restarts = min(limits_settings.restarts, BRANCH_RESTARTS)
            limits_settings = replace(limits_settings, restarts=restarts)
        # Where the software limits are narrower than the reach (a URDF's safety_controller
        # soft limits, the OM-X's hand-guided reach), refinement clamped into the reach can end
        # outside the limits where a solution inside them exists: such answers are refined again
        # inside the limits (_into_limits). None where the limits are the reach, or nothing
        # refines (the `network` solver).
        refines = self._refines = refiner.settings.max_iterations > 0
        self._limits_refiner = (
            Refiner(self.chain, limits_settings, 'limits')
            if self.policy.limits_inside_reach and refines
            else None
        )
        # Load (or compile, the first time ever) the kernels now rather than in the first query.
        _refine_closest(np.zeros((1, n)), np.zeros(3), np.eye(3), *self._first_try_arguments)
        if self._network is not None:
            # Worked out once: a single query is ~25 us, and each lookup costs some of it.
            self._hypotheses_shape = (self._network.n_hypotheses, n)
            self._lone_network = self._network.n_hypotheses == 1
            self._network_first_try = (
                self._lone_seed_arguments if self._lone_network else self._first_try_arguments
            )
            _network_refine_closest(
                self._network.weights, np.empty(self._hypotheses_shape), np.zeros(3), np.eye(3),
                *self._network_first_try,
            )  # fmt: skip

    def solve(
        self,
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None = None,
        max_solutions: int = 1,
    ) -> Solutions:
        """Solutions of one pose (3,) m, (3, 3), best first; nearest to seed (n,) rad when given.

        The seed is refined too, so the solution on the seed's branch is among the candidates.
        One solution without a seed is found as solve_batch finds it: the best-looking
        hypothesis refined alone when it reaches the target inside the limits (the same
        solution for a network's fixed hypotheses; a sampling model draws its own per call).
        """
        position, rotation = check_pose(position, rotation)
        max_solutions = check_max_solutions(max_solutions)
        network = self._network
        sampled = None if network is not None else self._sample_count(max_solutions)
        if network is None:
            hypotheses = self._propose(position[None], rotation[None], sampled)[0]
        else:
            hypotheses = np.empty(self._hypotheses_shape)  # the network writes them below
        if seed is None and max_solutions == 1:
            # As solve_batch: the best-looking hypothesis alone first; all only if it misses.
            if network is None:
                lone = len(hypotheses) == 1
                first = _refine_closest(
                    np.ascontiguousarray(hypotheses),
                    position,
                    rotation,
                    *(self._lone_seed_arguments if lone else self._first_try_arguments),
                )
            else:  # the network's hypotheses made in the same compiled call
                lone = self._lone_network
                first = _network_refine_closest(
                    network.weights, hypotheses, position, rotation, *self._network_first_try
                )
            solutions = Solutions(*first)
            if self._first_try_answers(solutions, lone):
                return self._inside_limits_first(solutions, position, rotation, None, 1, lone)
        elif network is not None:
            network.forward_pose(position, rotation, hypotheses)
        one_proposed = len(hypotheses) == 1
        spread = isinstance(self.proposer, ConstantProposer) and max_solutions > 1
        if spread:  # one seed (refine-from-zero) finds one solution: for more, seeds spread too
            hypotheses = np.concatenate([hypotheses, self._spread_seeds(max_solutions)])
        if seed is not None:
            seed = check_seed(seed, self.chain)
            hypotheses = np.concatenate([seed[None], hypotheses])
        count = len(hypotheses)
        # A lone seed restarts at once (no other seed could reach the pose first).
        refined = self._seeds_refined(position, rotation, hypotheses, restarts=count == 1)
        joints, position_errors = refined.joints, refined.position_errors
        orientation_errors = refined.orientation_errors
        if count > 1 and not refined.converged.any() and self._retries:
            # No seed reached it: restart from the one that came nearest.
            nearest = int(np.nanargmin(self._weighted_error(position_errors, orientation_errors)))
            again = self.refiner.refine(
                position[None], rotation[None], joints[nearest][None], restarts=True
            )
            joints, position_errors, orientation_errors = _appended(
                (joints, position_errors, orientation_errors), again
            )
        solutions = self.policy.select(
            joints, position_errors, orientation_errors, seed, max_solutions
        )
        short = 0 < self._exact_count(solutions) < max_solutions  # none: out of reach, as a rule
        if short and self._spare and sampled is None and not spread and self._refines:
            # A network's fixed hypotheses give one solution each at most: short of the N asked
            # for where the solutions form a continuum (joints to spare: a 6-joint arm's
            # positions), the spread seeds too. Not on an arm with none: a pose has a few
            # branches, which the hypotheses find, and the seeds cost 15 times the query.
            spread_refined = self._seeds_refined(
                position, rotation, self._spread_seeds(max_solutions)
            )
            refined_all = _appended((joints, position_errors, orientation_errors), spread_refined)
            solutions = self.policy.select(*refined_all, seed, max_solutions)
        if sampled is not None:
            solutions = self._topped_up(
                solutions, (joints, position_errors, orientation_errors),
                position, rotation, seed, max_solutions,
            )  # fmt: skip
        return self._inside_limits_first(
            solutions, position, rotation, seed, max_solutions, one_proposed
        )

    def _spread_seeds(self, max_solutions: int) -> np.ndarray:
        """SPREAD_SEEDS_PER_SOLUTION seeds per solution asked for (within MAX_CANDIDATES),
        uniform inside the software limits, the same every call."""
        count = min(
            SPREAD_SEEDS_PER_SOLUTION * max_solutions,
            MAX_CANDIDATES // self.policy.turn_variants,
        )
        low, high = joint_bounds(self.chain, 'limits')
        return np.random.default_rng(0).uniform(low, high, (count, self.chain.n_joints))

    def _topped_up(
        self,
        solutions: Solutions,
        refined: tuple[np.ndarray, np.ndarray, np.ndarray],
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None,
        max_solutions: int,
    ) -> Solutions:
        """solutions with more samples drawn (another seed each round), refined and ranked with
        the refined (joints, position errors, orientation errors) they came from, for as long
        as fewer than max_solutions are exact (TOP_UP_ROUNDS at most, MAX_CANDIDATES in all):
        on some poses most samples miss, or refine to the same arm (a Panda's where little of
        the self-motion lies inside the limits), and a caller asking for N expects N."""
        budget = MAX_CANDIDATES // self.policy.turn_variants
        for draw in range(1, TOP_UP_ROUNDS + 1):
            found, drawn = self._exact_count(solutions), len(refined[0])
            if not found or found >= max_solutions:  # none: a pose out of reach, as a rule
                break
            # As many as this pose's yield so far says the shortfall needs, a quarter more.
            wanted = min(math.ceil(1.25 * (max_solutions - found) * drawn / found), budget - drawn)
            if wanted < 1:
                break
            more = self._propose(position[None], rotation[None], wanted, seed=draw)[0]
            refined = _appended(refined, self._seeds_refined(position, rotation, more))
            solutions = self.policy.select(*refined, seed, max_solutions)
        return solutions

    def _exact_count(self, solutions: Solutions) -> int:
        """The exact solutions among solutions: exact outside the software limits counts where
        _inside_limits_first moves such answers in."""
        exact = solutions.meets_tolerance
        if self._limits_refiner is None:
            exact = exact & solutions.within_limits
        return int(exact.sum())

    def _seeds_refined(
        self, position: np.ndarray, rotation: np.ndarray, seeds: np.ndarray, restarts: bool = False
    ) -> Refinement:
        """seeds (k, n) of one pose (3,), (3, 3) refined, each given up early where it stalls
        when restarts follow (see _retries)."""
        count = len(seeds)
        return self.refiner.refine(
            np.repeat(position[None], count, 0),
            np.repeat(rotation[None], count, 0),
            seeds,
            restarts=restarts,
            stop_on_stall=self._retries,
        )

    def _inside_limits_first(
        self,
        solutions: Solutions,
        position: np.ndarray,
        rotation: np.ndarray,
        seed: np.ndarray | None,
        max_solutions: int,
        one_proposed: bool,
    ) -> Solutions:
        """solutions, ranked again with those that met the tolerance outside the software
        limits refined inside them (_into_limits) where that reaches the target."""
        if self._limits_refiner is None or not (solutions.success and solutions.left_limits):
            return solutions
        outside = solutions.meets_tolerance & ~solutions.within_limits
        count = int(outside.sum())
        moved = self._into_limits(
            np.repeat(position[None], count, 0),
            np.repeat(rotation[None], count, 0),
            solutions.joints[outside],
            one_proposed,
        )
        if not moved.converged.any():
            return solutions
        inside = moved.converged
        return self.policy.select(
            np.concatenate([solutions.joints, moved.joints[inside]]),
            np.concatenate([solutions.position_errors, moved.position_errors[inside]]),
            np.concatenate([solutions.orientation_errors, moved.orientation_errors[inside]]),
            seed,
            max_solutions,
        )

    def _into_limits(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        joints: np.ndarray,
        one_proposed: bool,
    ) -> Refinement:
        """Solutions joints (k, n) of targets (k, 3), (k, 3, 3) that left the software limits,
        refined with the joints held inside them (the refinement clamps, or wraps, its seeds
        into its bounds first; converged: it reached the target there); on an arm with joints to
        spare, or where the proposer gave one seed (one_proposed), those that stall restart
        inside the limits. On random poses of joints inside
        their soft limits, refine-from-zero ended outside them for 28-37 % of TIAGo, TIAGo Pro
        and PR2 arm poses; the first refinement took 91 % of those inside (~6 us each), the
        restarts the rest (60-110 us each)."""
        refiner = self._limits_refiner
        moved = refiner.refine(positions, rotations, joints, stop_on_stall=True)
        stalled = ~moved.converged
        restart = self._retries and (self._spare or one_proposed)
        if not (restart and stalled.any()):
            return moved
        again = refiner.refine(
            positions[stalled], rotations[stalled], moved.joints[stalled], restarts=True
        )
        for field in fields(Refinement):  # moved's arrays are its own: written in place
            getattr(moved, field.name)[stalled] = getattr(again, field.name)
        return moved

    def _first_try_answers(self, solutions: Solutions, lone: bool) -> bool:
        """The first try is the answer: there is only one seed, no refinement (the `network`
        solver, whose unrefined hypotheses all miss: the nearest is the answer), or it reached
        the target inside the limits."""
        no_refinement = self.refiner.settings.max_iterations == 0
        return lone or no_refinement or (solutions.success and solutions.within_limits[0])

    def solve_batch(
        self, positions: np.ndarray, rotations: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Best solution per pose: (B, 3), (B, 3, 3) -> joints (B, n), errors (B,) m, (B,) rad."""
        positions, rotations = check_poses(positions, rotations)
        hypotheses = self._propose(positions, rotations)
        count, per_pose, n = hypotheses.shape
        # The best-looking hypothesis converges for nearly every pose: refine it alone first, and
        # all K only where it missed the tolerance or left the software limits (~4x throughput).
        guess = hypotheses[
            np.arange(count), self._closest_hypothesis(positions, rotations, hypotheses)
        ]
        first = self.refiner.refine(
            positions, rotations, guess, restarts=per_pose == 1, stop_on_stall=self._retries
        )
        joints, position_errors, orientation_errors = self.policy.best_per_pose(
            first.joints[:, None],
            first.position_errors[:, None],
            first.orientation_errors[:, None],
        )
        retry = ~(first.converged & self.policy.within_limits(joints))
        if per_pose > 1 and retry.any():
            again = self.refiner.refine(
                np.repeat(positions[retry], per_pose, 0),
                np.repeat(rotations[retry], per_pose, 0),
                hypotheses[retry].reshape(-1, n),
                stop_on_stall=self._retries,
            )
            shape = (int(retry.sum()), per_pose)
            best = self.policy.best_per_pose(
                again.joints.reshape(*shape, n),
                again.position_errors.reshape(shape),
                again.orientation_errors.reshape(shape),
            )
            joints[retry], position_errors[retry], orientation_errors[retry] = best
        missed = ~self.refiner.tolerance.met(position_errors, orientation_errors)
        if per_pose > 1 and missed.any() and self._retries:
            again = self.refiner.refine(
                positions[missed], rotations[missed], joints[missed], restarts=True
            )
            better = self._weighted_error(
                again.position_errors, again.orientation_errors
            ) < self._weighted_error(position_errors[missed], orientation_errors[missed])
            _take_rows((joints, position_errors, orientation_errors), missed, again, better)
        if self._limits_refiner is not None:
            outside = self.refiner.tolerance.met(position_errors, orientation_errors)
            outside &= ~self.policy.within_limits(joints)
            if outside.any():
                moved = self._into_limits(
                    positions[outside], rotations[outside], joints[outside], per_pose == 1
                )
                answers = (joints, position_errors, orientation_errors)
                _take_rows(answers, outside, moved, moved.converged)
        return joints, position_errors, orientation_errors

    def _closest_hypothesis(
        self, positions: np.ndarray, rotations: np.ndarray, hypotheses: np.ndarray
    ) -> np.ndarray:
        """Index (B,) of the hypothesis (B, K, n) whose FK is nearest its target, those the
        arm can take first (refinement would clamp the others into the reach)."""
        hypotheses = np.ascontiguousarray(hypotheses)
        closest = np.empty(len(hypotheses), dtype=np.int64)
        arrays = self.refiner.compiled.arrays

        def closest_rows(rows: slice) -> None:  # as many FK calls as a few LM iterations
            kernels.closest_hypotheses(
                hypotheses[rows],
                positions[rows],
                rotations[rows],
                arrays.joints,
                arrays.tip,
                self.policy.reach_bounds,
                self.refiner.orientation_weight,
                closest[rows],
            )

        run_in_blocks(len(hypotheses), self.refiner.settings.batch_threads, closest_rows)
        return closest

    def _weighted_error(
        self, position_errors: np.ndarray, orientation_errors: np.ndarray
    ) -> np.ndarray:
        """m + orientation_weight * rad: what refinement lowers, to pick between results."""
        return position_errors + self.refiner.orientation_weight * orientation_errors

    def _sample_count(self, max_solutions: int) -> int | None:
        """How many samples a proposer that samples draws for max_solutions (None: its own
        n_hypotheses; always for one solution, which solve_batch's answer must match, for any
        other proposer, and where no more than n_hypotheses fit MAX_CANDIDATES)."""
        if max_solutions == 1 or not (self._spare and getattr(self.proposer, 'samples', False)):
            return None
        wanted = min(
            SAMPLES_PER_SOLUTION * max_solutions, MAX_CANDIDATES // self.policy.turn_variants
        )
        return wanted if wanted > self.proposer.n_hypotheses else None

    def _propose(
        self,
        positions: np.ndarray,
        rotations: np.ndarray,
        count: int | None = None,
        seed: int = 0,
    ) -> np.ndarray:
        """The proposer's hypotheses (B, K, n); count and seed (a proposer that samples) set K
        and the draw."""
        arguments = (positions, rotations) if count is None else (positions, rotations, count)
        options = {'seed': seed} if seed else {}
        hypotheses = np.asarray(self.proposer(*arguments, **options), dtype=np.float64)
        expected = (len(positions), self.chain.n_joints)
        if (
            hypotheses.ndim != 3
            or (hypotheses.shape[0], hypotheses.shape[2]) != expected
            or hypotheses.shape[1] == 0
        ):
            raise ValueError(
                f'the proposer must return seeds of shape ({expected[0]}, K >= 1, '
                f'{expected[1]}), got {hypotheses.shape}'
            )
        return hypotheses


def _appended(
    answers: tuple[np.ndarray, np.ndarray, np.ndarray], refined: Refinement
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """answers (joints (k, n), position and orientation errors (k,)) with refined's rows after
    them: candidates from another try, ranked together by the policy."""
    more = (refined.joints, refined.position_errors, refined.orientation_errors)
    return tuple(np.concatenate([kept, new]) for kept, new in zip(answers, more, strict=True))


def _take_rows(
    answers: tuple[np.ndarray, np.ndarray, np.ndarray],
    rows: np.ndarray,
    refined: Refinement,
    take: np.ndarray,
) -> None:
    """Write refined's joints and errors into answers (joints (B, n), position and orientation
    errors (B,)) in place, at the rows (B,) bool it refined where take (its own rows) is true."""
    targets = np.flatnonzero(rows)[take]
    joints, position_errors, orientation_errors = answers
    joints[targets] = refined.joints[take]
    position_errors[targets] = refined.position_errors[take]
    orientation_errors[targets] = refined.orientation_errors[take]


class ConstantProposer:
    """The same seed (n,) rad for every pose; zeros give the `refine from zero` baseline. A
    class, not a closure, so a solver built on it pickles (to a worker process) as the others."""

    def __init__(self, joints: np.ndarray) -> None:
        self.seed = np.asarray(joints, dtype=np.float64)

    def __call__(self, positions: np.ndarray, rotations: np.ndarray) -> np.ndarray:
        # A writable copy, not a broadcast view: numba compiles read-only arrays apart, and
        # the solver loads its kernels for writable ones when it is built.
        return np.tile(self.seed, (len(positions), 1, 1))


def constant_proposer(joints: np.ndarray) -> Proposer:
    """The same seed (n,) rad for every pose (ConstantProposer)."""
    return ConstantProposer(joints)
