"""`ros2 run iknet ik_server`: IK solutions for poses as a ROS 2 service, and moves to poses.

Services (relative to the node name):
- ~/solve_ik (iknet/srv/SolveIK): solutions best first, each with its FK error;
- ~/goal_task_space_path (open_manipulator_msgs/srv/SetKinematicsPose): solve, seeded with the
  arm's latest /joint_states, then send the arm there; a drop-in for the ROBOTIS service;
- ~/solve_path (iknet/srv/SolvePath): joint waypoints for a Cartesian path, executed if asked;
- ~/stop (std_srvs/srv/Trigger): hold the arm where its joint states last were, ending the move
  or path in progress.
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import replace

import numpy as np
import rclpy
from geometry_msgs.msg import Pose
from open_manipulator_msgs.srv import SetKinematicsPose
from rcl_interfaces.msg import SetParametersResult
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.exceptions import ParameterException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger

from iknet.srv import SolveIK, SolvePath
from iknet_core.kinematics.chain import OMX_CHAIN, Chain, model_chain_for
from iknet_core.kinematics.urdf import chain_from_urdf
from iknet_core.solvers import Solutions, SolverSettings, Tolerance
from iknet_core.solvers.base import Solver
from iknet_core.solvers.factory import NETWORK_SOLVERS, available_solvers, build_solver
from iknet_core.solvers.network import NetworkProposer, load_networks
from iknet_core.solvers.path_timing import SLIDE_METRES_PER_RAD, slide_units, velocity_limits
from iknet_core.solvers.policy import (
    arm_pose_count,
    continuous_joints,
    continuous_nearest,
    into_limits,
    joint_bounds,
)
from iknet_core.solvers.warm_up import exercise, exercise_path
from iknet_ros import parameters, path_service
from iknet_ros.arm_command import log_outcome, make_commander
from iknet_ros.node_runtime import run_node
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.request_turns import Turns
from iknet_ros.requests import (
    RequestError,
    Target,
    arm_joints,
    check_path_time,
    check_seed,
    check_target,
)
from iknet_ros.solver_worker import SolverWorker

# How long (s) a stop gives the arm to come to rest at its last joint states: long enough not to
# jerk it, short enough that it stops near where it was (a cubic from 1 rad/s overshoots 0.04 rad).
STOP_TIME_S = 0.3
# Joint states older than this (s) are not where the arm is: a stop does not send it there.
STALE_STATES_S = 1.0
# How long (s) after a path is answered a resend of the same request gets the same answer.
RESENT_PATH_S = 60.0
# The fastest (rad/s; a slide: slide_units of it) a goal_task_space_path move may turn a joint
# without a URDF velocity limit (the OM-X's have none): a turn a second, past any arm's rated
# speed, so only a slip is refused (a path_time of 0.001 s commanded the OM-X at ~980 rad/s).
MOVE_SPEED_CAP = 2 * np.pi
# Only the newest joint state matters for seeding; a late or lost one is replaced 10 ms later.
latest_state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)
# As robot_state_publisher publishes it: the last description waits for late subscribers.
robot_description_qos = QoSProfile(
    depth=1,
    reliability=ReliabilityPolicy.RELIABLE,
    durability=DurabilityPolicy.TRANSIENT_LOCAL,
)


class IKServer(Node):
    def __init__(self) -> None:
        super().__init__('ik_server')
        # Paths are solved on a thread of their own, so that a stop is not held up by one.
        self.worker = SolverWorker(self)
        self.config = parameters.declare(self)
        self.solvers: dict[str, Solver] = {}
        self.chain: Chain | None = None
        self._refused_description: str | None = None  # why the latest robot description was
        self.base_frame = self.config.base_frame
        config = self.config
        if config.urdf or not config.robot_description_topic:
            self.prepare(config.urdf)
        self.add_on_set_parameters_callback(self.on_set_parameters)
        self._latest_joints: dict[str, float] = {}
        # The last path answered without a move: its request's key, answer, and until when a
        # resend of it is answered the same (solve_path).
        self._last_path: tuple[object, SolvePath.Response | None, float] = (None, None, 0.0)
        self._joint_states_at: dict[str, float] = {}  # when each joint's state last came
        self._stops = 0  # stops taken so far: what was taken before one does not move the arm
        self.commander = make_commander(
            self,
            config.command_interface,
            config.goal_joint_space_path_service,
            config.joint_trajectory_topic,
            config.follow_joint_trajectory_action,
            config.command_timeout,
        )
        self.create_service(
            SolveIK,
            '~/solve_ik',
            self.solve_ik,
            qos_profile=SERVICE_QUEUE_QOS,
        )
        # Paths and moves start as the executor takes them (each takes the count of stops then),
        # and take turns in that order (self.turns): a move awaiting the controller or a path
        # being solved must not hold up IK requests or a stop, and two must not interleave their
        # goals.
        moves = ReentrantCallbackGroup()
        self.turns = Turns()
        self.create_service(
            SolvePath,
            '~/solve_path',
            self.solve_path,
            qos_profile=SERVICE_QUEUE_QOS,
            callback_group=moves,
        )
        self.create_service(
            SetKinematicsPose,
            '~/goal_task_space_path',
            self.goal_task_space_path,
            callback_group=moves,
        )
        # Its own group: a stop must not wait for a move that awaits its controller.
        self.create_service(
            Trigger, '~/stop', self.stop, callback_group=MutuallyExclusiveCallbackGroup()
        )
        self.create_subscription(
            JointState, config.joint_states_topic, self.on_joint_states, latest_state_qos
        )
        if not self.solvers:
            self.get_logger().info(
                f'waiting for the robot description on {config.robot_description_topic}'
            )
            self.create_subscription(
                String,
                config.robot_description_topic,
                self.on_robot_description,
                robot_description_qos,
            )

    def prepare(self, description: str) -> None:
        """The chain (from the description, else the model, else the OM-X) and every solver
        the `solver` parameter can pick for it, sharing the networks."""
        config = self.config
        started = time.monotonic()
        self.get_logger().info(
            'preparing the solvers: loading the models and the compiled kernels (a first start '
            'on a cold cache compiles them: about a minute, longer on a busy machine)'
        )
        asked = None
        if description:
            if not (config.base_link and config.tip_link):
                raise ValueError('a robot description needs the base_link and tip_link parameters')
            asked = chain_from_urdf(description, config.base_link, config.tip_link)
        networks = self.load_networks(asked)
        network = next(iter(networks.values()), None)
        # The description's chain where given: the model's arm, with the URDF's velocity limits.
        chain = asked or (network.chain if network is not None else OMX_CHAIN)
        settings = SolverSettings(
            Tolerance(config.position_tolerance, config.orientation_tolerance),
            config.orientation_weight,
            config.refine_iterations,
        )
        names = available_solvers(chain, network)
        if config.solver in NETWORK_SOLVERS and network is None and not config.model_path:
            # No model was given and the shipped ones are for the OM-X: the arm is served
            # without a network rather than not at all.
            self.get_logger().warning(
                f'solver {config.solver!r} needs a model_path trained for {chain.name}: serving '
                'refine-from-zero'
            )
            config = self.config = replace(config, solver='refine-from-zero')
        if config.solver not in names:
            needs = (
                ' (network solvers need a model_path trained for it)' if network is None else ''
            )
            raise ValueError(
                f'solver {config.solver!r} is not available for {chain.name}{needs}: {names}'
            )
        solvers = {name: build_solver(name, chain, networks.get(name), settings) for name in names}
        for solver in solvers.values():
            exercise(solver)  # loads the compiled code now, not in the first request
        # The same solvers for requests with position_only (the kernels are shared).
        self.position_only_solvers = {
            name: build_solver(name, chain, networks.get(name), settings.position_only())
            for name in names
            if name != 'analytic'
        }
        exercise_path(chain, settings)
        self.chain, self.base_frame = chain, config.base_frame or chain.base_frame
        self.settings = settings
        self.solvers = solvers
        if self.get_parameter('solver').value != config.solver:
            (result,) = self.set_parameters([Parameter('solver', value=config.solver)])
            if not result.successful:
                raise ValueError(f'cannot set solver to {config.solver!r}: {result.reason}')
        seconds = time.monotonic() - started
        self.get_logger().info(
            f'ready in {seconds:.1f} s for {chain.name} ({", ".join(chain.joint_names)}; '
            f'targets in {self.base_frame}): solver {config.solver}; available: {list(solvers)}'
            + (
                ' (a slow start: kernels compiled and cached for the next one, or a busy machine)'
                if seconds > 5
                else ''
            )
        )

    def load_networks(self, asked: Chain | None) -> dict[str, NetworkProposer]:
        """The learned solvers' networks (model_path, else the shipped ones), or none where the
        server can serve without them. A model for another arm than the description's is fatal
        when given; the shipped ones are not loaded for another arm than the OM-X."""
        config = self.config
        try:
            networks = load_networks(
                config.model_path or None, NETWORK_SOLVERS, config.device, config.backend, asked
            )
        except (FileNotFoundError, ValueError) as error:
            if config.solver in NETWORK_SOLVERS:
                raise
            self.get_logger().warning(f'serving without a network: {error}')
            return {}
        if not networks:
            self.get_logger().info(
                f'serving {asked.name} without a network: the shipped models are for '
                f'{OMX_CHAIN.name}'
            )
        for name, network in networks.items():
            model_chain_for(asked, network.chain, network.model_path)
            self.get_logger().info(f'{name}: {network.describe()}')
        return networks

    def on_robot_description(self, message: String) -> None:
        """The first robot description that gives a chain prepares the solvers."""
        if self.solvers:
            return
        if not message.data.strip():
            self._refused_description = 'it was empty'
            self.get_logger().error(
                f'an empty robot description on {self.config.robot_description_topic}: still '
                'waiting for one'
            )
            return
        try:
            self.prepare(message.data)
        except (ValueError, OSError) as error:  # OSError: a model_path that cannot be read
            self._refused_description = str(error)
            self.get_logger().error(f'cannot serve this robot description: {error}')

    def on_set_parameters(self, changes: list[Parameter]) -> SetParametersResult:
        """Refuse, with a reason, values that are invalid or that this server cannot serve."""
        result = parameters.on_set(changes)
        for change in changes:
            if result.successful and change.name == 'solver' and change.value not in self.solvers:
                result = SetParametersResult(
                    successful=False,
                    reason=f'solver {change.value!r} is not available here; one of '
                    f'{list(self.solvers)}',
                )
        return result

    def solve(
        self,
        target: Target,
        seed: np.ndarray | None,
        max_solutions: int,
        refine: bool,
        solver_name: str = '',
        position_only: bool = False,
    ) -> tuple[Solutions, str, float]:
        """Solutions for a checked target, the solver used and the compute time (s). With a
        seed, a continuous joint by the whole turns nearest it (past +-pi where the seed is): the
        arm there reaches the solution the short way, not a turn round."""
        solver_name = solver_name or self.get_parameter('solver').value
        if refine and solver_name == 'network':
            solver_name = 'network+refine'
        solvers = self.position_only_solvers if position_only else self.solvers
        if solver_name not in solvers:
            raise RequestError(
                f'{solver_name} solves whole poses; position_only needs one of {list(solvers)}'
            )
        started = time.perf_counter()
        solutions = solvers[solver_name].solve(
            target.position, target.rotation, seed=seed, max_solutions=max_solutions
        )
        seconds = time.perf_counter() - started
        if seed is not None and any(joint.continuous for joint in self.chain.joints):
            solutions = replace(
                solutions, joints=continuous_nearest(self.chain, solutions.joints, seed)
            )
        return solutions, solver_name, seconds

    def check_pose(self, pose: Pose, frame_id: str) -> Target:
        """A geometry_msgs/Pose target checked by the request rules; RequestError otherwise."""
        p, o = pose.position, pose.orientation
        return check_target([p.x, p.y, p.z], [o.x, o.y, o.z, o.w], frame_id, self.base_frame)

    def solve_ik(self, request: SolveIK.Request, response: SolveIK.Response) -> SolveIK.Response:
        """Answer a SolveIK request; any failure is `success: false` with the reason."""
        if not self.solvers:
            return SolveIK.Response(success=False, message=self.not_ready())
        try:
            return self.answer_solve_ik(request, response)
        except Exception as error:  # a service callback must never take the node down
            self.get_logger().error(f'solve_ik failed:\n{traceback.format_exc()}')
            response = SolveIK.Response(success=False)
            response.message = f'internal error: {type(error).__name__}: {error}'
            return response

    def answer_solve_ik(
        self, request: SolveIK.Request, response: SolveIK.Response
    ) -> SolveIK.Response:
        try:
            target = self.check_pose(request.target.pose, request.target.header.frame_id)
            seed = check_seed(request.seed.name, request.seed.position, self.chain.joint_names)
            if request.solver and request.solver not in self.solvers:
                raise RequestError(
                    f'solver {request.solver!r} is not available; one of {sorted(self.solvers)}'
                )
            solutions, solver_name, seconds = self.solve(
                target,
                seed,
                max(1, request.max_solutions),
                request.refine,
                request.solver,
                request.position_only,
            )
        except RequestError as error:
            response.success = False
            response.message = str(error)
            return response
        response.solutions = [
            JointState(name=list(self.chain.joint_names), position=[float(v) for v in q])
            for q in solutions.joints
        ]
        for message in response.solutions:
            message.header.frame_id = self.base_frame
        response.position_errors = [float(e) for e in solutions.position_errors]
        response.orientation_errors = [float(e) for e in solutions.orientation_errors]
        response.within_limits = [bool(w) for w in solutions.within_limits]
        response.success = bool(solutions.success)
        response.message = (
            f'{solver_name}{" (position only)" if request.position_only else ""}: '
            f'{describe(solutions, self.chain, self.settings)} in {seconds * 1e6:.0f} us'
            f'{"" if solutions.success else far_past_reach(self.chain, target.position)}'
        )
        return response

    async def solve_path(
        self, request: SolvePath.Request, response: SolvePath.Response
    ) -> SolvePath.Response:
        """Answer a SolvePath request, and move the arm along it when asked; any failure is
        `success: false` with the reason."""
        if not self.solvers:
            return SolvePath.Response(success=False, failed_at=-1, message=self.not_ready())
        stops = self._stops
        self.get_logger().debug(
            f'solve_path: {path_service.describe_request(request)}; {self.ahead()}'
        )
        async with self.turns:
            return await self.answer_solve_path(request, stops)

    async def answer_solve_path(
        self, request: SolvePath.Request, stops: int
    ) -> SolvePath.Response:
        """solve_path's answer in its turn; stops: the count of stops when it was asked."""
        try:
            if request.execute and self.joint_states_age() > STALE_STATES_S:
                # (No joint states at all: path_service says so.)
                raise RequestError(f'execute needs where the arm is: {self.fresh_joints()[1]}')
            before = dict(self._latest_joints)
            solver_name = self.get_parameter('solver').value
            # A client's resend of a path it is still waiting for (ik_client resends once, in
            # case discovery lost the first) is answered from the first's answer: followed
            # again, a long path held the server (and a stop) for seconds more.
            key = None
            if not request.execute:
                names = self.chain.joint_names  # the arm's: not a gripper's jitter
                start = () if request.start.name else tuple(before.get(n) for n in names)
                # The message itself, compared field by field: its serialized bytes differ
                # between copies (CDR padding).
                key = (request, start, solver_name, self.settings, self.chain)
                if key == self._last_path[0] and time.monotonic() < self._last_path[2]:
                    self.get_logger().info('solve_path: a resent request, answered as before')
                    return self._last_path[1]
            solvers = self.position_only_solvers if request.position_only else self.solvers
            response = await self.worker.run(
                path_service.solve_path, request, self.chain, self.base_frame, self.settings,
                before, solvers.get(solver_name),
            )  # fmt: skip
            if key is not None:
                self._last_path = (key, response, time.monotonic() + RESENT_PATH_S)
            if request.execute and response.success and self._stops != stops:
                response.message += '; not executed: a stop came after it was asked'
                return response
            if request.execute and response.success:
                # The path starts where the arm was when asked: not sent where it moved since.
                now, reason = self.fresh_joints()
                was = arm_joints(before, self.chain.joint_names)
                # A continuous joint's state may have wrapped past +-pi meanwhile: the same arm.
                moved = (
                    path_service.start_distance(
                        self.chain, continuous_nearest(self.chain, now, was), was
                    )
                    if now is not None
                    else 0.0
                )
                if now is None or moved > path_service.START_TOLERANCE_RAD:
                    reason = reason or (
                        f'the arm moved {moved:.3g} rad (a slide: its m / '
                        f'{SLIDE_METRES_PER_RAD:g}) while it was solved'
                    )
                    response.message += f'; not executed: {reason}, ask again'
                    return response
                response.executed, reason = await self.commander.follow(response.trajectory)
                response.message += f'; {reason}'
            return response
        except RequestError as error:
            return SolvePath.Response(success=False, failed_at=-1, message=str(error))
        except Exception as error:  # a service callback must never take the node down
            self.get_logger().error(f'solve_path failed:\n{traceback.format_exc()}')
            return SolvePath.Response(
                success=False,
                failed_at=-1,
                message=f'internal error: {type(error).__name__}: {error}',
            )

    async def goal_task_space_path(
        self, request: SetKinematicsPose.Request, response: SetKinematicsPose.Response
    ) -> SetKinematicsPose.Response:
        """Solve and move; is_planned false on any failure, logged with the reason."""
        response.is_planned = False
        if not self.solvers:
            self.get_logger().warning(f'goal_task_space_path: {self.not_ready()}')
            return response
        stops = self._stops
        self.get_logger().debug(f'goal_task_space_path: {self.ahead()}')
        try:
            async with self.turns:
                return await self.move_to_pose(request, response, stops)
        except Exception:  # a service callback must never take the node down
            self.get_logger().error(f'goal_task_space_path failed:\n{traceback.format_exc()}')
            response.is_planned = False
            return response

    async def move_to_pose(
        self,
        request: SetKinematicsPose.Request,
        response: SetKinematicsPose.Response,
        stops: int,
    ) -> SetKinematicsPose.Response:
        """goal_task_space_path's move in its turn; stops: the count of stops when it was
        asked."""
        # ROBOTIS's own KinematicsPose has no header; a widely used fork adds one.
        header = getattr(request.kinematics_pose, 'header', None)
        try:
            target = self.check_pose(
                request.kinematics_pose.pose, header.frame_id if header is not None else ''
            )
            path_time = check_path_time(request.path_time)
            # Without the arm's every joint yet, solved without a seed.
            seed = arm_joints(self._latest_joints, self.chain.joint_names)
        except RequestError as error:
            self.get_logger().warning(f'goal_task_space_path refused: {error}')
            return response
        solutions, solver_name, _ = self.solve(target, seed, 1, refine=True)
        if not solutions.success:
            far = far_past_reach(self.chain, target.position)
            self.get_logger().warning(f'goal_task_space_path: {describe(solutions)}{far}')
            return response
        # From where the arm is: its fresh joint states, else its latest (the seed).
        start = self.fresh_joints()[0]
        refusal = move_refusal(self.chain, solutions, seed if start is None else start, path_time)
        if self._stops != stops:
            refusal = 'a stop came after it was asked'
        if refusal:
            self.get_logger().warning(f'goal_task_space_path refused: {refusal}')
            return response
        # Within the limits by the solver's slack (1e-9): on them exactly, as a controller
        # checks them.
        goal = into_limits(self.chain, solutions.joints[0])
        accepted, reason = await self.commander.command(self.chain.joint_names, goal, path_time)
        if not accepted:
            self.get_logger().warning(f'goal_task_space_path: arm command failed: {reason}')
            return response
        self.get_logger().info(
            f'goal_task_space_path: {solver_name} {np.round(goal, 4).tolist()} '
            f'over {path_time} s, {reason}'
        )
        response.is_planned = True
        return response

    async def stop(self, request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        """Hold the arm; any failure is `success: false` with the reason."""
        try:
            return await self.hold_arm(response)
        except Exception as error:  # a service callback must never take the node down
            self.get_logger().error(f'stop failed:\n{traceback.format_exc()}')
            response.success = False
            response.message = f'internal error: {type(error).__name__}: {error}'
            return response

    async def hold_arm(self, response: Trigger.Response) -> Trigger.Response:
        """Hold the arm where its joint states last were, over STOP_TIME_S: the goal replaces
        the one in progress (a legacy path's remaining points are not sent). Without recent
        joint states, a trajectory goal in progress is canceled (its controller holds the arm)."""
        self._stops += 1
        self.commander.drop_pending()
        if self.config.command_interface == 'none':
            response.success = False
            response.message = 'command_interface is none: this server moves nothing'
            return response
        present, reason = self.fresh_joints()
        if present is None:
            canceled = self.commander.cancel_active()
            response.success = canceled
            response.message = f'cannot hold the arm at its joint states: {reason}; ' + (
                'canceled the trajectory goal in progress (its controller holds the arm)'
                if canceled
                else 'no further goal is sent (one still awaiting its acceptance is canceled '
                'once accepted)'
            )
        else:
            response.success, sent = await self.commander.command(
                self.chain.joint_names, present, STOP_TIME_S
            )
            response.message = f'holding at {np.round(present, 4).tolist()}: {sent}'
        log_outcome(self.get_logger(), response.success, f'stop: {response.message}')
        return response

    def ahead(self) -> str:
        """For the log as a path or move request comes: what it waits for."""
        count = self.turns.ahead()
        return f'{count} request{"" if count == 1 else "s"} ahead'

    def destroy_node(self) -> None:
        self.worker.close()
        super().destroy_node()

    def fresh_joints(self) -> tuple[np.ndarray | None, str]:
        """The arm's joints (n,) from joint states at most STALE_STATES_S old, or None and why
        not: an arm is only held or moved from where it is now."""
        if self.chain is None:
            return None, self.not_ready()
        try:
            present = arm_joints(self._latest_joints, self.chain.joint_names)
        except RequestError as error:
            return None, str(error)
        if present is None:
            return None, 'no joint states from the arm have come'
        age = self.joint_states_age()
        if age > STALE_STATES_S:
            return None, f"the arm's latest joint states are {age:.1f} s old"
        return present, ''

    def joint_states_age(self) -> float:
        """Seconds since the oldest of the chain's latest joint states came (0 before any)."""
        came = [self._joint_states_at[name] for name in self.chain.joint_names
                if name in self._joint_states_at]  # fmt: skip
        return time.monotonic() - min(came) if came else 0.0

    def not_ready(self) -> str:
        """Why nothing is served yet: no robot description came, or the latest was refused (a
        client is told why, not that none came)."""
        topic = self.config.robot_description_topic
        if self._refused_description is not None:
            return (
                f'not ready: the robot description on {topic} cannot be served '
                f'({self._refused_description}); waiting for another'
            )
        return f'not ready: no robot description on {topic} yet'

    def on_joint_states(self, message: JointState) -> None:
        """Each joint's latest state, merged by name: several publishers may share the topic
        (a gripper's driver beside the arm's), each with some of the joints."""
        if len(message.name) == len(message.position):
            # A new dict, not an update in place: a request holds the one it copied.
            self._latest_joints = {
                **self._latest_joints,
                **dict(zip(message.name, message.position, strict=True)),
            }
            now = time.monotonic()
            self._joint_states_at = {**self._joint_states_at, **dict.fromkeys(message.name, now)}


def move_refusal(
    chain: Chain, solutions: Solutions, start: np.ndarray | None, path_time: float
) -> str:
    """Why the best of solutions must not be commanded from start (n,) rad over path_time s;
    '' where it may. Outside the software limits (the answer says so, and a controller without
    limits of its own drives the joint past them), or, from start, faster than a joint's URDF
    velocity limit or MOVE_SPEED_CAP (a path_time of 0.001, or in ms for s, commanded hundreds
    of rad/s). start None (no joint state has come: where the arm is, unknown): the speed is
    not judged; across each joint's whole range it refused a server's first moves, before its
    joint states came. The speed is the move's average; a legacy controller's smooth profile
    peaks higher."""
    goal = solutions.joints[0]
    low, high = joint_bounds(chain, 'limits')
    if not solutions.within_limits[0]:
        continuous = continuous_joints(chain)
        i = int(np.argmax(np.where(continuous, 0.0, np.maximum(low - goal, goal - high))))
        return (
            f'{chain.joint_names[i]} = {goal[i]:.4f} {chain.joints[i].unit} is outside its '
            f'software limits [{low[i]:.4f}, {high[i]:.4f}]'
        )
    if start is None:
        return ''
    speeds = np.abs(goal - start) / path_time
    allowed = np.minimum(velocity_limits(chain), MOVE_SPEED_CAP * slide_units(chain))
    i = int(np.argmax(speeds / allowed))
    if speeds[i] <= allowed[i]:
        return ''
    unit = f'{chain.joints[i].unit}/s'
    return (
        f'path_time {path_time:g} s needs {chain.joint_names[i]} at {speeds[i]:.3g} {unit}, '
        f'above {allowed[i]:.3g} {unit} (its URDF velocity limit, else {MOVE_SPEED_CAP:.3g}): '
        'give a longer path_time'
    )


def describe(
    solutions: Solutions, chain: Chain | None = None, settings: SolverSettings | None = None
) -> str:
    """One line for the response message and the log: how good the best solution is; given the
    chain and settings, how many of several solutions are other arm poses, not whole-turn twins
    of one (an arm with fewer arm poses than asked for fills up with those)."""
    if not len(solutions):
        return 'no solution'
    error = (
        f'{solutions.position_errors[0] * 1e3:.4f} mm, '
        f'{np.degrees(solutions.orientation_errors[0]):.4f} deg'
    )
    if not solutions.success:
        return f'no solution within tolerance; nearest is {error} from the target'
    limits = ' (outside the software limits)' if solutions.left_limits else ''
    poses = ''
    if chain is not None and settings is not None and len(solutions) > 1:
        count = arm_pose_count(chain, solutions.joints, settings.duplicate_tolerance)
        if count < len(solutions):
            poses = f' ({count} arm pose{"" if count == 1 else "s"}, the rest whole-turn twins)'
    return f'{len(solutions)} solution(s){poses}, best {error}{limits}'


def far_past_reach(chain: Chain, position: np.ndarray) -> str:
    """For a target more than twice the arm's stretched length from its base: a unit slip
    (millimetres for metres) is likelier than an arm that short; else ''."""
    distance, length = float(np.linalg.norm(position)), chain.stretched_length
    if distance <= 2 * length:
        return ''
    return (
        f' (the target is {distance:.4g} m from the base, the arm {length:.3g} m stretched: '
        'positions are in metres)'
    )


def main(args: list[str] | None = None) -> int:
    # run_node spins on one thread: rclpy's multi-threaded executor would more than double a
    # request's round trip. Moves await the controller, and paths the solver thread, as
    # coroutines instead.
    try:
        run_node(IKServer, args)
    except (ValueError, FileNotFoundError, ParameterException) as error:
        rclpy.logging.get_logger('ik_server').fatal(str(error))
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
