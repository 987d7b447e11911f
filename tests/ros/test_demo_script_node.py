"""demo_script's start: the script clock starts at the supervisor's first ACTIVE, or after
start_timeout without one. Handlers are driven directly, with real messages, in one process."""

from __future__ import annotations

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from sensor_msgs.msg import JointState

from sim2real.core.robot_profile import load_profile
from sim2real.nodes.demo_script import DemoScriptNode

pytestmark = pytest.mark.ros


@pytest.fixture
def make_node(make_any):
    return lambda **parameters: make_any(DemoScriptNode, **parameters)


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
    states(node, 3.0)  # discovery and the policy's first answer took 3 s
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


def test_a_malformed_joint_state_is_ignored_not_fatal(make_node):
    """A message without the robot's joints (ValueError) or with fewer positions than names
    (IndexError) is ignored: raised in the callback, it would end the node."""
    node = make_node(duration=1.0)
    states(node, 0.1)
    q = node.q.copy()
    node._on_joint_states(JointState(name=["gripper"], position=[0.0]))
    node._on_joint_states(JointState(name=list(PANDA.joint_names), position=[0.0] * 3))
    assert (node.q == q).all()


def test_a_new_goal_goes_out_with_the_state_that_starts_its_segment(make_node):
    """Not at the 10 Hz timer's next tick: in lockstep that tick's phase against the script's
    start depends on when the supervisor engaged, so goals reached the policy 0-100 ms late by
    chance and the latency trial's score varied with it (docs/estimation_latency.md, latency figures)."""
    from sim2real.core import command_script

    node = make_node(duration=30.0)
    sent = []
    publish = node._goal_pub.publish
    node._goal_pub.publish = lambda goal: (sent.append(goal), publish(goal))  # sent, and kept to look at
    states(node, 0.01)
    status(node, "ACTIVE")
    states(node, 0.01, start=0.01)
    assert len(sent) == 1  # the first segment's goal, with the first state of the script
    second = command_script.segment_at(node.script, 0.0)[0] + 1
    start = next(t / 100 for t in range(1, 3000) if command_script.segment_at(node.script, t / 100)[0] == second)
    states(node, start - 0.02, start=0.02)
    assert len(sent) == 1  # nothing new while the segment lasts (the timer repeats it)
    states(node, 0.01, start=start)
    assert len(sent) == 2
    goal = sent[-1].pose.position
    assert (goal.x, goal.y, goal.z) == pytest.approx(command_script.segment_at(node.script, start)[1])


# -- pose_commander, driven the same way ----------------------------------------------------------
@pytest.fixture
def make_commander(make_any):
    from sim2real.nodes.pose_commander import PoseCommanderNode

    return lambda **parameters: make_any(PoseCommanderNode, **parameters)


def test_pose_commander_speaks_as_a_policy_and_refuses_what_would_break_it(make_commander):
    node = make_commander()
    assert node.pub.topic_name == "/policy/joint_commands"  # through the supervisor, even run on its own
    for name, value in (("amplitude", float("nan")), ("command_period", -0.02), ("frequency", 0.0)):
        with pytest.raises(ValueError, match=f"parameter {name}"):  # NaN targets; an endless loop
            make_commander(**{name: value})
    node._on_joint_states = node._on_state  # states() drives the handler by this name
    states(node, 0.5, start=100.0)
    node._on_state(JointState(name=list(PANDA.joint_names), position=[0.0] * 3))  # ignored, no raise
    assert node.start_ns == 100 * 10**9
    states(node, 0.1, start=0.0)  # the sim restarted: the script starts again on the new time line
    assert node.start_ns == 0 and node.next_command_ns <= round(0.1 * 1e9) + node.period_ns
