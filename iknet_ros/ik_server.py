"""`ros2 run iknet ik_server`: IK solutions for poses as a ROS 2 service, and moves to poses.

Services (relative to the node name):
- ~/solve_ik (iknet/srv/SolveIK): solutions best first, each with its FK error;
- ~/goal_task_space_path (open_manipulator_msgs/srv/SetKinematicsPose): solve, seeded with the
  arm's latest /joint_states, then send the arm there; a drop-in for the ROBOTIS service.
"""

from __future__ import annotations

import time

import numpy as np
import rclpy
from geometry_msgs.msg import Pose
from open_manipulator_msgs.srv import SetKinematicsPose
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

from iknet.srv import SolveIK
from iknet_core.ros_spin import spin_until_stopped
from iknet_core.solvers import Solutions, Tolerance
from iknet_core.solvers.factory import build_solver
from iknet_core.solvers.network import NetworkProposer
from iknet_ros import parameters
from iknet_ros.arm_command import make_commander
from iknet_ros.qos import SERVICE_QUEUE_QOS
from iknet_ros.requests import RequestError, Target, check_path_time, check_seed, check_target

# Only the newest joint state matters for seeding; a late or lost one is replaced 10 ms later.
latest_state_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT)


class IKServer(Node):
    def __init__(self) -> None:
        super().__init__('ik_server')
        self.config = parameters.declare(self)
        self.add_on_set_parameters_callback(parameters.on_set)
        self.solvers = self.build_solvers()
        self._latest_joints: dict[str, float] = {}
        self.commander = make_commander(
            self,
            self.config.command_interface,
            self.config.goal_joint_space_path_service,
            self.config.joint_trajectory_topic,
            self.config.command_timeout,
        )
        self.create_service(
            SolveIK,
            '~/solve_ik',
            self.solve_ik,
            qos_profile=SERVICE_QUEUE_QOS,
        )
        # Its own group: a move awaiting the controller must not hold up IK requests.
        self.create_service(
            SetKinematicsPose,
            '~/goal_task_space_path',
            self.goal_task_space_path,
            callback_group=MutuallyExclusiveCallbackGroup(),
        )
        self.create_subscription(
            JointState, self.config.joint_states_topic, self.on_joint_states, latest_state_qos
        )

    def build_solvers(self) -> dict:
        """Every solver the `solver` parameter can pick, sharing one loaded network."""
        config = self.config
        tolerance = Tolerance(config.position_tolerance, config.orientation_tolerance)
        weight = config.orientation_weight
        solvers = {
            'analytic': build_solver('analytic', tolerance=tolerance, orientation_weight=weight)
        }
        if config.solver != 'analytic':
            proposer = NetworkProposer(config.model_path or None, config.device, config.backend)
            self.get_logger().info(f'loaded {proposer.describe()}')
            for name in ('network', 'network+refine', 'refine-from-zero'):
                solvers[name] = build_solver(
                    name,
                    tolerance=tolerance,
                    max_iterations=config.refine_iterations,
                    proposer=proposer,
                    orientation_weight=weight,
                )
            if proposer.chain.joint_names != list(config.joint_names):
                raise ValueError(
                    f'model joints {proposer.chain.joint_names} differ from joint_names '
                    f'{list(config.joint_names)}'
                )
        # The first call of each compiled path loads it; pay that now, not in a request.
        for solver in solvers.values():
            solver.solve(np.array([0.2, 0.0, 0.1]), np.eye(3), seed=np.zeros(4), max_solutions=4)
            solver.solve(np.array([0.2, 0.0, 0.1]), np.eye(3))
        self.get_logger().info(f'solver {config.solver}; available: {sorted(solvers)}')
        return solvers

    def solve(
        self,
        target: Target,
        seed: np.ndarray | None,
        max_solutions: int,
        refine: bool,
        solver_name: str = '',
    ) -> tuple[Solutions, str, float]:
        """Solutions for a checked target, the solver used and the compute time (s)."""
        solver_name = solver_name or self.get_parameter('solver').value
        if refine and solver_name == 'network':
            solver_name = 'network+refine'
        started = time.perf_counter()
        solutions = self.solvers[solver_name].solve(
            target.position, target.rotation, seed=seed, max_solutions=max_solutions
        )
        return solutions, solver_name, time.perf_counter() - started

    def check_pose(self, pose: Pose, frame_id: str) -> Target:
        """A geometry_msgs/Pose target checked by the request rules; RequestError otherwise."""
        p, o = pose.position, pose.orientation
        return check_target(
            [p.x, p.y, p.z], [o.x, o.y, o.z, o.w], frame_id, self.config.base_frame
        )

    def solve_ik(self, request: SolveIK.Request, response: SolveIK.Response) -> SolveIK.Response:
        try:
            target = self.check_pose(request.target.pose, request.target.header.frame_id)
            seed = check_seed(request.seed.name, request.seed.position, self.config.joint_names)
            if request.solver and request.solver not in self.solvers:
                raise RequestError(
                    f'solver {request.solver!r} is not available; one of {sorted(self.solvers)}'
                )
        except RequestError as error:
            response.success = False
            response.message = str(error)
            return response
        solutions, solver_name, seconds = self.solve(
            target, seed, max(1, request.max_solutions), request.refine, request.solver
        )
        response.solutions = [
            JointState(name=list(self.config.joint_names), position=[float(v) for v in q])
            for q in solutions.joints
        ]
        for message in response.solutions:
            message.header.frame_id = self.config.base_frame
        response.position_errors = [float(e) for e in solutions.position_errors]
        response.orientation_errors = [float(e) for e in solutions.orientation_errors]
        response.within_limits = [bool(w) for w in solutions.within_limits]
        response.success = bool(solutions.success)
        response.message = f'{solver_name}: {describe(solutions)} in {seconds * 1e6:.0f} us'
        return response

    async def goal_task_space_path(
        self, request: SetKinematicsPose.Request, response: SetKinematicsPose.Response
    ) -> SetKinematicsPose.Response:
        response.is_planned = False
        # ROBOTIS's own KinematicsPose has no header; a widely used fork adds one.
        header = getattr(request.kinematics_pose, 'header', None)
        try:
            target = self.check_pose(
                request.kinematics_pose.pose, header.frame_id if header is not None else ''
            )
            path_time = check_path_time(request.path_time)
            current = dict(self._latest_joints)
            seed = (
                check_seed(list(current), list(current.values()), self.config.joint_names)
                if current
                else None
            )
        except RequestError as error:
            self.get_logger().warning(f'goal_task_space_path refused: {error}')
            return response
        solutions, solver_name, _ = self.solve(target, seed, 1, refine=True)
        if not solutions.success:
            self.get_logger().warning(f'goal_task_space_path: {describe(solutions)}')
            return response
        accepted, reason = await self.commander.command(
            self.config.joint_names, solutions.joints[0], path_time
        )
        if not accepted:
            self.get_logger().warning(f'goal_task_space_path: arm command failed: {reason}')
            return response
        self.get_logger().info(
            f'goal_task_space_path: {solver_name} {np.round(solutions.joints[0], 4).tolist()} '
            f'over {path_time} s, {reason}'
        )
        response.is_planned = True
        return response

    def on_joint_states(self, message: JointState) -> None:
        if len(message.name) == len(message.position):
            self._latest_joints = dict(zip(message.name, message.position, strict=True))


def describe(solutions: Solutions) -> str:
    """One line for the response message and the log: how good the best solution is."""
    if not len(solutions):
        return 'no solution'
    error = (
        f'{solutions.position_errors[0] * 1e3:.4f} mm, '
        f'{np.degrees(solutions.orientation_errors[0]):.4f} deg'
    )
    if not solutions.success:
        return f'no solution within tolerance; nearest is {error} from the target'
    limits = ' (outside the software limits)' if solutions.left_limits else ''
    return f'{len(solutions)} solution(s), best {error}{limits}'


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    try:
        node = IKServer()
    except (ValueError, FileNotFoundError) as error:
        rclpy.logging.get_logger('ik_server').fatal(str(error))
        rclpy.try_shutdown()
        return 1
    # One thread: solvers keep scratch buffers, and rclpy's multi-threaded executor would more
    # than double a request's round trip. Moves await the controller as coroutines instead.
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    try:
        spin_until_stopped(executor.spin)
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
