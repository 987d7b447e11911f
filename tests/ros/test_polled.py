"""Polled subscriptions over real DDS: shared ones of one process read a topic through one reader,
and each still gets every message since its own last take (at most its depth)."""

from __future__ import annotations

import time

import pytest
from rclpy.node import Node
from std_msgs.msg import Header

from sim2real.nodes import qos
from sim2real.nodes.polled import NEWEST_ONLY, PolledSubscription, SharedReader, companion_node
from tests.ros.conftest import wait_for

pytestmark = pytest.mark.ros
TOPIC = "/polled_test"


def _publish(publisher, first: int, count: int) -> None:
    for n in range(first, first + count):
        publisher.publish(Header(frame_id=str(n)))
        time.sleep(0.002)


def _numbers(taken) -> list[int]:
    return [int(msg.frame_id) for msg, _ in taken]


def test_shared_subscriptions_read_through_one_reader_and_each_gets_what_came_since_its_take(context):
    talker = Node("polled_talker", context=context)
    owner = Node("polled_owner", context=context)
    companions = [companion_node(owner, f"c{i}") for i in range(3)]
    publisher = talker.create_publisher(Header, TOPIC, qos.SENSOR_PUBLISH)
    every = PolledSubscription(companions[0], owner, Header, TOPIC, qos.SENSOR_SUBSCRIBE, shared=True)
    newest = PolledSubscription(companions[1], owner, Header, TOPIC, NEWEST_ONLY, shared=True)
    alone = PolledSubscription(companions[2], owner, Header, TOPIC, qos.SENSOR_SUBSCRIBE)
    try:
        assert every._reader is newest._reader and alone._reader is None
        # One DDS reader for the two shared ones (the deeper QoS), one for the unshared.
        assert wait_for(lambda: publisher.get_subscription_count() == 2, 5.0)
        assert every._reader.qos.depth == qos.SENSOR_SUBSCRIBE.depth
        _publish(publisher, 0, 10)
        seen = []  # unshared: a reader of its own; once it has them all, so has the shared one
        assert wait_for(lambda: seen.extend(_numbers(alone.take_all())) or seen == list(range(10)), 5.0), seen
        time.sleep(0.05)
        assert _numbers(every.take_all()) == list(range(10))
        assert _numbers(newest.take_all()) == [9]  # its depth: the newest alone
        assert every.take_all() == [] and newest.take_newest() is None
        _publish(publisher, 10, 5)
        seen = []
        assert wait_for(lambda: seen.extend(_numbers(alone.take_all())) or 14 in seen, 5.0), seen
        time.sleep(0.05)
        assert _numbers([newest.take_newest()]) == [14]
        assert _numbers(every.take_all()) == [10, 11, 12, 13, 14]  # the other's take lost it nothing
        # The reader's host leaves: the reader moves to the other member's companion and reads on.
        every.destroy()
        companions[0].destroy_node()
        reader = newest._reader
        assert reader.host is companions[1]
        assert wait_for(lambda: publisher.get_subscription_count() == 2, 5.0)  # the moved reader matched
        number = 15

        def newest_arrives() -> bool:  # published until the moved reader has one (it may match late)
            nonlocal number
            _publish(publisher, number, 1)
            number += 1
            got = newest.take_newest()
            return got is not None and int(got[0].frame_id) >= 15

        assert wait_for(newest_arrives, 5.0)
        newest.destroy()
        assert newest._reader is None and reader.key not in SharedReader._readers
    finally:
        for node in (*companions[1:], owner, talker):
            node.destroy_node()


def test_received_times_are_dds_receive_times_shared_by_every_member(context):
    talker = Node("polled_talker", context=context)
    owner = Node("polled_owner", context=context)
    companion = companion_node(owner, "c")
    publisher = talker.create_publisher(Header, TOPIC, qos.SENSOR_PUBLISH)
    first = PolledSubscription(companion, owner, Header, TOPIC, qos.SENSOR_SUBSCRIBE, shared=True)
    second = PolledSubscription(companion, owner, Header, TOPIC, qos.SENSOR_SUBSCRIBE, shared=True)
    try:
        assert wait_for(lambda: publisher.get_subscription_count() == 1, 5.0)
        sent = time.time_ns()
        _publish(publisher, 0, 3)
        time.sleep(0.5)  # taken late: the times are still when DDS received them
        taken_first = first.take_all()
        assert len(taken_first) == 3
        taken_second = second.take_all()
        assert [t for _, t in taken_first] == [t for _, t in taken_second]
        assert all(sent <= t < sent + 0.45e9 for _, t in taken_first)
        assert taken_first[0][0] is taken_second[0][0]  # converted once, the same message object
    finally:
        first.destroy()
        second.destroy()
        for node in (companion, owner, talker):
            node.destroy_node()
