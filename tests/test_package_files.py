"""package.xml, CMakeLists.txt and pyproject.toml, read as colcon and pip read them."""

import importlib
import os
import re
import shlex
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml
from conftest import REPO_ROOT
from message_helpers import readme_command_lines

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (ROS 2 Humble)
    import tomli as tomllib

from iknet_core.entry import TOOLS
from iknet_core.resources import installed_executable as executable


def entry_points() -> dict[str, str]:
    """The `ros2 run iknet NAME` executables CMakeLists.txt installs: NAME -> module."""
    cmake = (REPO_ROOT / 'CMakeLists.txt').read_text()
    block = re.search(r'set\(IKNET_ENTRY_POINTS(.*?)\)', cmake, re.S)
    assert block, 'CMakeLists.txt has no IKNET_ENTRY_POINTS list'
    return dict(line.strip().split('=') for line in block.group(1).split() if '=' in line)


def test_package_xml_is_format_3_iknet_with_ament_cmake():
    root = ET.parse(REPO_ROOT / 'package.xml').getroot()
    assert root.get('format') == '3'
    assert root.findtext('name') == 'iknet'
    assert root.find('export/build_type').text == 'ament_cmake'
    build_tools = {e.text for e in root.findall('buildtool_depend')}
    assert {'ament_cmake', 'ament_cmake_python', 'rosidl_default_generators'} <= build_tools
    assert root.findtext('member_of_group') == 'rosidl_interface_packages'
    email = root.find('maintainer').get('email')
    assert re.fullmatch(r'[\w.+-]+@[\w-]+(\.[\w-]+)*\.[a-z]{2,}', email), email


def test_every_entry_point_module_has_main_and_is_installed():
    for name, module in entry_points().items():
        assert callable(importlib.import_module(module).main), module
        installed = executable(name)
        assert os.access(installed, os.X_OK), installed
        assert f"entry.run('{module}'" in installed.read_text()


def test_cmake_installs_launch_and_config_and_the_service():
    cmake = (REPO_ROOT / 'CMakeLists.txt').read_text()
    assert re.search(r'install\(DIRECTORY config dataset launch models DESTINATION', cmake)
    assert '"srv/SolveIK.srv"' in cmake
    for package in ('iknet_core', 'iknet_collect', 'iknet_train', 'iknet_ros'):
        assert (REPO_ROOT / package / '__init__.py').is_file()
    assert re.search(
        r'foreach\(python_package iknet_core iknet_collect iknet_train iknet_ros\)', cmake
    )


def test_solve_ik_service_fields():
    from iknet.srv import SolveIK

    request_fields = SolveIK.Request.get_fields_and_field_types()
    assert request_fields == {
        'target': 'geometry_msgs/PoseStamped',
        'seed': 'sensor_msgs/JointState',
        'max_solutions': 'uint32',
        'refine': 'boolean',
        'solver': 'string',
        'position_only': 'boolean',
    }
    response_fields = SolveIK.Response.get_fields_and_field_types()
    assert response_fields['solutions'] == 'sequence<sensor_msgs/JointState>'
    assert {'success', 'message', 'position_errors', 'orientation_errors'} <= set(response_fields)


def test_open_manipulator_msgs_fields_match_robotis():
    from open_manipulator_msgs.msg import JointPosition, KinematicsPose
    from open_manipulator_msgs.srv import SetActuatorState, SetJointPosition, SetKinematicsPose

    assert list(KinematicsPose.get_fields_and_field_types()) == [
        'header',
        'pose',
        'max_accelerations_scaling_factor',
        'max_velocity_scaling_factor',
        'tolerance',
    ]
    assert list(JointPosition.get_fields_and_field_types()) == [
        'joint_name',
        'position',
        'max_accelerations_scaling_factor',
        'max_velocity_scaling_factor',
    ]
    assert list(SetJointPosition.Request.get_fields_and_field_types()) == [
        'planning_group',
        'joint_position',
        'path_time',
    ]
    assert list(SetKinematicsPose.Request.get_fields_and_field_types()) == [
        'planning_group',
        'end_effector_name',
        'kinematics_pose',
        'path_time',
    ]
    assert list(SetActuatorState.Response.get_fields_and_field_types()) == ['is_planned']


