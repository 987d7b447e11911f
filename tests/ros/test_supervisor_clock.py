"""The safety supervisor over real DDS with the system clock stepped under it, engaged (ACTIVE, the
checks at their own deadlines: 50 ms for the sensors, 100 ms for the policy): freshness is judged
on the steady clock, so a step forward is no silent sensor or policy, and a step back hides none.

The step moves ``steady_time.system_ns``, the system clock as the nodes read it, while DDS stamps
receipts on the old time line: every message then looks received 2 s before (or after) it is
read, the case of a message received just before a real step and read just after it. The driver
and the policy stamp their messages on the stepped clock, as programs on the same computer do."""

from __future__ import annotations

import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Imu, JointState

from sim2real.core import steady_time
from sim2real.core.robot_profile import load_profile
from sim2real.core.supervisor import Mode
from sim2real.nodes import qos, stamps
from sim2real.nodes.safety_supervisor import SafetySupervisorNode
from tests.ros.conftest import spin_until

pytestmark = pytest.mark.ros

NS = 10**9
STEP_S = 2.0  # 40 x the sensors' deadline, 20 x the policy's


class Robot:
    """A driver (the Go2's joint states and a level IMU at 500 Hz, reading /joint_commands) and a
    policy (the stand pose at 50 Hz), spun with the supervisor by one executor."""

    def __init__(self, context):
        profile = load_profile("go2")
        self.supervisor = SafetySupervisorNode(
            context=context,
            parameter_overrides=[Parameter("simulated", value=True), Parameter("engage_on_start", value=True)],
        )
        self.node = Node("stepped_clock_robot", context=context)
        states = self.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
        imu = self.node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
        policy = self.node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
        self.node.create_subscription(JointState, "/joint_commands", lambda msg: None, qos.COMMAND)
        state = JointState(
            name=list(profile.joint_names),
            position=profile.default_positions.tolist(),
            velocity=[0.0] * profile.num_joints,
            effort=[0.0] * profile.num_joints,
        )
        level = Imu()
        level.orientation.w = 1.0
        level.linear_acceleration.z = 9.81
        command = JointState(name=list(profile.joint_names), position=profile.default_positions.tolist())

        def sense():
            state.header.stamp = level.header.stamp = stamps.to_msg(steady_time.system_ns())
            states.publish(state)
            imu.publish(level)

        def act():
            command.header.stamp = state.header.stamp  # the newest state it answers
            policy.publish(command)

        self.driver = self.node.create_timer(0.002, sense)
        self.policy = self.node.create_timer(0.02, act)
        self.executor = SingleThreadedExecutor(context=context)
        self.executor.add_node(self.supervisor)
        self.executor.add_node(self.node)

    def spin_until(self, predicate, timeout: float) -> bool:
        return spin_until(self.executor, predicate, timeout)

    @property
    def mode(self) -> Mode:
        return self.supervisor.core.mode

    def close(self) -> None:
        self.executor.shutdown()
        self.supervisor.destroy_node()
        self.node.destroy_node()


@pytest.fixture
def engaged(context):
    robot = Robot(context)
    try:
        # Stand-up (2 s), then engaged once the policy has streamed 1 s.
        assert robot.spin_until(lambda: robot.mode == Mode.ACTIVE, 20.0), (robot.mode, robot.supervisor.core.last_trip)
        assert robot.spin_until(lambda: robot.mode != Mode.ACTIVE, 0.5) is False, robot.supervisor.core.last_trip
        yield robot
    finally:
        robot.close()


def _step_clock(monkeypatch, seconds: float) -> None:
    system_ns = steady_time.system_ns
    monkeypatch.setattr(steady_time, "system_ns", lambda: system_ns() + int(seconds * NS))


@pytest.mark.timing_sensitive(reason="a stall of the test's own process over the 50 ms deadline is a silence")
def test_a_system_clock_stepped_forward_is_no_silent_sensor_or_policy(engaged, monkeypatch):
    trips = engaged.supervisor.core.trips
    _step_clock(monkeypatch, STEP_S)
    # Every receipt from here on looks 2 s old: held to the previous poll (sensors) or the previous
    # command's take (the policy), each within a period.
    engaged.spin_until(lambda: engaged.mode != Mode.ACTIVE, 0.3)
    assert engaged.mode == Mode.ACTIVE and engaged.supervisor.core.trips == trips, engaged.supervisor.core.last_trip
    engaged.policy.cancel()  # the policy stops: that is a silence
    stopped = time.monotonic()
    assert engaged.spin_until(lambda: engaged.mode == Mode.DAMPING, 1.0), engaged.mode
    assert "policy_stale" in engaged.supervisor.core.last_trip, engaged.supervisor.core.last_trip
    assert time.monotonic() - stopped < 0.5


@pytest.mark.timing_sensitive(reason="a stall of the test's own process over the 50 ms deadline is a silence")
def test_a_system_clock_stepped_back_hides_no_silent_sensor(engaged, monkeypatch):
    trips = engaged.supervisor.core.trips
    _step_clock(monkeypatch, -STEP_S)
    # Every receipt from here on looks 2 s ahead of the clock: read as received now.
    engaged.spin_until(lambda: engaged.mode != Mode.ACTIVE, 0.3)
    assert engaged.mode == Mode.ACTIVE and engaged.supervisor.core.trips == trips, engaged.supervisor.core.last_trip
    engaged.driver.cancel()  # the driver stops
    stopped = time.monotonic()
    assert engaged.spin_until(lambda: engaged.mode == Mode.DAMPING, 1.0), engaged.mode
    assert "stale" in engaged.supervisor.core.last_trip, engaged.supervisor.core.last_trip
    assert time.monotonic() - stopped < 0.5
