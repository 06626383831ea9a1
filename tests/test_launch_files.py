"""Every launch/*.xml, checked by reading it: `ros2 launch` is not available here.

Each node is an installed iknet executable, each parameter file and included launch file exists,
each argument has a default and a description, and YAML files address the node names used.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from conftest import REPO_ROOT

from iknet_core.resources import installed_executable as executable

LAUNCH_FILES = sorted((REPO_ROOT / 'launch').glob('*.xml'))
SUBSTITUTION = re.compile(r'\$\((\S+)\s*([^)]*)\)')


def resolve(text: str, args: dict[str, str | None]) -> str:
    """Substitutions as `ros2 launch` with default arguments would make them."""

    def substitute(match: re.Match) -> str:
        kind, value = match.group(1), match.group(2).strip()
        if kind == 'find-pkg-share':
            assert value == 'iknet', f'refers to another package: {value}'
            return str(REPO_ROOT)
        if kind == 'var':
            assert value in args, f'$(var {value}) is not a declared argument'
            return resolve(args[value] or '', args)
        raise AssertionError(f'unexpected substitution $({kind} {value})')

    return SUBSTITUTION.sub(substitute, text)


def declared(root: ET.Element) -> dict[str, str | None]:
    return {arg.get('name'): arg.get('default') for arg in root.findall('arg')}


def test_there_are_launch_files():
    names = {path.name for path in LAUNCH_FILES}
    assert {'record.launch.xml', 'sim.launch.xml'} <= names


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_arguments_have_defaults_and_descriptions(path: Path):
    root = ET.parse(path).getroot()
    assert root.tag == 'launch'
    for arg in root.findall('arg'):
        assert arg.get('default') is not None, f'{arg.get("name")} has no default'
        assert (arg.get('description') or '').strip(), f'{arg.get("name")} has no description'


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_nodes_are_installed_and_their_parameter_files_address_them(path: Path):
    root = ET.parse(path).getroot()
    args = declared(root)
    for node in root.iter('node'):
        assert node.get('pkg') == 'iknet'
        executable(node.get('exec'))  # FileNotFoundError if not installed
        in_files, named = set(), []
        for param in node.findall('param'):
            if param.get('from') is None:
                assert param.get('name') and param.get('value') is not None
                resolve(param.get('value'), args)
                named.append(param.get('name'))
                continue
            params_file = Path(resolve(param.get('from'), args))
            assert params_file.is_file(), f'{params_file} does not exist'
            content = yaml.safe_load(params_file.read_text())
            name = node.get('name')
            assert name in content or '/**' in content, f'{params_file} has no {name}: section'
            assert 'ros__parameters' in content.get(name, content.get('/**'))
            in_files |= set(content.get(name, content.get('/**'))['ros__parameters'])
        # The parameter files list every parameter of their node: a name set here is one of them.
        unknown = [name for name in named if in_files and name not in in_files]
        assert not unknown, f'{node.get("name")} has no parameter {unknown}'


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_includes_exist_and_get_only_declared_arguments(path: Path):
    root = ET.parse(path).getroot()
    args = declared(root)
    for include in root.iter('include'):
        included = Path(resolve(include.get('file'), args))
        assert included.is_file(), f'{included} does not exist'
        assert included.parent == REPO_ROOT / 'launch'
        included_args = declared(ET.parse(included).getroot())
        for arg in include.findall('arg'):
            assert arg.get('name') in included_args, f'{included.name} has no {arg.get("name")}'
            resolve(arg.get('value'), args)
        if include.get('if') is not None:
            assert resolve(include.get('if'), args) in ('true', 'false')


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_every_argument_acts_in_its_file(path: Path):
    """`ros2 launch --show-args` lists nothing that does nothing there."""
    text = path.read_text()
    for name in declared(ET.parse(path).getroot()):
        assert f'$(var {name})' in text, f'{path.name}: argument {name} is never used'


@pytest.mark.parametrize('path', LAUNCH_FILES, ids=lambda p: p.name)
def test_solver_descriptions_name_every_solver(path: Path):
    from iknet_core.solvers.factory import SOLVER_NAMES

    for arg in ET.parse(path).getroot().findall('arg'):
        if arg.get('name') == 'solver':
            assert arg.get('description').split(' | ') == list(SOLVER_NAMES)


def test_a_recording_with_a_duration_ends_the_launch():
    root = ET.parse(REPO_ROOT / 'launch' / 'record.launch.xml').getroot()
    (recorder,) = [node for node in root.iter('node') if node.get('exec') == 'recorder']
    assert recorder.get('on_exit') == 'shutdown'
