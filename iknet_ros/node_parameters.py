"""Node parameters declared one way in every node: typed default, description, read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.node import Node
from rclpy.parameter import Parameter


def declare(
    node: Node,
    name: str,
    default: Any,
    description: str,
    *,
    float_range: tuple[float, float] | None = None,
    int_range: tuple[int, int] | None = None,
    read_only: bool = True,
) -> Any:
    """Declare a parameter and return its value, refused (rclpy's ParameterException) where it is
    of the wrong type or outside its range.

    Start-up parameters are read-only: changing them while running would not take effect. A
    read-only number given whole (`duration:=60`, which launch and `-p` type as an integer) is
    taken as the float it means: declared with dynamic typing, then type- and range-checked
    here (rclpy checks the rest). The node keeps it as given, so `ros2 param get` shows 60.
    """
    whole_numbers_taken = read_only and _is_floats(default)
    descriptor = ParameterDescriptor(
        description=description, read_only=read_only, dynamic_typing=whole_numbers_taken
    )
    if float_range is not None:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=float_range[0], to_value=float_range[1])
        ]
    if int_range is not None:
        descriptor.integer_range = [IntegerRange(from_value=int_range[0], to_value=int_range[1])]
    value = node.declare_parameter(name, default, descriptor).value
    if whole_numbers_taken:
        value = _as_floats(name, value, isinstance(default, float), float_range)
    return value


def warn_of_unknown(node: Node) -> None:
    """Warn of parameters given to the node (`-p`, a launch file, a YAML file) that it does not
    have: rclpy ignores them without a word, so a typo (`baselink:=...`) went unnoticed."""
    given = getattr(node, '_parameter_overrides', {})  # rclpy keeps them nowhere public
    unknown = sorted(
        name
        for name in given
        if not node.has_parameter(name) and not name.startswith('qos_overrides.')
    )
    if unknown:
        node.get_logger().warning(
            f'not parameters of {node.get_name()}, ignored: {unknown} (a typo, or meant for '
            f'another node?); its parameters: '
            f'{sorted(node.get_parameters_by_prefix(""))}'
        )


def _is_floats(value: Any) -> bool:
    many = isinstance(value, list | tuple) and bool(value)
    return isinstance(value, float) or (many and all(isinstance(v, float) for v in value))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_floats(
    name: str, value: Any, scalar: bool, float_range: tuple[float, float] | None
) -> float | list[float]:
    """A float (or list of floats) parameter's value with whole numbers taken as floats; the
    error rclpy gives a statically typed one for any other type or a value out of its range."""
    values = [value] if scalar else value
    if isinstance(values, str | bytes | int | float) or not all(map(_is_number, values)):
        expected = 'DOUBLE' if scalar else 'DOUBLE_ARRAY'
        raise InvalidParameterTypeException(Parameter(name, value=value), expected)
    floats = [float(v) for v in values]
    if float_range is not None and not all(float_range[0] <= v <= float_range[1] for v in floats):
        raise InvalidParameterValueException(
            name, value, f'must be in [{float_range[0]}, {float_range[1]}]'
        )
    return floats[0] if scalar else floats


def choice_validator(
    choices: dict[str, tuple[str, ...]],
) -> Callable[[list], SetParametersResult]:
    """An on-set-parameters callback accepting only the listed values of string parameters."""

    def validate(parameters: list) -> SetParametersResult:
        for parameter in parameters:
            allowed = choices.get(parameter.name)
            if allowed is not None and parameter.value not in allowed:
                reason = f'{parameter.name} must be one of {list(allowed)}: {parameter.value!r}'
                return SetParametersResult(successful=False, reason=reason)
        return SetParametersResult(successful=True)

    return validate
