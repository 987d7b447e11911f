"""Fault injection through a real graph: sim_robot and safety_supervisor in their own
processes, the test's probe node playing the policy (and the operator)."""

from __future__ import annotations

import json
import math
import os
import signal
import time

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.nodes import qos
from tests.ros.conftest import RECORD, wait_for
from tests.safety_configs import shipped_with

pytestmark = pytest.mark.ros

GO2 = load_profile("go2")
PANDA = load_profile("panda")
STARTUP_S = 25.0
PERIOD = 0.02


class Operator:
    """The probe as policy, operator and observer of /joint_commands and /safety/status."""

    def __init__(self, probe, profile):
        self.probe, self.profile = probe, profile
        self.commands = probe.record(JointState, "/joint_commands", qos.COMMAND)
        self.status = probe.record(DiagnosticArray, "/safety/status", 10)
        self.policy_pub = probe.node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
        self.teleop_pub = probe.node.create_publisher(JointState, "/teleop/joint_commands", qos.COMMAND)
        self.joy_pub = probe.node.create_publisher(Joy, "/joy", 10)
        self.action = profile.default_positions.copy()
        self.stamp_offset = 0.0
        self.streaming = True
        self.timer = probe.node.create_timer(PERIOD, self._publish_policy)
        self.clients = {
            a: probe.node.create_client(Trigger, f"/safety_supervisor/{a}")
            for a in ("engage", "takeover", "damp", "estop", "reset")
        }

    def start(self):
        """Wait for the graph, then engage. A loaded machine can starve the sim at start-up,
        which the supervisor rightly answers with DAMPING: reset and engage again then. The
        graph counts as started once it has stayed ACTIVE for SETTLE_S past the blend (a stall
        right after the engage, still start-up, is not what a test asks about)."""
        assert wait_for(lambda: self.mode() is not None, STARTUP_S), "no /safety/status from the supervisor"
        assert wait_for(lambda: len(self.commands) > 20, STARTUP_S)
        deadline = time.monotonic() + STARTUP_S  # the stand-up takes stand_duration before engage is accepted
        while time.monotonic() < deadline:
            if self.mode() in ("DAMPING", "ESTOP"):
                self.call("reset")
            response = self.call("engage")
            if response.success and self.wait_mode("ACTIVE", 2.0):
                time.sleep(load_safety_config(self.profile.name).blend_duration + SETTLE_S)  # past the blend
                if self.mode() == "ACTIVE":
                    return
            time.sleep(0.25)
        raise AssertionError(f"could not engage: {response.message}; last trip {self.status_value('last_trip')}")

    def _publish_policy(self):
        if not self.streaming:
            return
        msg = JointState(name=self.profile.joint_names, position=[float(x) for x in self.action])
        now = self.probe.node.get_clock().now().nanoseconds - int(self.stamp_offset * 1e9)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 10**9)
        self.policy_pub.publish(msg)

    def mode(self):
        for array in reversed(self.status):
            for s in array.status:
                return s.message
        return None

    def status_value(self, key):
        for array in reversed(self.status):
            for s in array.status:
                for kv in s.values:
                    if kv.key == key:
                        return kv.value
        return None

    def call(self, action) -> Trigger.Response:
        client = self.clients[action]
        assert client.wait_for_service(timeout_sec=10.0), f"no service ~/{action}"
        future = client.call_async(Trigger.Request())
        assert wait_for(future.done, 5.0)
        return future.result()

    def wait_mode(self, mode, timeout):
        return wait_for(lambda: self.mode() == mode, timeout)

    def time_to_mode(self, mode, timeout=5.0) -> float:
        start = time.monotonic()
        assert self.wait_mode(mode, timeout), (
            f"mode stayed {self.mode()} (wanted {mode}); last trip: {self.status_value('last_trip')}"
        )
        return time.monotonic() - start

    def commands_keep_coming(self, seconds=0.5) -> np.ndarray:
        """Commands still arrive every period and are finite; returns the newest positions."""
        before = len(self.commands)
        time.sleep(seconds)
        fresh = self.commands[before:]
        assert len(fresh) >= 0.6 * seconds / PERIOD, f"only {len(fresh)} /joint_commands in {seconds} s"
        assert all(np.all(np.isfinite(m.position)) for m in fresh)
        return np.asarray(fresh[-1].position)


