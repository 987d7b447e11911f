"""Call a std_srvs/Trigger service once, from the command line, without a system ROS.

`sim2real safety engage` is ``ros2 service call /safety_supervisor/engage
std_srvs/srv/Trigger``, and `sim2real failures snapshot` is the collector's
``~/snapshot``: the operator's actions on a robot computer that has rclpy from PyPI
wheels and no ``ros2`` command line.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from typing import Iterator

import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_srvs.srv import Trigger

from sim2real.nodes.dds_transport import use_graph_transport


@contextlib.contextmanager
def command_line_node(prefix: str) -> Iterator[tuple[Node, SingleThreadedExecutor]]:
    """A short-lived node with its own context and executor, for one request from the command
    line (here and `sim2real policy swap`); everything is torn down on leaving."""
    context = Context()
    use_graph_transport()
    rclpy.init(context=context)
    node = executor = None
    try:
        node = rclpy.create_node(f"{prefix}_{uuid.uuid4().hex[:8]}", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        yield node, executor
    finally:
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


def call_trigger(service: str, timeout: float = 10.0) -> tuple[bool, str]:
    """(success, message) of one call to ``service``; (False, why) when nobody answers."""
    with command_line_node("trigger") as (node, executor):
        client = node.create_client(Trigger, service)
        deadline = time.monotonic() + timeout
        if not client.wait_for_service(timeout_sec=timeout):
            return False, f"no service {service} within {timeout:g} s: is the node running (and in this ROS_DOMAIN_ID)?"
        future = client.call_async(Trigger.Request())
        executor.spin_until_future_complete(future, timeout_sec=max(0.1, deadline - time.monotonic()))
        if not future.done() or future.result() is None:
            return False, f"{service} gave no answer within {timeout:g} s"
        return bool(future.result().success), future.result().message
