"""The composed control chain (``composed:=true``): the supervisor, estimator and runtime in one
process. It must command the robot exactly as the separate processes do, and its death, however
it dies, must end in the driver's damping within its command timeout."""

from __future__ import annotations

import math
import os
import signal
import time

import numpy as np
import pytest
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from nav_msgs.msg import Odometry
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import Imu, JointState

from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile
from sim2real.graph.plan import COMPOSABLE, COMPOSED_PROCESS
from sim2real.nodes import qos
from sim2real.nodes.control_chain import MEMBERS, PROCESS_NAME, chain_members
from tests.ros.conftest import RECORD, wait_for
from tests.ros.test_failure_collector import wait_bundle
from tests.ros.test_sim_robot import diagnostics_value

pytestmark = pytest.mark.ros

GO2 = load_profile("go2")
POLICY = str(share_dir() / "policies" / "go2_walk.onnx")
STARTUP_S = 30.0
LOCKSTEP_STEPS = 300  # 6 s of sim time: the stand-up, the engage, the blend and 2 s of walking
ANSWER_S = 5.0  # wall seconds to wait for the answer to one lockstep state
REANNOUNCE_S = 0.5  # as sim_robot does: a state no answer came to is published again
REACT_S = 1.0  # wall-clock bound on seeing a change from the test's side (a loaded 2-core machine)
SIM_DIAGNOSTICS_S = 1.0  # sim_robot's /diagnostics period


def test_members_are_named_on_the_command_line_and_created_supervisor_first():
    assert chain_members(["control_chain", "policy_runtime", "safety_supervisor", "--ros-args", "-p", "a:=1"]) == [
        "safety_supervisor",
        "policy_runtime",
    ]
    assert list(MEMBERS) == ["safety_supervisor", "state_estimator", "policy_runtime"] == list(COMPOSABLE)
    assert PROCESS_NAME == COMPOSED_PROCESS
    with pytest.raises(ValueError, match=r"unknown members \['sim_robot'\].*members: safety_supervisor"):
        chain_members(["control_chain", "sim_robot", "policy_runtime"])
    with pytest.raises(ValueError, match="no members"):
        chain_members(["control_chain", "--ros-args"])
    with pytest.raises(ValueError, match="named twice"):
        chain_members(["control_chain", "policy_runtime", "policy_runtime"])


def _stamp(step: int) -> Time:
    sec, nanosec = divmod(round(step * GO2.policy_period * 1e9), 10**9)
    return Time(sec=sec, nanosec=nanosec)


def _ns(stamp) -> int:
    return stamp.sec * 10**9 + stamp.nanosec