@pytest.fixture
def active_go2(probe, start_graph):
    graph = start_graph(robot="go2", only=["sim_robot", "safety_supervisor"])
    operator = Operator(probe, GO2)
    operator.start()
    operator.graph = graph
    return operator


@pytest.fixture
def active_go2_sensor_gaps_tolerated(probe, start_graph, tmp_path):
    """As active_go2, with the sensor deadlines at 0.25 s: a real-time sim on a loaded 2-core
    machine leaves 50-60 ms gaps in /joint_states now and then, and a test of something else
    must not end in DAMPING for them (the staleness tests use the shipped deadlines)."""
    relaxed = {"deadline": 0.25}
    config = shipped_with("go2", tmp_path, joint_states_stale=relaxed, imu_stale=relaxed)
    graph = start_graph(robot="go2", only=["sim_robot", "safety_supervisor"], safety_config=str(config))
    operator = Operator(probe, GO2)
    operator.start()
    operator.graph = graph
    return operator


SETTLE_S = 0.5  # s ACTIVE after the blend before a test begins (start-up stalls trip before that)

# Wall-clock bound on seeing a mode change from the test's side (DDS, the probe's executor,
# a loaded 2-core machine). The 2-command-period requirement itself is checked on the
# supervisor's own account of the trip: see trip_age().
REACT_S = 1.0


def trip_age(last_trip: str) -> float:
    """The input's age when the supervisor tripped, from '... no /topic for 0.064 s (deadline ...)'."""
    return float(last_trip.split(" for ", 1)[1].split(" s", 1)[0])


def test_policy_runtime_crash_stops_within_two_periods_of_the_deadline(active_go2):
    """The Go2's config answers a silent policy with the category-1 stop: the supervisor keeps
    commanding, from the stand pose down to damp_pose."""
    config = load_safety_config("go2")
    deadline = config.checks["policy_stale"]["deadline"]
    active_go2.streaming = False  # the policy process dies
    assert active_go2.time_to_mode("DAMPING") < deadline + REACT_S
    assert "policy_stale" in active_go2.status_value("last_trip")
    assert trip_age(active_go2.status_value("last_trip")) <= deadline + 2 * PERIOD
    tripped_at = len(active_go2.commands)
    active_go2.commands_keep_coming(0.2 + config.damp_duration + 0.3)  # to the stand pose, then down
    lying = np.array([config.damp_pose[name] for name in GO2.joint_names])
    descent = np.array([c.position for c in active_go2.commands[tripped_at:]])
    assert np.abs(descent - lying).max(axis=1).min() < 0.01, "the stop never reached damp_pose"


@pytest.mark.timing_sensitive(reason="wall-clock delay from a policy command to the supervisor's on a shared machine")
def test_a_policy_command_goes_to_the_robot_when_it_arrives_not_at_the_next_timer_tick(
    active_go2_sensor_gaps_tolerated, probe
):
    """In real time the first policy command of each period ticks the supervisor as it arrives:
    the command to the robot follows within a few ms. A timer tick would pass it on anywhere
    from 0 to a whole period later (median half a period)."""
    policy_seen, commands_seen = [], []
    for topic, seen in (("/policy/joint_commands", policy_seen), ("/joint_commands", commands_seen)):
        probe.record(JointState, topic, qos.COMMAND, callback=lambda _, seen=seen: seen.append(time.monotonic()))
    time.sleep(3.0)
    with probe.lock:
        policy, commands = np.array(policy_seen[5:-5]), np.array(commands_seen)
    following = np.searchsorted(commands, policy)
    delays = commands[following[following < len(commands)]] - policy[following < len(commands)]
    assert len(delays) > 50 and active_go2_sensor_gaps_tolerated.mode() == "ACTIVE"
    assert np.median(delays) < 0.3 * PERIOD, f"median {np.median(delays) * 1e3:.1f} ms from policy to robot"


def first_stamp_in(operator, mode: str, since: int) -> int | None:
    """The stamp (ns) of the first /safety/status in ``mode`` stamped at or after ``since``."""
    with operator.probe.lock:
        arrays = list(operator.status)
    for array in arrays:
        stamp = array.header.stamp.sec * 10**9 + array.header.stamp.nanosec
        if stamp >= since and array.status[0].message == mode:
            return stamp
    return None


