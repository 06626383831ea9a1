"""The README's `ros2 service call` commands as request messages, filled as the ros2 CLI fills
them from YAML (rosidl_runtime_py, which does it there, is not on PyPI)."""

from __future__ import annotations

import importlib
import re
import shlex
from pathlib import Path

import yaml

README = Path(__file__).parent.parent / 'README.md'


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
    """The requests of every `ros2 service call SERVICE TYPE 'YAML'` in the README."""
    readme = README.read_text().replace('\\\n', ' ')
    requests = []
    start = readme.find(f'ros2 service call {service} ')
    while start >= 0:
        lexer = shlex.shlex(readme[start:], posix=True)
        lexer.whitespace_split = True
        command = [lexer.get_token() for _ in range(6)]  # the YAML may span several lines
        assert command[4] == f'iknet/srv/{service_type.__name__}', command
        requests.append(fill_message(service_type.Request(), yaml.safe_load(command[5])))
        start = readme.find(f'ros2 service call {service} ', start + 1)
    assert requests, f'no `ros2 service call {service}` in the README'
    return requests
