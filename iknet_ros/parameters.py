"""The IK server's parameters: declared with types, defaults and descriptions, and validated."""

from __future__ import annotations

from dataclasses import dataclass, fields

from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.parameter import Parameter

from iknet_core.device import DEVICES
from iknet_core.solvers.factory import SOLVER_NAMES as SOLVERS
from iknet_core.solvers.network import BACKENDS
from iknet_core.solvers.settings import DEFAULT_SETTINGS
from iknet_ros.arm_command import COMMAND_INTERFACES
from iknet_ros.node_parameters import declare as declare_parameter


@dataclass(frozen=True)
class ServerConfig:
    model_path: str = ''
    urdf: str = ''
    base_link: str = ''
    tip_link: str = ''
    robot_description_topic: str = ''
    device: str = 'auto'
    backend: str = 'compiled'
    solver: str = 'network+refine'
    base_frame: str = ''
    refine_iterations: int = DEFAULT_SETTINGS.max_iterations
    position_tolerance: float = DEFAULT_SETTINGS.tolerance.position
    orientation_tolerance: float = DEFAULT_SETTINGS.tolerance.orientation
    orientation_weight: float = DEFAULT_SETTINGS.orientation_weight
    command_interface: str = 'legacy'
    goal_joint_space_path_service: str = '/goal_joint_space_path'
    joint_trajectory_topic: str = '/arm_controller/joint_trajectory'
    follow_joint_trajectory_action: str = '/arm_controller/follow_joint_trajectory'
    joint_states_topic: str = '/joint_states'
    command_timeout: float = 2.0


DESCRIPTIONS = {
    'model_path': (
        "checkpoint file (.pt) of the network solvers; '' = the shipped OM-X models where the "
        'arm is the OM-X (a small one seeds network+refine)'
    ),
    'urdf': (
        'the arm: a .urdf or .urdf.xacro file, or the URDF XML itself (with base_link and '
        "tip_link); '' = the model's chain"
    ),
    'base_link': 'link the chain starts at, in urdf or the robot description',
    'tip_link': 'link the chain ends at (the end effector), in urdf or the robot description',
    'robot_description_topic': (
        'read the arm from this topic (transient local, as robot_state_publisher and MoveIt '
        "publish /robot_description) when urdf is ''; '' = do not wait for one"
    ),
    'device': f'where the network runs: one of {DEVICES} (auto = CUDA when present)',
    'backend': f'network runtime: one of {BACKENDS} (compiled = numba, fastest per query)',
    'solver': (
        f'default solver: one of {SOLVERS}; a request with refine=true always refines; a network '
        'solver for an arm with no model_path (the shipped models are for the OM-X) falls back '
        'to refine-from-zero'
    ),
    'base_frame': "frame of target poses; '' = the chain's base link",
    'refine_iterations': 'most Levenberg-Marquardt iterations per refinement',
    'position_tolerance': 'success threshold on FK position error (m)',
    'orientation_tolerance': 'success threshold on FK orientation error (rad)',
    'orientation_weight': (
        'm/rad: what a radian of orientation error costs against a metre of position error '
        'when refining and ranking; decides where unreachable targets end'
    ),
    'command_interface': f'how goal_task_space_path moves the arm: one of {COMMAND_INTERFACES}',
    'goal_joint_space_path_service': 'SetJointPosition service of the legacy controller',
    'joint_trajectory_topic': 'JointTrajectory topic of a ros2_control arm controller',
    'follow_joint_trajectory_action': (
        "that controller's FollowJointTrajectory action, used instead of the topic where it is "
        "served; '' = the topic only"
    ),
    'joint_states_topic': 'joint states used to seed moves, so the arm keeps its branch',
    'command_timeout': 'seconds to wait for the arm controller to accept a goal',
}
# Only the solver can change at run time; the rest is loaded or connected once at start-up.
READ_ONLY = {field.name for field in fields(ServerConfig)} - {'solver'}


# The longest wait for an arm controller to accept a goal (s): an hour is already none at all.
LONGEST_COMMAND_TIMEOUT_S = 3600.0


def check_value(name: str, value) -> str | None:
    """Why a parameter value is unacceptable, or None when it is fine."""
    choices = {
        'device': DEVICES,
        'backend': BACKENDS,
        'solver': SOLVERS,
        'command_interface': COMMAND_INTERFACES,
    }
    if name in choices and value not in choices[name]:
        return f'{name} must be one of {choices[name]}, got {value!r}'
    positive = ('position_tolerance', 'orientation_tolerance', 'command_timeout')
    if name in positive and not value > 0.0:
        return f'{name} must be positive, got {value}'
    # A timer of that length (rclpy counts it in int64 nanoseconds): inf failed every move.
    if name == 'command_timeout' and not value <= LONGEST_COMMAND_TIMEOUT_S:
        return f'command_timeout must be at most {LONGEST_COMMAND_TIMEOUT_S:g} s, got {value}'
    if name == 'orientation_weight' and not value >= 0.0:
        return f'orientation_weight must be >= 0 m/rad, got {value}'
    if name == 'refine_iterations' and value < 1:
        return f'refine_iterations must be at least 1, got {value}'
    return None


def declare(node: Node) -> ServerConfig:
    """Declare every parameter, check the values given at start-up, and return them.

    Raises ValueError naming the first bad value; later changes go through `on_set`.
    """
    defaults, values = ServerConfig(), {}
    for field in fields(ServerConfig):
        default = getattr(defaults, field.name)
        read_only = field.name in READ_ONLY
        value = declare_parameter(
            node, field.name, default, DESCRIPTIONS[field.name], read_only=read_only
        )
        problem = check_value(field.name, value)
        if problem:
            raise ValueError(problem)
        values[field.name] = value
    return ServerConfig(**values)


def on_set(parameters: list[Parameter]) -> SetParametersResult:
    """Refuse bad values at run time with a reason (ros2 param set shows it)."""
    for parameter in parameters:
        problem = check_value(parameter.name, parameter.value)
        if problem:
            return SetParametersResult(successful=False, reason=problem)
    return SetParametersResult(successful=True)
