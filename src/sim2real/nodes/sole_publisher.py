"""Say so when a topic a node must publish alone has another publisher.

Two graphs in one ROS_DOMAIN_ID (a second `sim2real up`, nodes left running by a killed
launcher, a colleague's robot on the same network) share every topic: two drivers
interleave their /joint_states, two supervisors fight over /joint_commands, and nothing
fails loudly. The graph is polled every few seconds (DDS discovery, no message traffic)
and the other publishers are named.
"""

from __future__ import annotations

import os
import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.publisher import Publisher

CHECK_PERIOD_S = 2.0
WARN_THROTTLE_S = 10.0


def publisher_names(node: Node, topic: str) -> list[str]:
    """The fully qualified names of the nodes publishing ``topic`` (one entry per publisher)."""
    return sorted(
        f"{info.node_namespace.rstrip('/')}/{info.node_name}" for info in node.get_publishers_info_by_topic(topic)
    )


class SolePublisherCheck:
    """Warn while the topic of ``publisher`` (a publisher of ``node``) has other publishers."""

    def __init__(self, node: Node, publisher: Publisher, role: str, on_check=None):
        """``on_check(others)``: called after every poll with the other publishers' node names."""
        self.node, self.role, self.on_check = node, role, on_check
        self.topic = publisher.topic_name  # as remapped
        # Throttled per check, not by rclpy's throttle: that is per call site, so one node's
        # checks of two topics (sim_robot's /joint_states and /clock) would silence each other.
        self._last_warning = -WARN_THROTTLE_S
        node.create_timer(CHECK_PERIOD_S, self.check, clock=Clock(clock_type=ClockType.STEADY_TIME))

    def check(self) -> None:
        names = publisher_names(self.node, self.topic)
        if self.on_check is not None:
            mine = f"{self.node.get_namespace().rstrip('/')}/{self.node.get_name()}"
            others = list(names)
            if mine in others:
                others.remove(mine)  # this node's own publisher, once
            self.on_check(tuple(others))
        now = time.monotonic()
        if len(names) > 1 and now - self._last_warning >= WARN_THROTTLE_S:
            self._last_warning = now
            domain = os.environ.get("ROS_DOMAIN_ID", "0")
            self.node.get_logger().warning(
                f"{len(names)} publishers on {self.topic} ({', '.join(names)}): {self.role}. Another graph runs in "
                f"ROS_DOMAIN_ID={domain} (a second `sim2real up`, or nodes left by a killed one): stop it, or give "
                "each graph its own ROS_DOMAIN_ID"
            )
