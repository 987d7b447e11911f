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

Shared (``shared=True``): the control chain's nodes in one process (``composed:=true``) each poll
/joint_states and /imu/data; every DDS reader receives and queues the whole 500 Hz stream
(about 1 % of a core each on 2 cores) and each take converts the message to Python again. The
shared polled subscriptions of one process with the same topic, type and QoS kind read through
one reader: what it takes is converted once and kept for each of them until it takes it (each
still gets at most its own QoS depth, the newest). A shared reader with one member takes what
an unshared subscription would. The members get the same message objects: read them, never
change them.
"""

from __future__ import annotations

import collections
import threading
from typing import Any, Callable, Optional

from rclpy.node import Node
from rclpy.qos import QoSDurabilityPolicy, QoSHistoryPolicy, QoSProfile, QoSReliabilityPolicy

from sim2real.core import steady_time

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
    """The newest message of a topic, taken on demand. ``shared``: one DDS reader with the other
    shared polled subscriptions of this process on the same topic, type and QoS kind."""

    def __init__(
        self,
        companion: Node,
        owner: Node,
        msg_type,
        topic: str,
        qos: QoSProfile = NEWEST_ONLY,
        raw: bool = False,
        shared: bool = False,
    ):
        self.topic = owner.resolve_topic_name(topic)
        self._depth = max(1, qos.depth)
        self._reader = SharedReader.attach(self, companion, msg_type, self.topic, qos, raw) if shared else None
        self._sub = None if shared else companion.create_subscription(msg_type, self.topic, never_called, qos, raw=raw)

    def take_all(self) -> list[tuple[Any, int]]:
        """Every queued message, oldest first, each with its receive time (system clock, ns)."""
        if self._reader is not None:
            return self._reader.take(self, self._depth)
        return take_from(self._sub)

    def take_newest(self) -> Optional[tuple[Any, int]]:
        """The newest queued message and its receive time (ns), or None if nothing new arrived."""
        taken = self.take_all()
        return taken[-1] if taken else None

    def destroy(self) -> None:
        """Leave the shared reader (its subscription moves to another member's companion if it
        lived on this one's); an unshared one goes with its companion node."""
        if self._reader is not None:
            self._reader.detach(self)
            self._reader = None


def take_from(sub) -> list[tuple[Any, int]]:
    """Everything DDS queued for ``sub``, oldest first, each with its receive time (ns)."""
    taken = []
    now_ns = steady_time.system_ns()
    with sub.handle:  # what rclpy's executor does around take_message
        while True:
            got = sub.handle.take_message(sub.msg_type, sub.raw)
            if got is None:
                break
            msg, info = got
            received = info.get("received_timestamp") or now_ns
            taken.append((msg, min(received, now_ns)))
    return taken


class SharedReader:
    """One DDS reader for the shared polled subscriptions of a process on one topic: the messages
    it took, numbered, each kept until every member took it or the deepest member's depth passed.
    Its subscription lives on a member's companion node (no node of its own in the graph), the
    deepest QoS asked for."""

    _readers: dict[tuple, "SharedReader"] = {}
    _registry_lock = threading.Lock()  # attach and detach; each reader's takes hold its own lock

    def __init__(self, key: tuple, msg_type, topic: str, qos: QoSProfile, raw: bool):
        self.key, self.msg_type, self.topic, self.qos, self.raw = key, msg_type, topic, qos, raw
        self.members: dict[PolledSubscription, tuple[Node, int]] = {}  # member -> (companion, next number)
        self.kept: collections.deque = collections.deque()  # (number, msg, received_ns), oldest first
        self.next_number = 0
        self.host: Optional[Node] = None
        self.sub = None
        self._lock = threading.Lock()

    @classmethod
    def attach(cls, member, companion: Node, msg_type, topic: str, qos: QoSProfile, raw: bool) -> "SharedReader":
        if qos.history != QoSHistoryPolicy.KEEP_LAST:
            raise ValueError(f"a shared polled subscription keeps the last N messages; {topic} asks for {qos.history}")
        # The context itself in the key, not its id(): a context shut down and another made at its
        # address must not find the first one's reader.
        key = (companion.context, topic, msg_type, raw, qos.reliability, qos.durability)
        with cls._registry_lock:
            reader = cls._readers.get(key)
            if reader is None:
                reader = cls._readers[key] = SharedReader(key, msg_type, topic, qos, raw)
            with reader._lock:
                reader.members[member] = (companion, reader.next_number)
                if reader.sub is None:
                    reader.qos = qos
                    reader._subscribe_on(companion)
                elif qos.depth > reader.qos.depth:  # a deeper member: the reader again, that deep
                    reader.qos = qos
                    reader._subscribe_on(reader.host)
            return reader

    def detach(self, member) -> None:
        with self._registry_lock, self._lock:
            companion, _ = self.members.pop(member)
            if not self.members:
                self._unsubscribe()
                self._readers.pop(self.key, None)
            elif companion is self.host and all(c is not companion for c, _ in self.members.values()):
                self._subscribe_on(next(iter(self.members.values()))[0])  # its companion is going away

    def take(self, member, depth: int) -> list[tuple[Any, int]]:
        """What arrived since ``member``'s last take, at most ``depth`` of the newest, oldest first."""
        with self._lock:
            taken = take_from(self.sub)
            for msg, received in taken:
                self.kept.append((self.next_number, msg, received))
                self.next_number += 1
            companion, start = self.members[member]
            new = [(msg, received) for number, msg, received in self.kept if number >= start][-depth:]
            self.members[member] = (companion, self.next_number)
            first_wanted = min(n for _, n in self.members.values())
            while self.kept and (self.kept[0][0] < first_wanted or len(self.kept) > self.qos.depth):
                self.kept.popleft()
            return new

    def _subscribe_on(self, host: Node) -> None:
        self._unsubscribe()
        self.host = host
        self.sub = host.create_subscription(self.msg_type, self.topic, never_called, self.qos, raw=self.raw)

    def _unsubscribe(self) -> None:
        if self.sub is not None and self.host is not None:
            self.host.destroy_subscription(self.sub)
        self.sub = self.host = None


class Inputs:
    """A node's high-rate inputs, taken one of two ways.

    Lockstep (``polled`` false): a callback per message as it comes, because the sim's messages
    are what drives the node and each must be handled before the next step. Real time: polled
    subscriptions on a companion node, taken when the node acts: :meth:`take_newest_each` hands
    the newest message of each to its callback, with the time DDS received it (s); a node that
    wants every message takes them from the :class:`PolledSubscription` :meth:`subscribe`
    returns (None in lockstep). Polled inputs are shared (:class:`SharedReader`) with the other
    nodes of the process that poll the same topic.
    """

    def __init__(self, node: Node, polled: bool, suffix: str = "inputs"):
        self._node = node
        self.companion = companion_node(node, suffix) if polled else None
        self._polled: list[tuple[PolledSubscription, Callable[[Any, float], None]]] = []

    def subscribe(
        self,
        msg_type,
        topic: str,
        callback: Callable[..., Optional[bool]],
        qos: QoSProfile,
        polled_qos: QoSProfile = NEWEST_ONLY,
        raw: bool = False,
    ) -> Optional[PolledSubscription]:
        """``callback(msg)`` in lockstep; ``callback(msg, received_s)`` from :meth:`take_newest_each`.
        ``raw``: polled, the messages are their serialized bytes (lockstep callbacks still get
        messages)."""
        if self.companion is None:
            self._node.create_subscription(msg_type, topic, callback, qos)
            return None
        subscription = PolledSubscription(self.companion, self._node, msg_type, topic, polled_qos, raw, shared=True)
        self._polled.append((subscription, callback))
        return subscription

    def take_newest_each(self) -> None:
        """Real time: the newest message of each polled input (if a new one came) to its callback,
        in the order they were subscribed. A callback that returns False refused its message: the
        one before it, if the subscription's depth kept one, goes to it instead (a malformed
        newest message must not hide the good ones that came just before it). Nothing in
        lockstep."""
        for subscription, callback in self._polled:
            for msg, received_ns in reversed(subscription.take_all()):
                if callback(msg, received_ns * 1e-9) is not False:  # real time: the ROS clock is the system clock
                    break

    def destroy(self) -> None:
        for subscription, _ in self._polled:
            subscription.destroy()
        if self.companion is not None:
            self.companion.destroy_node()
