"""The IK server's parameters: the shipped YAML, the declared defaults and the checks agree."""

from dataclasses import asdict

import pytest
import yaml
from conftest import REPO_ROOT

from iknet_ros.parameters import DESCRIPTIONS, ServerConfig, check_value


def test_shipped_yaml_sets_every_parameter_to_its_declared_default():
    shipped = yaml.safe_load((REPO_ROOT / 'config' / 'ik_server.yaml').read_text())
    values = shipped['ik_server']['ros__parameters']
    defaults = asdict(ServerConfig())
    assert set(values) == set(defaults) == set(DESCRIPTIONS)
    for name, value in values.items():
        expected = defaults[name]
        assert (tuple(value) if isinstance(value, list) else value) == expected, name
        assert check_value(name, value) is None, name


@pytest.mark.parametrize(
    ('name', 'value', 'reason'),
    [
        ('orientation_weight', -0.1, 'orientation_weight must be >= 0'),
        ('position_tolerance', 0.0, 'must be positive'),
        ('solver', 'fastest', 'solver must be one of'),
        ('refine_iterations', 0, 'at least 1'),
        ('command_timeout', float('inf'), 'command_timeout must be at most 3600 s'),
        ('command_timeout', float('nan'), 'must be positive'),
    ],
)
def test_bad_values_are_refused_with_a_reason(name, value, reason):
    assert reason in check_value(name, value)