@pytest.mark.timing_sensitive(reason="wall-clock delay from a request to the supervisor's tick on a shared machine")
def test_a_stop_from_the_joystick_or_the_service_goes_out_at_once_not_at_the_next_tick(active_go2):
    """A damp button press and an ~/estop call each tick the supervisor as they arrive. At the
    next tick (timer or policy) they would go out anywhere from 0 to a period later. Timed on the
    supervisor's own account (its status stamp, the tick's time) from the request's sending, so
    the probe's own receiving does not count; twice each (the first damp from ACTIVE, the rest
    from STANDBY after a reset)."""
    damp_button = load_safety_config("go2").buttons["damp"]
    delays = []
    for _ in range(2):
        for stop, mode in (("damp button", "DAMPING"), ("~/estop", "ESTOP")):
            buttons = [0] * 8
            sent = time.time_ns()
            if stop == "damp button":
                buttons[damp_button] = 1
                press = Joy(buttons=buttons)
                press.header.stamp.sec, press.header.stamp.nanosec = divmod(sent, 10**9)
                active_go2.joy_pub.publish(press)
            else:
                future = active_go2.clients["estop"].call_async(Trigger.Request())
            assert wait_for(lambda mode=mode, sent=sent: first_stamp_in(active_go2, mode, sent), 2.0), (
                f"no {mode} after the {stop}; mode {active_go2.mode()}"
            )
            delays.append((stop, (first_stamp_in(active_go2, mode, sent) - sent) * 1e-9))
            if stop == "damp button":
                active_go2.joy_pub.publish(Joy(buttons=[0] * 8))  # released
            else:
                assert wait_for(future.done, 2.0) and future.result().success
            # Back to STANDBY once the category-1 stop has laid the robot down.
            assert wait_for(lambda: active_go2.call("reset").success, 6.0), active_go2.status_value("last_trip")
    # The median: a request once delayed by the machine's own stalls is not the supervisor's doing.
    assert np.median([d for _, d in delays]) < 0.25 * PERIOD, [f"{stop}: {d * 1e3:.1f} ms" for stop, d in delays]


def test_nan_action_holds_and_commands_stay_finite(active_go2):
    active_go2.action = GO2.default_positions.copy()
    active_go2.action[4] = math.nan
    assert active_go2.time_to_mode("TAKEOVER") < REACT_S
    assert "non_finite_command" in active_go2.status_value("last_trip")
    active_go2.commands_keep_coming()


def test_stale_joint_states_damp(active_go2):
    sim = active_go2.graph.processes["sim_robot"]
    os.kill(sim.pid, signal.SIGSTOP)  # the robot's driver freezes: no more /joint_states
    try:
        deadline = load_safety_config("go2").checks["joint_states_stale"]["deadline"]
        assert active_go2.time_to_mode("DAMPING") < deadline + REACT_S
        damped = active_go2.commands_keep_coming()
        assert "joint_states_stale" in active_go2.status_value("last_trip")
        assert trip_age(active_go2.status_value("last_trip")) <= deadline + 2 * PERIOD
        assert np.all(np.isfinite(damped))
        assert all(v == 0.0 for v in active_go2.commands[-1].velocity)
    finally:
        os.kill(sim.pid, signal.SIGCONT)


def test_limit_violation_is_clamped(probe, start_graph):
    start_graph(robot="panda", only=["sim_robot", "safety_supervisor"])
    operator = Operator(probe, PANDA)
    operator.start()
    joint = PANDA.joint_names.index("panda_joint4")
    lower = PANDA.lower_limits[joint]
    # The policy drifts slowly (0.5 rad/s) past the joint's lower limit.
    ramp = probe.node.create_timer(
        PERIOD, lambda: operator.action.__setitem__(joint, max(lower - 0.3, operator.action[joint] - 0.01))
    )
    assert wait_for(lambda: operator.action[joint] <= lower - 0.3, 10.0)
    time.sleep(0.5)
    ramp.cancel()
    assert operator.mode() == "ACTIVE", operator.status_value("last_trip")
    latest = np.asarray(operator.commands[-1].position)
    assert latest[joint] == pytest.approx(lower + 0.05)
    assert operator.status_value("check/position_limit").startswith("FAIL (clamp)")


