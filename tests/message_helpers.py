"""The README's command lines as a shell splits them, and its `ros2 service call` commands as
request messages, filled as the ros2 CLI fills them from YAML (rosidl_runtime_py, which does it
there, is not on PyPI)."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import yaml

README = Path(__file__).parent.parent / 'README.md'


def readme_command_lines() -> list[list[str]]:
    """The command lines of the README's sh blocks as a shell splits them (continuations and
    quotes across lines joined, comments cut)."""
    readme = README.read_text()
    blocks = re.findall(r'```sh\n(.*?)```', readme, re.S)
    commands, pending = [], ''
    for line in '\n'.join(blocks).replace('\\\n', ' ').splitlines():
        pending = f'{pending}\n{line}' if pending else line
        try:
            words = shlex.split(pending, comments=True)
        except ValueError:  # a quote still open: the command goes on on the next line
            continue
        pending = ''
        if words:
            commands.append(words)
    assert not pending, f'a README command with a quote never closed: {pending}'
    return commands


def fill_message(message, values: dict):
    """message with the fields in values set, nested messages and sequences of them included."""
    types = message.get_fields_and_field_types()
    for name, value in values.items():
        assert name in types, f'{type(message).__name__} has no field {name!r}'
        element = re.fullmatch(r'sequence<(\w+)/(\w+)>', types[name])
        if isinstance(value, dict):
            fill_message(getattr(message, name), value)
        elif isinstance(value, list) and element:
            element_type = getattr(importlib.import_module(f'{element[1]}.msg'), element[2])
            setattr(message, name, [fill_message(element_type(), item) for item in value])
        else:
            setattr(message, name, value)
    return message


def readme_service_calls(service: str, service_type) -> list:
    """The requests of every `ros2 service call SERVICE TYPE ['YAML']` in the README (no YAML:
    an empty request)."""
    package = service_type.__module__.split('.')[0]
    requests = []
    for command in readme_command_lines():
        if command[:4] != ['ros2', 'service', 'call', service]:
            continue
        assert command[4] == f'{package}/srv/{service_type.__name__}', command
        values = yaml.safe_load(command[5]) if len(command) > 5 else {}
        requests.append(fill_message(service_type.Request(), values))
    assert requests, f'no `ros2 service call {service}` in the README'
    return requests
