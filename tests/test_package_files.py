"""package.xml, CMakeLists.txt and setup.py, checked by reading them as colcon and pip would."""

import importlib
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import REPO_ROOT

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
        assert f'from {module} import main' in installed.read_text()


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


def test_setup_py_console_scripts_point_at_mains():
    text = (REPO_ROOT / 'setup.py').read_text()
    for script, module in re.findall(r"'(iknet-[\w-]+)\s*=\s*([\w.]+):main'", text):
        assert callable(importlib.import_module(module).main), script


def test_readme_names_the_two_commands_and_the_env_file():
    readme = (REPO_ROOT / 'README.md').read_text()
    assert 'make demo' in readme and 'make test' in readme
    assert '. ./env.sh' in readme
    ci = (REPO_ROOT / '.ci' / 'run').read_text()
    assert 'make test' in ci
    assert Path(REPO_ROOT / 'Makefile').read_text().count('tools/') >= 2