def test_tick_overrun_holds(active_go2):
    active_go2.stamp_offset = 0.3  # the policy computes on 300 ms old data
    assert active_go2.time_to_mode("TAKEOVER") < REACT_S
    assert "tick_overrun" in active_go2.status_value("last_trip")


def test_tilt_damps(active_go2):
    # All hips swing right, left legs stretch, right legs fold: the robot rolls over.
    roll = GO2.default_positions.copy()
    for leg, thigh, calf in (("FL", 0.3, -0.89), ("RL", 0.3, -0.89), ("FR", 1.5, -2.66), ("RR", 1.5, -2.66)):
        i = GO2.joint_names.index(f"{leg}_hip_joint")
        roll[i : i + 3] = (-0.99, thigh, calf)
    active_go2.action = roll
    assert active_go2.wait_mode("DAMPING", 8.0), f"last trip: {active_go2.status_value('last_trip')}"
    assert "base_tilt" in active_go2.status_value("last_trip")
    active_go2.commands_keep_coming()


def test_joystick_takeover_and_return_to_active(active_go2):
    buttons = load_safety_config("go2").buttons
    pad = [0] * 12

    def joy():
        active_go2.joy_pub.publish(Joy(buttons=list(pad), axes=[0.0] * 8))

    joy()
    time.sleep(0.2)
    pad[buttons["takeover"]] = 1
    joy()
    assert active_go2.time_to_mode("TAKEOVER") < REACT_S
    teleop = GO2.default_positions + 0.1
    teleop_timer = active_go2.probe.node.create_timer(
        PERIOD, lambda: active_go2.teleop_pub.publish(JointState(name=GO2.joint_names, position=teleop.tolist()))
    )
    assert wait_for(lambda: np.allclose(active_go2.commands[-1].position, teleop, atol=1e-6), 2.0)
    teleop_timer.cancel()
    pad[buttons["takeover"]] = 0
    joy()
    time.sleep(0.1)
    pad[buttons["engage"]] = 1
    joy()
    before = len(active_go2.commands)
    assert active_go2.time_to_mode("ACTIVE") < REACT_S
    time.sleep(1.0)
    positions = np.asarray([m.position for m in active_go2.commands[before:]])
    assert np.max(np.abs(np.diff(positions, axis=0))) < 0.05, "the return to ACTIVE must be smooth"
    np.testing.assert_allclose(positions[-1], GO2.default_positions, atol=1e-6)


def test_an_operator_button_after_a_trip_is_obeyed(active_go2):
    """A trip's event and an operator's are logged one after the other: the supervisor once
    died here (rclpy refused one logging call site used at two severities)."""
    active_go2.action = active_go2.action.copy()
    active_go2.action[0] = math.nan
    assert active_go2.time_to_mode("TAKEOVER") < REACT_S  # the trip, logged as an error
    active_go2.action = GO2.default_positions.copy()
    pad = [0] * 12
    pad[load_safety_config("go2").buttons["damp"]] = 1
    active_go2.joy_pub.publish(Joy(buttons=pad, axes=[0.0] * 8))  # the operator, logged as info
    assert active_go2.time_to_mode("DAMPING") < REACT_S
    active_go2.commands_keep_coming()
    assert "safety_supervisor" not in active_go2.graph.exited()


def test_estop_stays_latched_until_reset(active_go2):
    assert active_go2.call("estop").success
    assert active_go2.wait_mode("ESTOP", 1.0)
    refused = active_go2.call("engage")
    assert not refused.success and "reset" in refused.message
    time.sleep(1.0)
    assert active_go2.mode() == "ESTOP"
    # The Go2's category-1 stop lowers it for 2.2 s; a reset waits for it to end.
    assert wait_for(lambda: active_go2.call("reset").success, 10.0)
    assert active_go2.wait_mode("STANDBY", 1.0)
    refused = active_go2.call("engage")  # the reset never restarts motion: the robot stands up first
    assert not refused.success, refused.message
    assert wait_for(lambda: active_go2.call("engage").success, STARTUP_S)
    assert active_go2.wait_mode("ACTIVE", 1.0)


