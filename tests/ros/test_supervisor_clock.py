"""The safety supervisor over real DDS with the system clock stepped under it: freshness is judged
on the steady clock, so a step forward is no silent sensor, and a step back hides no silent one.

The step is the node's reading of the system clock moved while DDS stamps receipts on the old
time line: every message then looks received 2 s before (or after) it is read, the case of a
message received just before a real step and read just after it."""

from __future__ import annotations

import time

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import Imu, JointState

from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.supervisor import Mode
from sim2real.nodes import qos, safety_supervisor
from sim2real.nodes.safety_supervisor import SafetySupervisorNode
from tests.ros.conftest import spin_until

pytestmark = pytest.mark.ros

NS = 10**9
STEP_S = 2.0  # 40 x the sensors' deadline


@pytest.fixture
def supervised(context):
    """(executor, supervisor, the driver's timer): a driver publishing the Go2's joint states and a
    level IMU at 500 Hz and reading /joint_commands, and the supervisor, spun by one executor."""
    profile = load_profile("go2")
    supervisor = SafetySupervisorNode(context=context, parameter_overrides=[Parameter("simulated", value=True)])
    driver = Node("stepped_clock_driver", context=context)
    states = driver.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    imu = driver.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
    driver.create_subscription(JointState, "/joint_commands", lambda msg: None, qos.COMMAND)
    state = JointState(
        name=list(profile.joint_names),
        position=profile.default_positions.tolist(),
        velocity=[0.0] * profile.num_joints,
        effort=[0.0] * profile.num_joints,
    )
    level = Imu()
    level.orientation.w = 1.0
    level.linear_acceleration.z = 9.81

    def publish():
        state.header.stamp = level.header.stamp = driver.get_clock().now().to_msg()
        states.publish(state)
        imu.publish(level)

    timer = driver.create_timer(0.002, publish)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(supervisor)
    executor.add_node(driver)
    try:
        assert spin_until(executor, lambda: supervisor.inputs.joint_states_time is not None, 15.0), "no states"
        assert spin_until(executor, lambda: False, 0.5) is False
        assert supervisor.core.mode == Mode.STANDBY and supervisor.core.trips == 0, supervisor.core.last_trip
        yield executor, supervisor, timer
    finally:
        executor.shutdown()
        supervisor.destroy_node()
        driver.destroy_node()


def _step_clock(monkeypatch, seconds: float) -> None:
    monkeypatch.setattr(safety_supervisor, "_wall_ns", lambda: time.time_ns() + int(seconds * NS))


@pytest.mark.timing_sensitive(reason="a stall of the test's own process over the 50 ms deadline is a silence")
def test_a_system_clock_stepped_forward_is_no_silent_sensor(supervised, monkeypatch):
    executor, supervisor, timer = supervised
    _step_clock(monkeypatch, STEP_S)
    spin_until(executor, lambda: supervisor.core.mode != Mode.STANDBY, 1.0)
    assert supervisor.core.mode == Mode.STANDBY and supervisor.core.trips == 0, supervisor.core.last_trip
    timer.cancel()  # the driver dies: that is a silence
    assert spin_until(executor, lambda: supervisor.core.mode == Mode.DAMPING, 1.0), supervisor.core.mode
    assert "stale" in supervisor.core.last_trip, supervisor.core.last_trip


@pytest.mark.timing_sensitive(reason="a stall of the test's own process over the 50 ms deadline is a silence")
def test_a_system_clock_stepped_back_hides_no_silent_sensor(supervised, monkeypatch):
    executor, supervisor, timer = supervised
    deadline = load_safety_config("go2").checks["joint_states_stale"]["deadline"]  # ACTIVE's; STANDBY's is longer
    _step_clock(monkeypatch, -STEP_S)
    spin_until(executor, lambda: supervisor.core.mode != Mode.STANDBY, 0.3)
    assert supervisor.core.mode == Mode.STANDBY, supervisor.core.last_trip
    timer.cancel()
    stopped = time.monotonic()
    assert spin_until(executor, lambda: supervisor.core.mode == Mode.DAMPING, STEP_S / 2), supervisor.core.mode
    assert "stale" in supervisor.core.last_trip, supervisor.core.last_trip
    # Within the STANDBY deadline and well within the step: on the system clock alone the last
    # states would have looked fresh for the 2 s of the step first.
    assert time.monotonic() - stopped < STEP_S / 2 < STEP_S + deadline
