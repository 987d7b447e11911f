"""failure_collector over real DDS with the system clock stepped under it: silence is measured
on the steady clock, so a clock step (NTP at boot on a computer without a real-time clock, an
operator's ``date -s``) fires no stale trigger while the streams flow, and a stream that stops
still fires one after ``stale_s``.

The step is the system clock as the nodes read it (``steady_time.system_ns``) moved 2 s ahead
while DDS stamps receipts on the old time line: every message then looks received 2 s before the
drain, the case of a message received just before a real step and taken after it (on the wall
clock alone, a silence of 2 s)."""

from __future__ import annotations

import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from sim2real.core import steady_time
from sim2real.core.failure_config import load_failure_config
from sim2real.core.robot_profile import load_profile
from sim2real.nodes.failure_collector import FailureCollectorNode
from sim2real.nodes.qos import SENSOR_PUBLISH
from tests.ros.conftest import spin_until

pytestmark = pytest.mark.ros

NS = 10**9
STEP_S = 2.0  # the system clock's step forward, 4x the stale limit


@pytest.mark.timing_sensitive(reason="a stall of the test's own process over stale_s is a silence the collector sees")
def test_a_system_clock_stepped_forward_fires_no_stale_trigger_and_silence_still_does(context, tmp_path, monkeypatch):
    stale_s = load_failure_config("default").triggers.stale_s
    profile = load_profile("go2")
    collector = FailureCollectorNode(
        context=context, parameter_overrides=[Parameter("output_dir", value=str(tmp_path / "bundles"))]
    )
    fired: list[tuple[str, str, int]] = []
    fire = collector._fire

    def record(trigger, t_ns):
        fired.append((trigger.kind, trigger.reason, collector._drains_read.line.now_ns()))
        fire(trigger, t_ns)

    collector._fire = record
    driver = Node("stepped_clock_driver", context=context)
    publisher = driver.create_publisher(JointState, "/joint_states", SENSOR_PUBLISH)
    state = JointState(name=list(profile.joint_names), position=[0.0] * profile.num_joints)
    timer = driver.create_timer(0.005, lambda: publisher.publish(state))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(collector)
    executor.add_node(driver)
    try:
        assert spin_until(executor, lambda: "/joint_states" in collector._heard_steady, 15.0), "nothing heard"
        assert spin_until(executor, lambda: False, 0.3) is False and fired == []

        stepped = time.time_ns() + int(STEP_S * NS)
        monkeypatch.setattr(steady_time, "system_ns", lambda: time.time_ns() + int(STEP_S * NS))
        assert steady_time.system_ns() >= stepped
        spin_until(executor, lambda: bool(fired), 4 * stale_s)
        assert fired == [], f"the clock step fired {fired}"

        timer.cancel()
        stopped = collector._drains_read.line.now_ns()  # the collector's steady time line, ns
        assert spin_until(executor, lambda: bool(fired), 10 * stale_s), "a stopped stream fired nothing"
        kind, reason, at = fired[0]
        assert kind == "stale_sensor" and "/joint_states" in reason, fired
        # Silent for stale_s on the steady clock since it was last heard (held at the drain before
        # its last message: that receipt looks 2 s old), and heard until it stopped.
        heard_ns = collector._heard_steady["/joint_states"]
        assert at - heard_ns >= stale_s * NS, (at - heard_ns, reason)
        assert heard_ns <= stopped
    finally:
        collector.collector.stop()
        executor.shutdown()
        collector.destroy_node()
        driver.destroy_node()