def test_lost_deadman_holds(probe, start_graph, tmp_path):
    config = yaml.safe_load((load_safety_config("panda").source).read_text())
    config["checks"]["deadman"]["hardware_only"] = False  # a deadman on the simulated robot too
    path = tmp_path / "panda_deadman.yaml"
    path.write_text(yaml.safe_dump(config))
    start_graph(robot="panda", safety_config=str(path), only=["sim_robot", "safety_supervisor"])
    operator = Operator(probe, PANDA)
    deadman = load_safety_config("panda").buttons["deadman"]
    pad = [0] * 12
    pad[deadman] = 1
    joy_timer = probe.node.create_timer(0.05, lambda: operator.joy_pub.publish(Joy(buttons=list(pad))))
    operator.start()
    pad[deadman] = 0  # the operator lets go
    assert operator.time_to_mode("TAKEOVER") < load_safety_config("panda").checks["deadman"]["deadline"] + REACT_S
    assert "deadman" in operator.status_value("last_trip")
    joy_timer.cancel()


def test_in_lockstep_a_re_announced_state_is_answered_again(probe, start_graph):
    """The probe plays sim_robot in lockstep. Its first state can reach the supervisor before
    the supervisor's /joint_commands publisher has matched the sim's subscription: that answer is
    lost, and the sim re-announces the state. The supervisor must answer the same state again
    (seen in CI: the panda lockstep demo waited at sim time 0 until its 120 s deadline)."""
    from rosgraph_msgs.msg import Clock

    start_graph(robot="panda", lockstep=True, only=["safety_supervisor"])
    commands = probe.record(JointState, "/joint_commands", RECORD)
    clock_pub = probe.node.create_publisher(Clock, "/clock", qos.CLOCK)
    state_pub = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    state = JointState(
        name=PANDA.joint_names,
        position=PANDA.default_positions.tolist(),
        velocity=[0.0] * PANDA.num_joints,
        effort=[0.0] * PANDA.num_joints,
    )

    def announce():  # as sim_robot does at sim time 0 while nothing answers (every 0.5 s)
        clock_pub.publish(Clock())
        state_pub.publish(state)

    assert wait_for(lambda: announce() or bool(commands), STARTUP_S, poll=0.5), "no answer to the first state"

    def settled() -> bool:  # answers to announcements still in flight have landed
        count = len(commands)
        time.sleep(0.5)
        return len(commands) == count

    assert wait_for(settled, 10.0, poll=0.0)
    # Each re-announcement is answered once: one answer each, and no second one.
    for _ in range(3):
        answered = len(commands)
        announce()
        assert wait_for(lambda answered=answered: len(commands) > answered, 5.0), (
            "a re-announced state was not answered"
        )
        assert wait_for(settled, 10.0, poll=0.0)
        assert len(commands) == answered + 1, f"{len(commands) - answered} answers to one re-announcement"
    assert all(m.header.stamp.sec == 0 and m.header.stamp.nanosec == 0 for m in commands)
    assert all(np.all(np.isfinite(m.position)) for m in commands)

    # The next period's state gets its own answer; then the sim restarts (time jumps back to 0):
    # that state gets a fresh tick on the new time line, never the cached answer of the old one.
    def stamped(ns):
        state.header.stamp.sec, state.header.stamp.nanosec = divmod(ns, 10**9)
        clock_pub.publish(Clock(clock=state.header.stamp))
        state_pub.publish(state)

    period_ns = round(PANDA.policy_period * 1e9)
    before = len(commands)
    stamped(period_ns)
    assert wait_for(lambda: len(commands) > before, 5.0), "no answer to the next period's state"
    assert commands[-1].header.stamp.nanosec == period_ns
    before = len(commands)
    stamped(0)
    assert wait_for(lambda: len(commands) > before, 5.0), "no answer after the sim restarted"
    assert (commands[-1].header.stamp.sec, commands[-1].header.stamp.nanosec) == (0, 0)