def _lockstep_run(probe, start_graph, composed: bool) -> dict[str, dict[int, tuple[float, ...]]]:
    """The probe plays a lockstep Go2 sim with a scripted state per policy period (the joints
    swaying about the stand pose, the trunk level and still) and waits for the supervisor's
    answer to each. Returns the runtime's and the supervisor's commands by stamp."""
    graph = start_graph(
        robot="go2", lockstep=True, policy=POLICY, autoengage=True, composed=composed, only=list(MEMBERS)
    )
    assert [p.name for p in graph.plan.processes()] == (["control_chain"] if composed else list(MEMBERS))
    policy = probe.record(JointState, "/policy/joint_commands", RECORD)
    commands = probe.record(JointState, "/joint_commands", RECORD)
    status = probe.record(DiagnosticArray, "/safety/status", RECORD)
    clock_pub = probe.node.create_publisher(Clock, "/clock", qos.CLOCK)
    state_pub = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    imu_pub = probe.node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
    imu = Imu()  # level and still; the same every step, so which one a tick takes cannot matter
    imu.orientation.w = 1.0
    imu.linear_acceleration.z = 9.81
    assert wait_for(
        lambda: (
            state_pub.get_subscription_count() >= 2
            and imu_pub.get_subscription_count() >= 2
            and probe.node.count_publishers("/joint_commands") >= 1
            and probe.node.count_publishers("/policy/joint_commands") >= 1
        ),
        STARTUP_S,
    ), graph.log.text()[-3000:]
    for _ in range(10):  # the runtime polls the IMU at its tick: one is there before the first state
        imu_pub.publish(imu)
        time.sleep(0.05)
    answered = set()
    for step in range(LOCKSTEP_STEPS):
        sway = 0.05 * np.sin(0.15 * step + np.arange(GO2.num_joints))
        state = JointState(
            name=GO2.joint_names,
            position=(GO2.default_positions + sway).tolist(),
            velocity=(0.05 * 0.15 / GO2.policy_period * np.cos(0.15 * step + np.arange(GO2.num_joints))).tolist(),
            effort=[0.0] * GO2.num_joints,
        )
        state.header.stamp = imu.header.stamp = _stamp(step)
        deadline = time.monotonic() + ANSWER_S
        stamp_ns = _ns(state.header.stamp)
        while stamp_ns not in answered:
            assert time.monotonic() < deadline and not graph.exited(), (
                f"no answer to the state of step {step}: {graph.log.text()[-3000:]}"
            )
            clock_pub.publish(Clock(clock=state.header.stamp))
            imu_pub.publish(imu)
            state_pub.publish(state)
            wait_for(
                lambda stamp_ns=stamp_ns: stamp_ns in {_ns(c.header.stamp) for c in commands[-3:]},
                REANNOUNCE_S,
                poll=0.001,
            )
            with probe.lock:
                answered = {_ns(c.header.stamp) for c in commands}
    time.sleep(0.5)  # the last answers of the runtime land
    graph.stop()  # before the next graph: one supervisor at a time on these topics
    with probe.lock:
        return {
            "policy": {_ns(m.header.stamp): tuple(m.position) for m in policy},
            "commands": {_ns(m.header.stamp): tuple(m.position) for m in commands},
            "modes": {_ns(m.header.stamp): m.status[0].message for m in status},
        }


def test_in_lockstep_the_composed_chain_commands_exactly_as_the_separate_processes(probe, start_graph):
    separate = _lockstep_run(probe, start_graph, composed=False)
    composed = _lockstep_run(probe, start_graph, composed=True)
    assert len(separate["commands"]) >= LOCKSTEP_STEPS and len(separate["policy"]) > 100
    # The supervisor stood the robot up, engaged and stayed ACTIVE: the policy's targets drove it.
    modes = [separate["modes"][stamp] for stamp in sorted(separate["modes"])]
    assert modes[0] == "STANDBY" and modes[-1] == "ACTIVE" and "DAMPING" not in modes
    assert composed["policy"] == separate["policy"]
    assert composed["commands"] == separate["commands"]
    assert composed["modes"] == separate["modes"]
    assert all(math.isfinite(x) for command in composed["commands"].values() for x in command)


