"""One node's one-status /diagnostics message, stamped now: what most nodes publish each second."""

from __future__ import annotations

from typing import Mapping

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.node import Node
from rclpy.publisher import Publisher


def publish_status(
    node: Node,
    publisher: Publisher,
    level: int,
    name: str,
    message: str,
    values: Mapping[str, object],
    hardware_id: str = "",
) -> None:
    """Publish ``DiagnosticArray([status])``; ``values`` become KeyValues (str of each value)."""
    status = DiagnosticStatus(
        level=level,
        name=f"{node.get_name()}: {name}",
        hardware_id=hardware_id,
        message=message,
        values=[KeyValue(key=k, value=str(v)) for k, v in values.items()],
    )
    array = DiagnosticArray(status=[status])
    array.header.stamp = node.get_clock().now().to_msg()
    publisher.publish(array)