def test_in_lockstep_a_policy_command_before_the_first_state_does_not_use_up_its_tick(probe, start_graph):
    """The policy answers the sim's first state; its command can reach the supervisor before
    that state does. The supervisor must still answer the state (seen in CI: the panda lockstep
    demo's sim waited at sim time 0 for 120 s)."""
    from rosgraph_msgs.msg import Clock

    start_graph(robot="panda", lockstep=True, only=["safety_supervisor"])
    commands = probe.record(JointState, "/joint_commands", qos.COMMAND)
    policy_pub = probe.node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
    clock_pub = probe.node.create_publisher(Clock, "/clock", qos.CLOCK)
    state_pub = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    policy = JointState(name=PANDA.joint_names, position=PANDA.default_positions.tolist())  # stamped 0
    # The supervisor is up once it listens to the policy (in lockstep it reports only when it
    # ticks); then the policy speaks first, until it is surely heard.
    assert wait_for(
        lambda: (
            probe.node.count_subscribers("/policy/joint_commands") >= 1
            and probe.node.count_publishers("/joint_commands") >= 1
        ),
        STARTUP_S,
    ), "no supervisor"
    for _ in range(10):
        policy_pub.publish(policy)
        time.sleep(0.1)
    assert not commands
    state = JointState(
        name=PANDA.joint_names,
        position=PANDA.default_positions.tolist(),
        velocity=[0.0] * PANDA.num_joints,
        effort=[0.0] * PANDA.num_joints,
    )
    assert wait_for(lambda: state_pub.get_subscription_count() >= 1, STARTUP_S)  # published once: heard
    clock_pub.publish(Clock())
    state_pub.publish(state)
    assert wait_for(lambda: bool(commands), 5.0), "the first state was never answered"
    assert (commands[0].header.stamp.sec, commands[0].header.stamp.nanosec) == (0, 0)