def test_control_msgs_follow_joint_trajectory_fields_match_ros2_control():
    from control_msgs.action import FollowJointTrajectory
    from control_msgs.msg import JointComponentTolerance, JointTolerance

    assert list(FollowJointTrajectory.Goal.get_fields_and_field_types()) == [
        'trajectory',
        'multi_dof_trajectory',
        'path_tolerance',
        'component_path_tolerance',
        'goal_tolerance',
        'component_goal_tolerance',
        'goal_time_tolerance',
    ]
    assert list(FollowJointTrajectory.Result.get_fields_and_field_types()) == [
        'error_code',
        'error_string',
    ]
    assert FollowJointTrajectory.Result.GOAL_TOLERANCE_VIOLATED == -5
    assert list(FollowJointTrajectory.Feedback.get_fields_and_field_types())[:5] == [
        'header',
        'joint_names',
        'desired',
        'actual',
        'error',
    ]
    assert list(JointTolerance.get_fields_and_field_types()) == [
        'name',
        'position',
        'velocity',
        'acceleration',
    ]
    assert list(JointComponentTolerance.get_fields_and_field_types())[:2] == [
        'joint_name',
        'component',
    ]


# pyproject.toml requirement -> the rosdep key package.xml declares for it. rosdistro's
# rosdep/python.yaml has no key for onnx or pytorch-pfn-extras: rosdep.yaml here defines those.
ROSDEP_KEYS = {
    'numpy': 'python3-numpy',
    'pandas': 'python3-pandas',
    'matplotlib': 'python3-matplotlib',
    'torch': 'python3-pytorch-pip',
    'pytorch-pfn-extras': 'python3-pytorch-pfn-extras-pip',
    'onnx': 'python3-onnx-pip',
    'onnxruntime': 'python3-onnxruntime-pip',
    'numba': 'python3-numba',
    'PyYAML': 'python3-yaml',
    'yourdfpy': 'python3-yourdfpy-pip',
    'rosbags': 'python3-rosbags-pip',
    'optuna': 'python3-optuna-pip',
    'pytest': 'python3-pytest',
    'pytest-timeout': 'python3-pytest-timeout',
    'ros-domain-coordinator': 'domain_coordinator',
    'psycopg2-binary': 'python3-psycopg2',
    'zuko': 'python3-zuko-pip',
}
# Test extras rosdep does not install: the linter and pytest-xdist (its workers) serve `make test`,
# which runs the tests (CMakeLists.txt registers none with `colcon test`), not the package;
# tomli is Python 3.10's tomllib, for reading pyproject.toml here.
NOT_ROSDEP = {'ruff', 'pytest-xdist', 'tomli'}


def pyproject() -> dict:
    return tomllib.loads((REPO_ROOT / 'pyproject.toml').read_text())


def requirement_names(requirements: list[str]) -> list[str]:
    return [re.match(r'[A-Za-z0-9._-]+', requirement).group(0) for requirement in requirements]


def package_xml_keys(*tags: str) -> set[str]:
    root = ET.parse(REPO_ROOT / 'package.xml').getroot()
    return {element.text for tag in tags for element in root.findall(tag)}


def test_every_python_dependency_has_its_rosdep_key_in_package_xml():
    project = pyproject()['project']
    run_keys = package_xml_keys('depend', 'exec_depend')
    for name in requirement_names(project['dependencies']):
        assert ROSDEP_KEYS.get(name) in run_keys, f'{name}: no exec_depend {ROSDEP_KEYS.get(name)}'
    test_keys = run_keys | package_xml_keys('test_depend')
    for name in requirement_names(project['optional-dependencies']['test']):
        if name not in NOT_ROSDEP:
            assert ROSDEP_KEYS.get(name) in test_keys, f'{name}: no key in package.xml'
    python_keys = {key for key in package_xml_keys('exec_depend', 'test_depend') if '-' in key}
    assert python_keys <= set(ROSDEP_KEYS.values()), 'package.xml has a key pyproject.toml lacks'


