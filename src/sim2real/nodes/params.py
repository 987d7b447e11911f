"""Declaring node parameters with descriptors, so `ros2 param describe` teaches."""

from __future__ import annotations

import math
from typing import Any

from rcl_interfaces.msg import ParameterDescriptor, SetParametersResult
from rclpy.node import Node


def declare(
    node: Node,
    name: str,
    default: Any,
    description: str,
    read_only: bool = True,
    at_least: float | None = None,
    above: float | None = None,
) -> Any:
    """Declare one parameter and return its value. ``at_least`` / ``above``: a number parameter
    must be finite and >= / > that, or a ValueError names it (the node exits with a
    configuration error; NaN passes every comparison and would fail only later, in a loop)."""
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    value = node.declare_parameter(name, default, descriptor).value
    if at_least is not None or above is not None:
        ok = math.isfinite(value) and (at_least is None or value >= at_least) and (above is None or value > above)
        if not ok:
            bound = f">= {at_least:g}" if at_least is not None else f"> {above:g}"
            raise ValueError(f"parameter {name}:={value!r} must be a finite number {bound} ({description})")
    return value


def refuse_clock_change(parameters) -> SetParametersResult:
    """An on-set-parameters callback: ``use_sim_time`` stays what it was at start. Switched on
    while running, a node would read a /clock that stands still and never see a sensor go stale;
    rclpy lets any participant set it."""
    for parameter in parameters:
        if parameter.name == "use_sim_time":
            return SetParametersResult(
                successful=False, reason="use_sim_time is fixed at start: restart the node to change it"
            )
    return SetParametersResult(successful=True)
