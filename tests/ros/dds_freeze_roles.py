"""The three processes of tests/ros/test_dds_transport.py, one role each (argv[1]):

- ``writer TOPIC``: once a reader matched, prints "matched" and publishes on TOPIC as fast as it
  can (the peer the test freezes);
- ``reader TOPIC OTHER``: subscribes to both topics (the port both writers push into);
- ``count TOPIC SECONDS``: prints {"received": n}, the messages on TOPIC in SECONDS;
- ``timed OTHER WRITER_PID FREEZES STOP_AT_FIRST``: publishes on OTHER every millisecond while
  it freezes the writer FREEZES times (SIGSTOP for 30 ms, then SIGCONT), timing each publish;
  prints {"freezes": n, "worst_s": s, "stalls": k} (k publishes of 0.5 s or more) and stops at
  the first stall when STOP_AT_FIRST is 1.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

import rclpy
from sensor_msgs.msg import JointState

STALL_S = 0.5
FREEZE_S = 0.03


def _message() -> JointState:
    return JointState(name=[f"joint_{i}" for i in range(12)], position=[0.0] * 12)


def _wait_matched(publisher, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while publisher.get_subscription_count() < 1:
        if time.monotonic() > deadline:
            sys.exit(f"{publisher.topic_name}: no reader matched in {timeout:.0f} s")
        time.sleep(0.05)
    time.sleep(0.5)  # the match seen from the reader's side too


def main() -> None:
    role, *args = sys.argv[1:]
    rclpy.init()
    node = rclpy.create_node(f"dds_freeze_{role}")
    if role == "writer":
        publisher, message = node.create_publisher(JointState, args[0], 10), _message()
        _wait_matched(publisher)
        print("matched", flush=True)
        while True:
            publisher.publish(message)
    if role == "reader":
        for topic in args:
            node.create_subscription(JointState, topic, lambda _: None, 10)
        rclpy.spin(node)
    if role == "count":
        received = []
        node.create_subscription(JointState, args[0], received.append, 10)
        deadline = time.monotonic() + float(args[1])
        while time.monotonic() < deadline:
            rclpy.spin_once(node, timeout_sec=0.05)
        print(json.dumps({"received": len(received)}), flush=True)
        return
    topic, writer_pid, freezes, stop_at_first = args[0], int(args[1]), int(args[2]), args[3] == "1"
    publisher, message = node.create_publisher(JointState, topic, 10), _message()
    _wait_matched(publisher)
    worst, stalls, done = 0.0, 0, 0
    for done in range(1, freezes + 1):  # noqa: B007 (the count is reported)
        os.kill(writer_pid, signal.SIGSTOP)
        frozen_until = time.monotonic() + FREEZE_S
        while time.monotonic() < frozen_until:
            start = time.monotonic()
            publisher.publish(message)
            took = time.monotonic() - start
            worst, stalls = max(worst, took), stalls + (took >= STALL_S)
            time.sleep(0.001)
        os.kill(writer_pid, signal.SIGCONT)
        if stalls and stop_at_first:
            break
        time.sleep(random.uniform(0.005, 0.02))  # the writer runs again, pushing into the reader's port
    print(json.dumps({"freezes": done, "worst_s": worst, "stalls": stalls}))


if __name__ == "__main__":
    main()