def test_keys_rosdistro_lacks_are_defined_here_for_the_same_pypi_packages():
    defined = yaml.safe_load((REPO_ROOT / 'rosdep.yaml').read_text())
    by_key = {key: name for name, key in ROSDEP_KEYS.items()}
    assert set(defined) == {
        'python3-onnx-pip',
        'python3-pytorch-pfn-extras-pip',
        'python3-yourdfpy-pip',
        'python3-rosbags-pip',
        'python3-optuna-pip',
        'python3-zuko-pip',
    }
    for key, rules in defined.items():
        for os_name in ('debian', 'ubuntu'):
            assert rules[os_name]['pip']['packages'] == [by_key[key]], (key, os_name)


def test_ros_pypi_extra_has_a_wheel_for_every_ros_package_in_package_xml():
    extras = pyproject()['project']['optional-dependencies']
    wheels = set(requirement_names(extras['ros-pypi']))
    tags = ('buildtool_depend', 'depend', 'exec_depend', 'test_depend')
    ros_packages = {key for key in package_xml_keys(*tags) if '-' not in key}
    # Published on PyPI under their own names (xacro: ROS's own package, in the robots extra).
    own_names = {'domain_coordinator': 'ros-domain-coordinator', 'xacro': 'xacro'}
    wheels |= set(requirement_names(extras['robots']))
    # open_manipulator_msgs, control_msgs: tools/setup.sh builds compatible ones in interfaces/.
    for name in ros_packages - {'open_manipulator_msgs', 'control_msgs'}:
        wheel = own_names.get(name, f'ros-kilted-{name}')
        assert wheel.replace('_', '-') in wheels, f'{name}: no {wheel} in the ros-pypi extra'


def test_console_scripts_point_at_mains():
    scripts = pyproject()['project']['scripts']
    assert set(scripts) == {
        'iknet-train', 'iknet-test', 'iknet-export', 'iknet-bench', 'iknet-chain',
        'iknet-convert', 'iknet-finetune-study', 'iknet-tune', 'iknet-path-bench',
        'iknet-sample-bench',
    }  # fmt: skip
    from iknet_core import entry

    assert set(TOOLS) == set(scripts)
    assert set(TOOLS.values()) <= set(entry_points().values()), 'each is a ros2 run one too'
    for script, target in scripts.items():
        module, function = target.split(':')
        assert module == 'iknet_core.entry' and callable(getattr(entry, function)), script
        assert callable(importlib.import_module(TOOLS[script]).main), script


def test_readme_names_the_two_commands_and_the_env_file():
    readme = (REPO_ROOT / 'README.md').read_text()
    assert 'make demo' in readme and 'make test' in readme
    assert '. ./env.sh' in readme
    ci = (REPO_ROOT / '.ci' / 'run').read_text()
    assert 'make test' in ci
    assert Path(REPO_ROOT / 'Makefile').read_text().count('tools/') >= 2


def readme_commands() -> list[tuple[str, str, list[str]]]:
    """(the line, what reads it, its arguments) for every README command line of iknet: an
    iknet-* script, `python -m iknet_...` and `ros2 run iknet NAME` (the module that parses its
    flags; from --ros-args on, ROS reads: a line of its own, 'ros-args' followed by the module),
    and `ros2 launch iknet FILE` ('launch' followed by the file)."""
    scripts = pyproject()['project']['scripts']
    executables = entry_points()
    commands = []
    for words in readme_command_lines():
        line = shlex.join(words)
        if words[0] in scripts:
            commands.append((line, TOOLS[words[0]], words[1:]))
        elif words[:2] == ['python', '-m'] and words[2].startswith('iknet'):
            commands.append((line, words[2], words[3:]))
        elif words[:3] == ['ros2', 'run', 'iknet']:
            module, arguments = executables[words[3]], words[4:]
            if '--ros-args' in arguments:
                cut = arguments.index('--ros-args')
                commands.append((line, f'ros-args {module}', arguments[cut + 1 :]))
                arguments = arguments[:cut]
            commands.append((line, module, arguments))
        elif words[:3] == ['ros2', 'launch', 'iknet']:
            commands.append((line, f'launch {words[3]}', words[4:]))
    return commands