def test_joint_states_are_matched_by_name_every_message_and_malformed_ones_ignored(probe, start_graph):
    """The probe plays the driver. In DAMPING the supervisor sends the measured positions, so its
    commands show how it read /joint_states: a message in another name order is matched by name
    (a cached index would read it in the first message's order), and one with arrays shorter than
    its names is ignored (an IndexError in the tick would end the node: no more commands)."""
    graph = start_graph(robot="panda", only=["safety_supervisor"])
    operator = Operator(probe, PANDA)
    operator.streaming = False
    states = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    names = list(PANDA.joint_names)
    q = PANDA.default_positions + 0.01 * np.arange(1, PANDA.num_joints + 1)

    def stream(seconds, names, position, effort=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            msg = JointState(
                name=names,
                position=[float(x) for x in position],
                effort=[0.0] * len(names) if effort is None else effort,
            )
            msg.header.stamp = probe.node.get_clock().now().to_msg()
            states.publish(msg)
            time.sleep(0.005)

    assert wait_for(lambda: stream(0.1, names, q) or len(operator.commands) > 5, STARTUP_S, poll=0.0)
    assert operator.call("damp").success
    before = len(operator.commands)
    stream(0.5, names[::-1], q[::-1])
    assert len(operator.commands) > before  # answered on the reversed ones, not left from before
    np.testing.assert_allclose(operator.commands[-1].position, q, atol=1e-12)
    before = len(operator.commands)
    stream(0.5, names, q + 0.1, effort=[0.0] * 3)
    assert len(operator.commands) > before and not graph.exited(), graph.log.text()[-2000:]
    np.testing.assert_allclose(operator.commands[-1].position, q, atol=1e-12)  # the short ones were ignored
    # Through the supervisor's stdout and the test's reader of it: a moment after the stream.
    assert wait_for(
        lambda: "ignoring /joint_states with 7 names, 7 positions, 0 velocities and 3 efforts" in graph.log.text(), 10.0
    ), graph.log.text()[-2000:]


def test_a_teleop_session_naming_some_joints_keeps_the_others_where_the_robot_holds(probe, start_graph):
    """Joints a teleop command does not name keep their targets: at a new session's start those
    are the held pose, not the previous session's targets (they would jump back to them)."""
    start_graph(robot="panda", only=["sim_robot", "safety_supervisor"])
    operator = Operator(probe, PANDA)
    operator.start()
    assert operator.call("takeover").success

    def teleop_until(done, names, position, timeout=10.0):
        """Stream teleop until the supervisor's commands show ``done`` (a loaded machine may
        take longer than a fixed time)."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            operator.teleop_pub.publish(JointState(name=names, position=[float(x) for x in position]))
            time.sleep(PERIOD)
            if operator.commands and done(np.asarray(operator.commands[-1].position)):
                return

    away = PANDA.default_positions + 0.3
    teleop_until(lambda q: np.allclose(q, away, atol=1e-6), PANDA.joint_names, away)
    np.testing.assert_allclose(operator.commands[-1].position, away, atol=1e-6)
    # Teleop ended: the hold goes to the stand pose.
    wait_for(
        lambda: np.allclose(operator.commands[-1].position, PANDA.default_positions, atol=1e-6),
        load_safety_config("panda").stand_duration + 5.0,
    )
    held = np.asarray(operator.commands[-1].position)
    np.testing.assert_allclose(held, PANDA.default_positions, atol=1e-6)
    teleop_until(lambda q: q[0] == pytest.approx(held[0] + 0.1), PANDA.joint_names[:1], [held[0] + 0.1])
    latest = np.asarray(operator.commands[-1].position)
    assert latest[0] == pytest.approx(held[0] + 0.1)
    np.testing.assert_allclose(latest[1:], held[1:], atol=1e-6)


def test_in_lockstep_after_a_sim_restart_the_tick_waits_for_the_policys_new_answer(probe, start_graph):
    """The probe plays sim and policy. After the sim restarts (its time back to 0), the policy's
    command from the old time line (stamped later than any new state) must not count as the
    answer to the new states: the supervisor waits for the policy's answer to each of them."""
    from rosgraph_msgs.msg import Clock

    start_graph(robot="panda", lockstep=True, only=["safety_supervisor"])
    commands = probe.record(JointState, "/joint_commands", qos.COMMAND)
    policy_pub = probe.node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
    clock_pub = probe.node.create_publisher(Clock, "/clock", qos.CLOCK)
    state_pub = probe.node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    assert wait_for(
        lambda: (
            probe.node.count_subscribers("/policy/joint_commands") >= 1
            and probe.node.count_publishers("/joint_commands") >= 1
        ),
        STARTUP_S,
    ), "no supervisor"
    period_ns = round(PANDA.policy_period * 1e9)

    def stamped(msg, ns):
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(ns, 10**9)
        return msg

    def policy(ns):
        policy_pub.publish(stamped(JointState(name=PANDA.joint_names, position=PANDA.default_positions.tolist()), ns))

    def state(ns):
        clock_pub.publish(Clock(clock=stamped(JointState(), ns).header.stamp))
        state_pub.publish(
            stamped(
                JointState(
                    name=PANDA.joint_names,
                    position=PANDA.default_positions.tolist(),
                    velocity=[0.0] * 7,
                    effort=[0.0] * 7,
                ),
                ns,
            )
        )

    for k in range(6):  # the old time line: the policy answers each state, the supervisor each tick
        for _ in range(20):
            policy(k * period_ns)
            state(k * period_ns)
            if wait_for(lambda k=k: commands and commands[-1].header.stamp.nanosec == k * period_ns, 0.25):
                break
        assert commands and commands[-1].header.stamp.nanosec == k * period_ns, f"tick {k} never answered"
    before = len(commands)
    state(0)  # the sim restarted
    time.sleep(0.5)
    assert len(commands) == before, "ticked on the old time line's policy command"
    policy(0)
    assert wait_for(lambda: len(commands) > before, 5.0), "no answer once the policy answered the new state"
    assert (commands[-1].header.stamp.sec, commands[-1].header.stamp.nanosec) == (0, 0)


def test_a_stopping_supervisor_sends_a_last_command_that_holds_the_joints_where_they_are(active_go2):
    """Otherwise the driver keeps the last target sent: the policy's, mid-stride."""
    arrivals = []
    active_go2.probe.record(JointState, "/joint_commands", qos.COMMAND, lambda m: arrivals.append(time.monotonic()))
    states = active_go2.probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    assert wait_for(lambda: arrivals and states, 10.0), "the new subscriptions never matched"
    active_go2.action = GO2.default_positions + 0.1  # the policy's target, away from where the joints are
    time.sleep(0.5)
    supervisor = active_go2.graph.processes["safety_supervisor"]
    sent, measured = time.monotonic(), np.asarray(states[-1].position)
    supervisor.send_signal(signal.SIGINT)
    supervisor.wait(timeout=10.0)

    def stop_command_arrived():  # acknowledged by DDS is not yet handled by the probe's callback
        return (
            arrivals
            and arrivals[-1] > sent
            and all(v == 0.0 for v in active_go2.commands[-1].velocity)
            and np.max(np.abs(np.asarray(active_go2.commands[-1].position) - measured)) < 0.05
        )

    assert wait_for(stop_command_arrived, 3.0), "no holding command after the stop request"
    last = active_go2.commands[-1]
    assert all(v == 0.0 for v in last.velocity)
    # Where the joints were when it stopped (the sim, left without commands, then damps and sags).
    np.testing.assert_allclose(last.position, measured, atol=0.05)
    assert np.max(np.abs(np.asarray(last.position) - active_go2.action)) > 0.05  # not the policy's target


def test_sim2real_safety_asks_the_supervisor_and_says_its_answer(start_graph, capsys):
    """The operator's services without a system ROS (no `ros2` command in a pip install)."""
    from sim2real.cli.main import main

    start_graph(robot="panda", only=["safety_supervisor"])
    assert main(["safety", "damp", "--timeout", str(STARTUP_S)]) == 0
    assert "damp: accepted: DAMPING" in capsys.readouterr().out
    assert main(["safety", "reset", "--json"]) == 1  # nothing measured: a reset needs a live robot
    answer = json.loads([line for line in capsys.readouterr().out.splitlines() if line.startswith('{"action"')][-1])
    assert answer == {
        "action": "reset",
        "accepted": False,
        "message": "refused: /joint_states are stale; reset needs a live robot",
    }
    assert main(["safety", "engage", "--node", "/nobody", "--timeout", "1"]) == 1
    assert "no service /nobody/engage within 1 s" in capsys.readouterr().out


def test_a_takeover_starts_the_teleop_session_from_the_pose_it_holds(probe, start_graph):
    """A teleop stream that was already running while the policy drove: after the takeover, the
    joints it does not name stay at the pose held at the takeover, not at the policy's targets of
    when the stream began."""
    start_graph(robot="panda", only=["sim_robot", "safety_supervisor"])
    operator = Operator(probe, PANDA)
    operator.start()
    stream = probe.node.create_timer(
        PERIOD,
        lambda: operator.teleop_pub.publish(
            JointState(name=PANDA.joint_names[:1], position=[float(PANDA.default_positions[0] + 0.2)])
        ),
    )
    time.sleep(0.5)  # teleop streams while ACTIVE: the supervisor follows the policy
    operator.action = PANDA.default_positions + 0.1
    # The policy moved on (the step limit spreads the move over a few ticks).
    assert wait_for(lambda: np.allclose(operator.commands[-1].position, operator.action, atol=1e-6), 10.0)
    answer = operator.call("takeover")
    assert answer.success, f"{answer.message}; last trip {operator.status_value('last_trip')}"
    # The first command that follows teleop: it must already keep the others at the held pose.
    assert wait_for(lambda: operator.commands[-1].position[0] == pytest.approx(PANDA.default_positions[0] + 0.2), 5.0)
    stream.cancel()
    latest = np.asarray(operator.commands[-1].position)
    assert latest[0] == pytest.approx(PANDA.default_positions[0] + 0.2)
    np.testing.assert_allclose(latest[1:], PANDA.default_positions[1:] + 0.1, atol=1e-6)


def test_autoengage_engages_again_after_a_clean_reset(probe, start_graph):
    """Fault matrix case 19: after a trip and a clean reset, `autoengage` engages again (simulated robot)."""
    start_graph(robot="panda", only=["sim_robot", "safety_supervisor"], autoengage="true")
    operator = Operator(probe, PANDA)  # streams the policy's commands
    assert wait_for(lambda: operator.mode() in ("ACTIVE", "DAMPING"), STARTUP_S), f"mode {operator.mode()}"
    if operator.mode() == "DAMPING":  # a start-up starved past standby_deadline: what an operator does
        assert operator.call("reset").success
    assert operator.wait_mode("ACTIVE", STARTUP_S), f"mode {operator.mode()}"
    assert operator.call("damp").success and operator.wait_mode("DAMPING", REACT_S)
    assert operator.call("reset").success
    assert operator.wait_mode("STANDBY", REACT_S)
    stand = load_safety_config("panda").stand_duration
    assert operator.wait_mode("ACTIVE", stand + 10.0), f"mode {operator.mode()}, {operator.status_value('last_trip')}"
