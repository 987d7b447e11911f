"""Declaring node parameters with descriptors, so `ros2 param describe` teaches."""
from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
from rclpy.node import Node


def declare(node: Node, name: str, default: Any, description: str, read_only: bool = True) -> Any:
    """Declare one parameter and return its value."""
    descriptor = ParameterDescriptor(description=description, read_only=read_only)
    return node.declare_parameter(name, default, descriptor).value