@pytest.mark.timing_sensitive(reason="the real-time Go2 graph must reach ACTIVE and stay there before the kill")
def test_a_killed_composed_chain_leaves_the_robot_damped_by_its_driver(probe, start_graph, tmp_path):
    """In real time, the chain ACTIVE and walking on the shipped policy with its estimator, then
    SIGKILL: nothing commands the robot any more, and sim_robot damps within its command
    timeout, as a real driver does (the last line once the supervisor shares the chain's fate).
    Nothing trips either: the failure collector writes the bundle on the commands' silence."""
    failures = tmp_path / "failures"
    graph = start_graph(
        robot="go2", policy=POLICY, autoengage=True, composed=True, estimator="true", failures_dir=str(failures)
    )
    status = probe.record(DiagnosticArray, "/safety/status", 10)
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 50)
    estimates = probe.record(Odometry, "/state_estimate", qos.SENSOR_SUBSCRIBE)
    truth = probe.record(Odometry, "/sim/ground_truth", qos.SENSOR_SUBSCRIBE)

    def mode():
        with probe.lock:
            return status[-1].status[0].message if status else None

    assert wait_for(lambda: mode() == "ACTIVE", 60.0), graph.log.text()[-3000:]
    time.sleep(1.0)
    assert mode() == "ACTIVE" and len(estimates) > 50, graph.log.text()[-3000:]
    # sim_robot reports its mode once a second: the first report since the probe matched may be due.
    assert wait_for(lambda: diagnostics_value(diagnostics, "mode") == "COMMANDED", SIM_DIAGNOSTICS_S + REACT_S)
    standing = truth[-1].pose.pose.position.z
    chain = graph.plan.process_of("safety_supervisor")  # the supervisor's process is the chain's
    assert chain == "control_chain"
    killed_ns = time.time_ns()
    os.kill(graph.processes[chain].pid, signal.SIGKILL)
    # sim_robot says so as it damps (its /diagnostics follow within their 1 s period).
    assert wait_for(
        lambda: f"no valid /joint_commands for {GO2.command_timeout:.3f} s: damping" in graph.log.text(), 5.0
    ), graph.log.text()[-3000:]
    assert wait_for(lambda: diagnostics_value(diagnostics, "mode") == "DAMPING", SIM_DIAGNOSTICS_S + REACT_S)
    # Damped joints cannot carry the trunk: it sinks, as a robot's does when its controller dies.
    assert wait_for(lambda: truth[-1].pose.pose.position.z < standing - 0.05, 3.0)
    bundle = wait_bundle(failures, "stale_command", after_ns=killed_ns)
    assert any("/joint_commands silent" in t["reason"] for t in bundle.info["triggers"])
    assert graph.exited() == {"control_chain": -signal.SIGKILL}


@pytest.mark.timing_sensitive(reason="the real-time Go2 graph must reach ACTIVE and stay there")
def test_imu_bytes_that_are_no_imu_are_refused_and_the_chain_walks_on(probe, start_graph, tmp_path):
    """In real time the chain reads /imu/data from its bytes (nodes/imu_reading.py). Truncated
    messages among the sim's samples are refused and counted by the estimator; no node dies (the
    failure collector, which reads every fifth /imu/data for the tilt, included), and the
    supervisor stays ACTIVE on the sim's samples."""
    from rclpy.serialization import serialize_message

    graph = start_graph(
        robot="go2",
        policy=POLICY,
        autoengage=True,
        composed=True,
        estimator="true",
        failures_dir=str(tmp_path / "failures"),
    )
    status = probe.record(DiagnosticArray, "/safety/status", 10)
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 50)
    estimates = probe.record(Odometry, "/state_estimate", qos.SENSOR_SUBSCRIBE)
    garbage = probe.node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)

    def mode():
        with probe.lock:
            return status[-1].status[0].message if status else None

    def ignored():
        with probe.lock:
            for array in reversed(list(diagnostics)):
                for s in array.status:
                    if s.name.startswith("state_estimator"):
                        return next((int(kv.value) for kv in s.values if kv.key == "samples_ignored"), None)
        return None

    assert wait_for(lambda: mode() == "ACTIVE", 60.0), graph.log.text()[-3000:]
    assert wait_for(lambda: ignored() is not None, 3.0)  # the estimator's 1 Hz diagnostics
    before_garbage = ignored()
    truncated = serialize_message(Imu())[:40]
    for _ in range(100):
        garbage.publish(truncated)
        time.sleep(0.01)
    assert wait_for(lambda: ignored() > before_garbage, 3.0), (ignored(), graph.log.text()[-3000:])
    before = len(estimates)
    assert wait_for(lambda: len(estimates) > before + 50, 3.0)
    assert mode() == "ACTIVE" and not graph.exited(), graph.log.text()[-3000:]
    assert "no sensor_msgs/Imu" in graph.log.text()  # the refusal names what came
