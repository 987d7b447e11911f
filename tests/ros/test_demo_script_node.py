"""demo_script's start: the script clock starts at the supervisor's first ACTIVE, or after
start_timeout without one. Handlers are driven directly, with real messages, in one process."""
from __future__ import annotations

import pytest
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.context import Context
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState

from sim2real.core.robot_profile import load_profile
from sim2real.nodes.demo_script import DemoScriptNode

pytestmark = pytest.mark.ros


@pytest.fixture
def make_node():
    context = Context()
    rclpy.init(context=context)
    nodes = []

    def make(**parameters):
        node = DemoScriptNode(context=context, parameter_overrides=[
            Parameter(name, value=value) for name, value in {"robot": "panda", **parameters}.items()])
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.destroy_node()
    rclpy.shutdown(context=context)


PANDA = load_profile("panda")


def states(node, seconds: float, start: float = 0.0, period: float = 0.01):
    names, pose = list(PANDA.joint_names), [float(v) for v in PANDA.default_positions]
    for i in range(round(seconds / period)):
        msg = JointState(name=names, position=pose)
        ns = round((start + i * period) * 1e9)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 10**9)
        node._on_joint_states(msg)


def status(node, mode: str):
    node._on_safety(DiagnosticArray(status=[DiagnosticStatus(name="safety_supervisor", message=mode)]))


def test_the_script_starts_at_the_first_active_not_at_the_first_state(make_node):
    node = make_node(duration=1.0)
    status(node, "STANDBY")
    states(node, 3.0)                      # discovery and the policy's first answer took 3 s
    assert node.start_ns is None and node.t == 0.0 and not node.recorder.t  # nothing scored yet
    status(node, "ACTIVE")
    states(node, 0.5, start=3.0)
    assert node.started_by == "active"
    assert node.t == pytest.approx(0.5, abs=0.011)
    states(node, 0.6, start=3.5)
    assert node.done
    report_start = (node.start_ns - node.first_state_ns) * 1e-9
    assert report_start == pytest.approx(3.0, abs=0.011)
    modes = {event["mode"]: event for event in node.events}
    assert set(modes) == {"STANDBY", "ACTIVE"}


def test_without_active_the_script_starts_after_the_timeout(make_node):
    node = make_node(duration=1.0, start_timeout=2.0)
    states(node, 1.9)
    assert node.start_ns is None
    states(node, 0.2, start=1.9)
    assert node.started_by == "timeout"
    assert (node.start_ns - node.first_state_ns) * 1e-9 == pytest.approx(2.0, abs=0.011)
