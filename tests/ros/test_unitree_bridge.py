"""hardware:=unitree against a Go2 double that speaks the robot's own DDS protocol byte for byte
(sim2real.sim.go2_double, in this process): the bridge and the supervisor run as processes,
exactly as `sim2real up --hardware unitree` starts them."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState

from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.supervisor import ENGAGE_STAND_TOLERANCE
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.nodes import qos
from tests.ros.conftest import wait_for

GO2 = load_profile("go2")
SAFETY = load_safety_config("go2")
DOMAIN = 100 + int(os.environ["ROS_DOMAIN_ID"])  # the robot's DDS domain, this run's own
STARTUP_S = 30.0
WALK_S = 6.0
SDK_SLOT = {"FL_thigh_joint": 4, "RR_calf_joint": 8}  # unitree_sdk2's Go2 order: FR, FL, RR, RL


class DoubleProcess:
    """The Go2 double in a process of its own (its 500 Hz loop must not share this test's
    interpreter with the probe), driven over its stdin protocol."""

    def __init__(self, *options: str):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sim2real.sim.go2_double", "--domain", str(DOMAIN), "--interface", "lo", *options],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
        self.lines: list[str] = []
        self._replies: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(line)
                if line.startswith("{") or line.strip() == "ok" or line.startswith("unknown"):
                    self._replies.append(line)

    def handle(self, command: str) -> str:
        with self._lock:
            before = len(self._replies)
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        assert wait_for(lambda: len(self._replies) > before, 10.0), f"the double did not answer {command!r}: {self.lines}"
        with self._lock:
            return self._replies[before].strip()

    def status(self) -> dict:
        return json.loads(self.handle("status"))

    @property
    def counts(self) -> dict:
        return self.status()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("quit\n")
            self.process.stdin.flush()
            try:
                self.process.wait(timeout=10.0)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def run_double():
    doubles = []

    def start(*options: str) -> DoubleProcess:
        double = DoubleProcess(*options)
        doubles.append(double)
        assert wait_for(lambda: any("go2 double:" in line for line in double.lines), 30.0), double.lines
        return double

    yield start
    for double in doubles:
        double.stop()


def start_bridge(start_graph, only=("unitree_bridge", "safety_supervisor"), **arguments):
    return start_graph(robot="go2", hardware="unitree", network_interface="lo", unitree_domain=str(DOMAIN),
                       only=list(only), **arguments)


class Status:
    def __init__(self, probe):
        self.messages = probe.record(DiagnosticArray, "/safety/status", 10)

    def mode(self):
        with_status = [m for m in list(self.messages) if m.status]
        return with_status[-1].status[0].message if with_status else None

    def value(self, key):
        for message in reversed(list(self.messages)):
            for status in message.status:
                for kv in status.values:
                    if kv.key == key:
                        return kv.value
        return None


def test_the_supervisor_stands_the_go2_up_through_the_bridge(probe, start_graph, run_double):
    double = run_double()
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    status = Status(probe)
    graph = start_bridge(start_graph)
    assert wait_for(lambda: len(states) > 100, STARTUP_S), "no /joint_states from the bridge"
    assert wait_for(lambda: "preflight passed" in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    time.sleep(SAFETY.stand_duration + 1.5)
    assert status.mode() == "STANDBY", status.value("last_trip")
    newest = states[-1]
    assert list(newest.name) == GO2.joint_names
    standing = np.array(newest.position)
    # stood up from lying, sagging under its weight (the rear calves most, ~0.6 rad): enough to engage
    assert np.abs(standing - GO2.default_positions).max() < ENGAGE_STAND_TOLERANCE, standing
    # the supervisor's targets reached each joint's own motor: the stand pose, by SDK slot
    applied = np.array(double.status()["applied_q"][:12])
    by_slot = np.empty(12)
    by_slot[GO2.unitree.slots(GO2.joint_names)] = GO2.default_positions
    np.testing.assert_allclose(applied, by_slot, atol=0.02)
    # and the stand-up began where the robot lay: no state was published before commands could flow
    assert double.status()["first_driven_gap"] < 0.1


def test_a_joint_commanded_by_name_moves_exactly_its_motor(probe, start_graph, run_double):
    double = run_double()
    publisher = probe.command_publisher()
    graph = start_bridge(start_graph, only=("unitree_bridge",), commander=probe.name)
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    assert wait_for(lambda: "preflight passed" in graph.log.text() and states, STARTUP_S), graph.log.text()[-2000:]
    # from where the robot lies (the bridge forwards a first command only near the measured joints)
    target = np.array(states[-1].position)
    thigh = GO2.joint_names.index("FL_thigh_joint")
    target[thigh] += 0.1

    def applied():
        publisher.publish(JointState(name=GO2.joint_names, position=target.tolist()))
        q = double.status()["applied_q"]
        return q is not None and abs(q[SDK_SLOT["FL_thigh_joint"]] - target[thigh]) < 1e-5

    assert wait_for(applied, 10.0, poll=0.05), graph.log.text()[-2000:]
    sent = np.array(double.status()["applied_q"][:12])
    expected = np.empty(12)
    expected[GO2.unitree.slots(GO2.joint_names)] = target  # by name, through the profile
    assert sent[SDK_SLOT["FL_thigh_joint"]] == pytest.approx(target[thigh], abs=1e-5)  # the SDK's own order
    np.testing.assert_allclose(sent, expected, atol=1e-5)


def test_the_remotes_sticks_drive_cmd_vel_while_off_centre(probe, start_graph, run_double):
    from geometry_msgs.msg import Twist

    double = run_double()
    twists = probe.record(Twist, "/cmd_vel", 10)
    graph = start_bridge(start_graph, only=("unitree_bridge",))
    assert wait_for(lambda: "preflight passed" in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    time.sleep(0.5)
    assert not twists  # a remote at rest leaves /cmd_vel to others
    double.handle("sticks 0 0.5 0 0")  # left stick half forward
    assert wait_for(lambda: twists and twists[-1].linear.x == pytest.approx(0.5), 2.0)
    double.handle("sticks 0 0 0 0")
    assert wait_for(lambda: twists[-1].linear.x == 0.0, 2.0)
    settled = len(twists)
    time.sleep(0.5)
    assert len(twists) == settled  # one zero, then silence


def test_the_remotes_estop_button_latches_estop(probe, start_graph, run_double):
    double = run_double()
    status = Status(probe)
    start_bridge(start_graph)
    assert wait_for(lambda: status.mode() == "STANDBY", STARTUP_S)
    double.handle("remote select")  # the remote's e-stop (config/safety/go2.yaml remote:)
    assert wait_for(lambda: status.mode() == "ESTOP", 2.0), status.mode()
    double.handle("remote")
    time.sleep(0.5)
    assert status.mode() == "ESTOP"  # latched until a reset


@pytest.mark.parametrize("fault", ["bad_crc", "freeze_tick", "drop_lowstate"])
def test_a_broken_lowstate_stream_damps_within_the_supervisors_deadline(probe, start_graph, run_double, fault):
    double = run_double()
    status = Status(probe)
    start_bridge(start_graph)
    assert wait_for(lambda: status.mode() == "STANDBY", STARTUP_S)
    time.sleep(SAFETY.stand_duration + 0.5)  # stood: the short deadlines apply
    assert status.mode() == "STANDBY" and status.value("trips") == "0", status.value("last_trip")
    double.handle(f"fault {fault} on")
    assert wait_for(lambda: status.mode() == "DAMPING", 2.0), status.mode()
    trip = status.value("last_trip")
    assert "joint_states_stale" in trip
    # the supervisor's own account: it tripped within two of its periods past the deadline in force
    # (the STANDBY one until the robot first stood)
    age = float(trip.split(" for ", 1)[1].split(" s", 1)[0])
    deadline = float(trip.split("(deadline ", 1)[1].split(" s", 1)[0])
    assert age <= deadline + 2 * GO2.policy_period, trip


@pytest.mark.parametrize("options, fault, words", [
    ((), "hot_motor", "preflight: motor FL_hip_joint at 95 C, need <= 70 C"),
    ((), "low_battery", "preflight: battery 20.0 V, need >= 22.0 V"),
    (("--sport-mode",), None, "preflight: rt/lowcmd has other writers"),
])
def test_preflight_refuses_to_command_until_the_fault_is_gone(probe, start_graph, run_double, options, fault, words):
    double = run_double(*options)
    if fault:
        double.handle(f"fault {fault} on")
    graph = start_bridge(start_graph)
    assert wait_for(lambda: words in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    time.sleep(1.0)
    counts = double.counts
    assert counts["applied"] == 0 and counts["foreign"] == 0  # nothing at all is written while it waits
    double.handle(f"fault {fault} off" if fault else "release")
    assert wait_for(lambda: "preflight passed" in graph.log.text(), 15.0), graph.log.text()[-2000:]
    assert wait_for(lambda: double.counts["driven"] > 10, 5.0)  # the supervisor's stand-up


@pytest.mark.parametrize("fault, code, words", [(None, 0, "all checks passed: "),
                                                ("hot_motor", 1, "FAIL motor FL_hip_joint at 95 C")])
def test_sim2real_preflight_reports_from_a_terminal(run_double, fault, code, words):
    double = run_double()
    if fault:
        double.handle(f"fault {fault} on")
    result = subprocess.run([sys.executable, "-m", "sim2real.cli", "preflight", "--network-interface", "lo",
                             "--domain", str(DOMAIN), "--window", "2"], capture_output=True, text=True, timeout=60)
    assert result.returncode == code, result.stdout + result.stderr
    assert words in result.stdout


@pytest.mark.slow
def test_the_shipped_policy_walks_the_double_as_far_as_the_sim(probe, start_graph, run_double):
    """The whole graph on hardware:=unitree (bridge, supervisor with the deadman held on the
    double's remote, policy runtime) walks as fast, within 10 %, as on hardware:=sim for the same
    /cmd_vel."""
    from geometry_msgs.msg import Twist
    from nav_msgs.msg import Odometry

    policy = str(share_dir() / "policies" / "go2_walk.onnx")
    twist = Twist()
    twist.linear.x = 0.5
    cmd_vel = probe.node.create_publisher(Twist, "/cmd_vel", 10)
    status = Status(probe)

    def walk(position) -> float:
        """Stand, engage, walk at 0.5 m/s; the trunk's mean speed along x once it is under way
        (the last WALK_S s of WALK_S + 2), in the physics' own time: ``position()`` -> (s, x)."""
        assert wait_for(lambda: status.mode() == "ACTIVE", STARTUP_S), (status.mode(), status.value("last_trip"))
        begin = time.monotonic()
        start = None
        while time.monotonic() - begin < WALK_S + 2.0:
            cmd_vel.publish(twist)
            if start is None and time.monotonic() - begin >= 2.0:
                start = position()
            time.sleep(0.05)
        end = position()
        modes = [m.status[0].message for m in list(status.messages) if m.status]
        assert status.mode() == "ACTIVE", (status.value("last_trip"), sorted(set(modes)))
        return (end[1] - start[1]) / (end[0] - start[0])

    truth = probe.record(Odometry, "/sim/ground_truth", qos.SENSOR_SUBSCRIBE)
    # Lockstep: the sim's physics keeps pace with the graph (in real time on 2 cores it runs
    # behind the wall clock, which would slow its walk per wall-clock second).
    sim = start_graph(robot="go2", policy=policy, autoengage=True, estimator="false", lockstep=True)
    assert wait_for(lambda: truth, STARTUP_S)

    def sim_position():
        newest = truth[-1]
        return newest.header.stamp.sec + newest.header.stamp.nanosec * 1e-9, newest.pose.pose.position.x

    sim_speed = walk(sim_position)
    sim.stop()
    status.messages.clear()

    double = run_double()
    double.handle("remote L1")  # the deadman, held (a real robot's supervisor needs it to engage)
    start_bridge(start_graph, only=("unitree_bridge", "safety_supervisor", "policy_runtime"), policy=policy,
                 autoengage=True)
    def double_position():
        status_now = double.status()
        return status_now["sim_time"], status_now["base_position"][0]

    double_speed = walk(double_position)
    print(f"walking at 0.5 m/s: sim (lockstep) {sim_speed:.3f} m/s, Go2 double through the bridge {double_speed:.3f} m/s")
    assert sim_speed > 0.4, sim_speed
    assert abs(double_speed - sim_speed) <= 0.1 * sim_speed, (double_speed, sim_speed)


def armed_and_standing(probe, start_graph, run_double):
    double = run_double()
    status = Status(probe)
    graph = start_bridge(start_graph)
    assert wait_for(lambda: status.mode() == "STANDBY" and "preflight passed" in graph.log.text(), STARTUP_S)
    assert wait_for(lambda: double.counts["driven"] > 50, 10.0)
    return double, status, graph


def test_a_dead_supervisor_leaves_the_robot_damped_within_the_command_timeout(probe, start_graph, run_double):
    double, _, graph = armed_and_standing(probe, start_graph, run_double)
    os.kill(graph.processes["safety_supervisor"].pid, signal.SIGKILL)
    assert wait_for(lambda: double.status()["last_kp_max"] == 0.0, 5.0)
    status = double.status()
    assert status["last_kd_max"] == pytest.approx(GO2.damping_kd)
    # on the robot's own clock: the last command it applied, then damping one timeout later
    assert status["driven_to_damping"] < GO2.command_timeout + 0.03, status


def test_a_second_lowcmd_writer_after_arming_latches_the_bridge_on_damping(probe, start_graph, run_double):
    double, status, graph = armed_and_standing(probe, start_graph, run_double)
    rival = UnitreeDds(DOMAIN, "lo", role="bridge")  # e.g. sport mode started again
    assert wait_for(lambda: "latched on damping" in graph.log.text(), 10.0), graph.log.text()[-2000:]
    assert wait_for(lambda: status.mode() == "DAMPING", 2.0)  # /joint_states stopped
    rival.close()
    driven = double.counts["driven"]
    time.sleep(3.0)  # the rival is gone: the bridge does not re-arm by itself
    assert double.counts["driven"] == driven and double.status()["last_kp_max"] == 0.0


def test_stopping_the_bridge_leaves_the_robot_damped(probe, start_graph, run_double):
    double, _, graph = armed_and_standing(probe, start_graph, run_double)
    graph.stop()
    assert double.status()["last_kp_max"] == 0.0
    assert double.status()["last_kd_max"] == pytest.approx(GO2.damping_kd)
