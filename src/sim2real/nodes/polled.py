"""Subscriptions that are polled instead of spun: no executor wake-up, no Python callback per message.

At 500 Hz sensing, an rclpy callback per message is what costs a node its CPU: measured on
2 cores, a node receiving /joint_states and /imu/data (1000 messages/s) through callbacks
used 50-60 % of a core; the same node taking only the newest message of each every 20 ms
used 11 %. A node that acts once per command period (the supervisor; the runtime for its
non-triggering inputs) therefore polls: the subscriptions live on a companion node that no
executor spins, DDS keeps the newest messages, and the node takes them when it acts.

A message's time is when DDS received it (rmw ``received_timestamp``, system clock), so a
deadline check stays exact to the message however late the poll runs: a node starved of the
CPU for 100 ms does not mistake its own stall for a silent sensor.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

# Best effort matches every publisher and never slows one down; depth 1 because only the
# newest message matters to a poller (DDS drops the older ones without waking Python).
NEWEST_ONLY = QoSProfile(
    history=QoSHistoryPolicy.KEEP_LAST,
    depth=1,
    reliability=QoSReliabilityPolicy.BEST_EFFORT,
    durability=QoSDurabilityPolicy.VOLATILE,
)


def companion_node(node: Node, suffix: str) -> Node:
    """A node beside ``node`` for polled subscriptions. Its topic names are resolved by ``node``
    (use :meth:`Node.resolve_topic_name`), so command-line remaps apply as before."""
    return Node(
        f"{node.get_name()}_{suffix}",
        namespace=node.get_namespace(),
        context=node.context,
        use_global_arguments=False,
        start_parameter_services=False,
        enable_rosout=False,
    )


def never_called(msg: Any) -> None:
    raise AssertionError("polled subscriptions are taken by their owner, never spun")


class PolledSubscription:
    """The newest message of a topic, taken on demand."""

    def __init__(
        self, companion: Node, owner: Node, msg_type, topic: str, qos: QoSProfile = NEWEST_ONLY, raw: bool = False
    ):
        self.topic = owner.resolve_topic_name(topic)
        self._sub = companion.create_subscription(msg_type, self.topic, never_called, qos, raw=raw)

    def take_all(self) -> list[tuple[Any, int]]:
        """Every queued message, oldest first, each with its receive time (system clock, ns)."""
        sub = self._sub
        taken = []
        now_ns = time.time_ns()
        with sub.handle:  # what rclpy's executor does around take_message
            while True:
                got = sub.handle.take_message(sub.msg_type, sub.raw)
                if got is None:
                    break
                msg, info = got
                received = info.get("received_timestamp") or now_ns
                taken.append((msg, min(received, now_ns)))
        return taken

    def take_newest(self) -> Optional[tuple[Any, int]]:
        """The newest queued message and its receive time (ns), or None if nothing new arrived."""
        taken = self.take_all()
        return taken[-1] if taken else None


class Inputs:
    """A node's high-rate inputs, taken one of two ways.

    Lockstep (``polled`` false): a callback per message as it comes, because the sim's messages
    are what drives the node and each must be handled before the next step. Real time: polled
    subscriptions on a companion node, taken when the node acts: :meth:`take_newest_each` hands
    the newest message of each to its callback, with the time DDS received it (s); a node that
    wants every message takes them from the :class:`PolledSubscription` :meth:`subscribe`
    returns (None in lockstep).
    """

    def __init__(self, node: Node, polled: bool, suffix: str = "inputs"):
        self._node = node
        self.companion = companion_node(node, suffix) if polled else None
        self._polled: list[tuple[PolledSubscription, Callable[[Any, float], None]]] = []

    def subscribe(
        self, msg_type, topic: str, callback: Callable[..., None], qos: QoSProfile, polled_qos: QoSProfile = NEWEST_ONLY
    ) -> Optional[PolledSubscription]:
        """``callback(msg)`` in lockstep; ``callback(msg, received_s)`` from :meth:`take_newest_each`."""
        if self.companion is None:
            self._node.create_subscription(msg_type, topic, callback, qos)
            return None
        subscription = PolledSubscription(self.companion, self._node, msg_type, topic, polled_qos)
        self._polled.append((subscription, callback))
        return subscription

    def take_newest_each(self) -> None:
        """Real time: the newest message of each polled input (if a new one came) to its callback,
        in the order they were subscribed. Nothing in lockstep."""
        for subscription, callback in self._polled:
            newest = subscription.take_newest()
            if newest is not None:
                msg, received_ns = newest
                callback(msg, received_ns * 1e-9)  # real time: the ROS clock is the system clock

    def destroy(self) -> None:
        if self.companion is not None:
            self.companion.destroy_node()