def refused_by_parser(module: str, arguments: list[str]) -> bool:
    """Whether the module's own parser (ik_client's parse_args, with its checks of flag
    combinations, else build_parser) refuses the arguments; a node takes none but ROS's."""
    tool = importlib.import_module(module)
    try:
        if hasattr(tool, 'parse_args'):
            tool.parse_args(arguments)
        elif hasattr(tool, 'build_parser'):
            tool.build_parser().parse_args(arguments)
        else:
            return bool(arguments)
    except SystemExit:
        return True
    return False


def undeclared_parameters(module: str, arguments: list[str]) -> list[str]:
    """The -p name:=value names of a node's --ros-args its module does not declare."""
    names = [value.split(':=')[0] for value in arguments[1::2]]
    assert arguments[::2] == ['-p'] * len(names), arguments
    source = Path(importlib.import_module(module).__file__).read_text()
    declared = set(re.findall(r"declare(?:_parameter)?\(\s*(?:self,\s*)?'(\w+)'", source))
    return [name for name in names if name not in declared]


def test_every_readme_command_line_parses():
    # A flag renamed in code and not in the README fails here, as does a value argparse
    # refuses (a type, a choice); values the tools check after parsing (--model-config JSON,
    # --synthetic-ranges) are not checked.
    from iknet_train.tune import split_argv

    commands = readme_commands()
    kinds = {reader.split()[0] for _, reader, _ in commands}
    assert {'iknet_train.train', 'iknet_ros.ik_client', 'iknet_train.tune'} <= kinds
    assert {'ros-args', 'launch'} <= kinds
    refused = []
    for line, reader, arguments in commands:
        kind, _, target = reader.partition(' ')
        if kind == 'ros-args':
            refused += [f'{line} ({name})' for name in undeclared_parameters(target, arguments)]
        elif kind == 'launch':
            launch = (REPO_ROOT / 'launch' / target).read_text()
            names = [argument.split(':=')[0] for argument in arguments]
            refused += [f'{line} ({name})' for name in names if f'name="{name}"' not in launch]
        elif kind == 'iknet_train.tune':
            tune_arguments, train_arguments = split_argv(arguments)
            if refused_by_parser(kind, tune_arguments) or refused_by_parser(
                'iknet_train.train', train_arguments
            ):
                refused.append(line)
        elif refused_by_parser(kind, arguments):
            refused.append(line)
    assert not refused, f'README lines their tools refuse: {refused}'


def test_torch_openmp_spin_is_set_before_torch_loads():
    # libgomp reads GOMP_SPINCOUNT once, when torch loads: each part sets it on import, first.
    environment = {k: v for k, v in os.environ.items() if k != 'GOMP_SPINCOUNT'}
    for part in ('iknet_train', 'iknet_ros', 'iknet_collect'):  # a fresh process each
        code = (
            f'import os, sys, {part}\n'
            'assert "torch" not in sys.modules, "torch loaded before the setting"\n'
            'print(os.environ.get("GOMP_SPINCOUNT"))\n'
        )
        for given, expected in ((None, '30000'), ('5', '5')):  # a user's own value is kept
            run_environment = {**environment, **({'GOMP_SPINCOUNT': given} if given else {})}
            result = subprocess.run(
                [sys.executable, '-c', code], env=run_environment, capture_output=True, text=True
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == expected, part
