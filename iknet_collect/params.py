"""Node parameters declared one way in both nodes: typed default, description, read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rcl_interfaces.msg import (
    FloatingPointRange,
    IntegerRange,
    ParameterDescriptor,
    SetParametersResult,
)
from rclpy.node import Node


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
    """Declare a parameter and return its value; ranges are enforced by rclpy itself.

    Start-up parameters are read-only: changing them while running would not take effect.
    """
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    if float_range is not None:
        descriptor.floating_point_range = [
            FloatingPointRange(from_value=float_range[0], to_value=float_range[1])
        ]
    if int_range is not None:
        descriptor.integer_range = [IntegerRange(from_value=int_range[0], to_value=int_range[1])]
    return node.declare_parameter(name, default, descriptor).value


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
