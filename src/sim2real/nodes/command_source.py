"""A driver takes /joint_commands from the safety supervisor's publisher alone.

Any process on the ROS domain can publish /joint_commands; a driver that obeyed every
writer could be driven to its joint limits by a second publisher while /safety/status says
ESTOP. Each message's publisher is known from DDS (``MessageInfo.publisher_gid``); the
driver accepts a publisher only if discovery says it belongs to the node named
``command_writer`` (``safety_supervisor`` in the driver's namespace). It pins the first such
publisher and moves to a new one only when the pinned one has left the graph (a supervisor
restarted), so a node that merely takes the supervisor's name while it runs is refused too.

This stops mistakes (a teleop tool on the wrong topic, a second graph in the domain); a
participant that forges discovery data is stopped only by SROS2 (docs/security.md).
"""

from __future__ import annotations

import time
from typing import Optional

from rclpy.node import Node

from sim2real.nodes.params import declare

REFRESH_S = 0.5  # a flood from an unknown writer costs at most one discovery query per this


def _qualified(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}"


class CommandSource:
    def __init__(self, node: Node, topic: str, writer: str):
        """``writer``: the node name commands must come from, relative to ``node``'s namespace
        or absolute; '' accepts every publisher (a driver behind its own arbitration)."""
        self.node, self.topic = node, topic
        self.writer = (
            "" if not writer else writer if writer.startswith("/") else _qualified(node.get_namespace(), writer)
        )
        self.pinned: Optional[bytes] = None
        self.refused = 0
        self.last_refused_from = ""
        self.unchecked = False  # no publisher gids from this rclpy: writers cannot be checked
        self._writers: dict[bytes, str] = {}  # publisher gid -> node, as of the last refresh
        self._refreshed = -REFRESH_S

    @classmethod
    def declared(cls, node: Node, topic: str) -> "CommandSource":
        """The check of a driver node, its writer taken from the node's ``command_writer`` parameter."""
        writer = declare(
            node,
            "command_writer",
            "safety_supervisor",
            "The only node whose /joint_commands move the robot (relative to this node's namespace, "
            "or absolute); other publishers are ignored and counted. '' = every publisher",
        )
        return cls(node, topic, writer)

    def _refresh(self) -> None:
        self._refreshed = time.monotonic()
        self._writers = {
            bytes(info.endpoint_gid): _qualified(info.node_namespace, info.node_name)
            for info in self.node.get_publishers_info_by_topic(self.topic)
        }

    def accepts(self, info: Optional[dict]) -> bool:
        """Whether the message with this MessageInfo may move the robot (counted when not)."""
        if not self.writer:
            return True
        gid = (info or {}).get("publisher_gid")
        if gid is None:
            # An rclpy without publisher gids in MessageInfo (before Jazzy): the writer cannot be
            # told, and refusing everything would leave the robot without commands. Said once.
            if not self.unchecked:
                self.unchecked = True
                self.node.get_logger().error(
                    "this rclpy gives no publisher gid: /joint_commands writers are NOT "
                    "checked; use SROS2 (docs/security.md) or ROS 2 Jazzy or later"
                )
            return True
        gid = bytes(gid["data"])
        if gid == self.pinned:
            return True
        # Unpinned (start-up, a restarted supervisor): ask discovery at once, since its data may
        # trail the first samples; pinned, at most every REFRESH_S against a flood.
        if self.pinned is None or time.monotonic() - self._refreshed >= REFRESH_S:
            self._refresh()
        if self._writers.get(gid) == self.writer and (self.pinned is None or self.pinned not in self._writers):
            self.pinned = gid
            return True
        self.refused += 1
        self.last_refused_from = self._writers.get(gid, "an unknown publisher")
        return False

    def refusal(self) -> str:
        return (
            f"ignoring /joint_commands from {self.last_refused_from}: only {self.writer} may command the robot "
            f"({self.refused} refused; parameter command_writer)"
        )
