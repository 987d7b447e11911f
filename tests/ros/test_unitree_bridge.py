"""hardware:=unitree against a Go2 double that speaks the robot's own DDS protocol byte for byte
(sim2real.sim.go2_double, in this process): the bridge and the supervisor run as processes,
exactly as `sim2real up --hardware unitree` starts them."""

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import JointState, Joy
from std_srvs.srv import Trigger

from sim2real.core.command_script import FALL_HEIGHT
from sim2real.core.realtime import ROLE_PRIORITY
from sim2real.core.robot_profile import load_profile
from sim2real.core.safety_config import load_safety_config
from sim2real.core.steady_time import system_clock_synchronised
from sim2real.core.supervisor import ENGAGE_STAND_TOLERANCE
from sim2real.core.unitree.dds import UnitreeDds
from sim2real.nodes import qos
from sim2real.sysid.dataset import read_bag
from tests.cli_runs import run_cli
from tests.ros.conftest import wait_for
from tests.shipped_demo import SIM_DEMO_FIRST_16S_DISTANCE_M

# The graphs here run as on a busy robot computer (docs/realtime.md): the graph with realtime:=true,
# so no process stalls past the supervisor's deadlines whatever else the machine runs (at normal
# priority beside other load, a 0.1 s stall damps the bridge mid stand-up). The double stands in
# for the robot's own controller, which runs on the robot's own processor and takes no CPU from
# the graph: its loop runs at real-time priority below the whole control chain, so the chain never
# waits for a CPU it holds. Above the chain (as the robot's firmware is above everything on its
# own board), its physics (about 60 % of a core) would leave the chain's ~100 % of a core one core
# of the two whenever it steps, and the chain's lowest priority, the policy runtime, would miss its
# deadlines (policy_stale, tick_overrun). Behind, the double runs the periods it owes back to back.
#
# Seen in about one run of six of these graphs: the supervisor's /joint_states subscription never
# matches the bridge's publisher (the supervisor stays "waiting for the first /joint_states" while
# this test's probe receives them), a DDS discovery failure not yet explained; a fresh graph works.
pytestmark = pytest.mark.timing_sensitive(
    reason="a process of the graph stalling 0.1-0.3 s on a loaded 2-core machine: a sensing gap trips the "
    "supervisor, or a command gap damps the bridge, while the Go2 stands up (stood_in_standby)"
)

GO2 = load_profile("go2")
SAFETY = load_safety_config("go2")
# The robot's DDS domain: each test its own (a participant of the previous test's processes may
# linger in discovery for its lease), all of this run's own (ROS_DOMAIN_ID is drawn at random).
_domains = itertools.count()


def next_domain() -> int:
    # Domains 1-13: their ports (7400 + 250 x domain) stay below Linux's ephemeral port range,
    # where a port another DDS stack took would be lost to this one, and away from the ROS
    # domains of the tests (20-99) and from tests/unit/test_unitree_protocol.py's (14-19), which
    # `make test` runs at the same time.
    return 1 + (int(os.environ["ROS_DOMAIN_ID"]) + next(_domains)) % 13


STARTUP_S = 30.0
DOUBLE_PRIORITY = min(ROLE_PRIORITY.values()) - 10  # below the control chain: see the note above
SHIPPED_POLICY = Path(__file__).resolve().parents[2] / "policies" / "go2_walk.onnx"
WALKED_S = 16.0  # of the demo's walk script: tests/shipped_demo.py has the lockstep sim's distance
SDK_SLOT = {"FL_thigh_joint": 4, "RR_calf_joint": 8}  # unitree_sdk2's Go2 order: FR, FL, RR, RL


class DoubleProcess:
    """The Go2 double in a process of its own (its 500 Hz loop must not share this test's
    interpreter with the probe), driven over its stdin protocol."""

    def __init__(self, *options: str, domain: int | None = None):
        self.domain = next_domain() if domain is None else domain
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sim2real.sim.go2_double",
                "--domain",
                str(self.domain),
                "--interface",
                "lo",
                *options,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
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
        assert wait_for(lambda: len(self._replies) > before, 10.0), (
            f"the double did not answer {command!r}: {self.lines}"
        )
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

    def start(*options: str, domain: int | None = None) -> DoubleProcess:
        double = DoubleProcess("--realtime", str(DOUBLE_PRIORITY), *options, domain=domain)
        doubles.append(double)
        # The banner comes after what the double says of its scheduling.
        assert wait_for(lambda: any("rt/lowstate at" in line for line in double.lines), 30.0), double.lines
        assert not [line for line in double.lines if "could not get" in line], double.lines
        return double

    yield start
    for double in doubles:
        double.stop()


def start_bridge(start_graph, double, only=("unitree_bridge", "safety_supervisor"), **arguments):
    return start_graph(
        robot="go2",
        hardware="unitree",
        network_interface="lo",
        unitree_domain=str(double.domain),
        only=list(only),
        realtime="true",
        **arguments,
    )


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


def near_stand(states: list) -> bool:
    """The newest /joint_states within the engage's stand tolerance (a Go2 standing sags under its
    weight, the rear calves most, ~0.6 rad)."""
    return bool(states) and np.abs(np.array(states[-1].position) - GO2.default_positions).max() < ENGAGE_STAND_TOLERANCE


class Operator:
    """The supervisor's reset and damp services, called as `sim2real safety` does."""

    def __init__(self, probe):
        self.clients = {
            name: probe.node.create_client(Trigger, f"/safety_supervisor/{name}") for name in ("reset", "damp")
        }
        assert self.clients["reset"].wait_for_service(timeout_sec=10.0)

    def call(self, name: str):
        answer = self.clients[name].call_async(Trigger.Request())
        assert wait_for(answer.done, 5.0), f"no answer to {name}"
        return answer.result()

    def reset_until_accepted(self) -> None:
        """Reset, again while the supervisor refuses (its stop still lowers the robot)."""

        def accepted() -> bool:
            answer = self.clients["reset"].call_async(Trigger.Request())
            return wait_for(answer.done, 5.0) and answer.result().success

        assert wait_for(accepted, 15.0, poll=0.5)


def stand_up_again(probe) -> None:
    """The operator's way back for a robot the bridge damped: reset, and if the supervisor had
    already stood it up (then a reset changes nothing), damp and reset once the stop has ended."""
    operator = Operator(probe)
    answer = operator.call("reset")
    assert answer.success, answer.message
    if answer.message == "nothing to reset in STANDBY":
        assert operator.call("damp").success
        operator.reset_until_accepted()


def stood_in_standby(probe, status) -> None:
    """Wait until the supervisor has stood the Go2 up and is in STANDBY past the stand-up's end,
    as an operator has it before trying anything else. The supervisor rightly trips on a sensing
    gap over its deadline, and on a loaded 2-core machine the graph's processes now and then
    stall 0.1-0.3 s; at the stand-up's end, where the 50 ms deadline takes over from the STANDBY
    one, such a stall trips it (seen in about one start in ten of a full run). Then the operator
    resets it, as often as it refuses while its stop still lowers the robot, and it stands up
    again; a robot left lying in STANDBY (the bridge damped on a command gap) is damped and reset
    the same way. The tests below are about what comes after."""
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)

    def stood_or_stopped() -> bool:  # a trip ends the wait at once: the reset comes next
        return status.mode() in ("DAMPING", "ESTOP") or (near_stand(states) and status.mode() == "STANDBY")

    for _ in range(2):
        if wait_for(stood_or_stopped, SAFETY.stand_duration + STARTUP_S) and status.mode() == "STANDBY":
            # Near the stand pose from about 1.5 s into the 2 s stand-up: a full stand_duration
            # more is past its end, where the 50 ms deadline has taken over.
            time.sleep(SAFETY.stand_duration)
            if status.mode() == "STANDBY" and near_stand(states):
                return
        operator = Operator(probe)
        if status.mode() == "STANDBY":
            # Lying in STANDBY: a command gap damped the bridge during the stand-up, and it takes
            # only commands near the robot; a reset in STANDBY changes nothing, so damp first.
            assert operator.call("damp").success
        operator.reset_until_accepted()
        # /safety/status says STANDBY from the supervisor's next tick: a DAMPING still newest
        # would end the next wait at once.
        wait_for(lambda: status.mode() == "STANDBY", 2.0)
    raise AssertionError(f"the supervisor did not stand the Go2 up: {status.mode()}, {status.value('last_trip')}")


def bridge_values(diagnostics) -> dict:
    """The bridge's newest diagnostics values (its gate's counts, state and failures)."""
    for array in reversed(list(diagnostics)):
        for status in array.status:
            if "bridge" in status.name:
                return {kv.key: kv.value for kv in status.values if not kv.key.startswith("temperature")}
    return {}


def test_the_supervisor_stands_the_go2_up_through_the_bridge(probe, start_graph, run_double):
    double = run_double()
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    status = Status(probe)
    graph = start_bridge(start_graph, double)
    assert wait_for(lambda: len(states) > 100, STARTUP_S), "no /joint_states from the bridge"
    assert wait_for(lambda: "preflight passed" in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    bridge = probe.record(DiagnosticArray, "/diagnostics", 10)

    def stood() -> bool:  # from lying, sagging under its weight: enough to engage
        return near_stand(states)

    # The stand-up takes stand_duration once the supervisor's commands reach the bridge (DDS
    # discovery decides when: the supervisor holds where the robot lies until then).
    up = wait_for(stood, SAFETY.stand_duration + STARTUP_S)
    if not up and int(bridge_values(bridge).get("timeouts", 0)) > 0:
        # A command gap over the timeout (a loaded 2-core machine stalls a process ~0.1 s now
        # and then) damped the robot, and the bridge takes only commands near it: the operator
        # stands it up again from where it lies, with a reset (mid stand-up) or, once it had
        # stood (a reset then leaves it as it is), a damp and then a reset.
        stand_up_again(probe)
        up = wait_for(stood, SAFETY.stand_duration + STARTUP_S)
    assert up, f"{np.round(states[-1].position, 2)}; bridge: {bridge_values(bridge)}; double: {double.status()}"
    time.sleep(1.5)  # and it stays up
    assert status.mode() == "STANDBY", status.value("last_trip")
    newest = states[-1]
    assert list(newest.name) == GO2.joint_names
    assert stood(), newest.position
    # the supervisor's targets reached each joint's own motor: the stand pose, by SDK slot
    applied = np.array(double.status()["applied_q"][:12])
    by_slot = np.empty(12)
    by_slot[GO2.unitree.slots(GO2.joint_names)] = GO2.default_positions
    np.testing.assert_allclose(applied, by_slot, atol=0.02)
    # and the stand-up began where the robot lay: no state was published before commands could flow
    assert double.status()["first_driven_gap"] < 0.1


def test_the_shipped_policy_walks_the_demo_script_through_the_bridge(probe, start_graph, run_double):
    """`sim2real up --hardware unitree --policy policies/go2_walk.onnx --demo` on the double, the
    operator holding the remote's deadman: the supervisor stands the Go2 up through the bridge and
    engages, the demo script walks it (its first 16 s: standing, forward, into the turn), and its
    trunk covers the distance the same script covers in the lockstep sim within 10 %, without
    falling and without the supervisor leaving ACTIVE once engaged."""
    double = run_double()
    assert double.handle(f"remote {SAFETY.remote['deadman']}") == "ok"
    status = Status(probe)
    graph = start_graph(
        robot="go2",
        hardware="unitree",
        network_interface="lo",
        unitree_domain=str(double.domain),
        policy=str(SHIPPED_POLICY),
        demo="true",
        autoengage="true",  # as `sim2real up --demo` sets it: the engage waits for the deadman
        realtime="true",
        parameters={"demo_script": {"duration": WALKED_S}},
    )
    engaged = wait_for(lambda: status.mode() == "ACTIVE", STARTUP_S)
    assert engaged, (status.mode(), status.value("last_trip"), graph.log.text()[-3000:])
    assert double.handle("mark") == "ok"  # the script starts on ACTIVE: its distance from here
    ended = graph.wait(duration=WALKED_S + 10.0, until=lambda: "demo_script" in graph.exited(), stop_on_exit=False)
    walked = double.status()
    log = graph.log.text()
    assert ended == "until" and graph.exited()["demo_script"] == 0, log[-3000:]
    modes = [s.status[0].message for s in list(status.messages) if s.status]
    assert set(modes[modes.index("ACTIVE") :]) == {"ACTIVE"}, (status.value("last_trip"), walked)
    assert "the script starts anyway" not in log  # it started on ACTIVE, as in the sim
    assert walked["min_height"] > FALL_HEIGHT, walked
    assert walked["path_m"] == pytest.approx(SIM_DEMO_FIRST_16S_DISTANCE_M, rel=0.10), walked
    assert walked["bad_crc"] == 0


def test_a_joint_commanded_by_name_moves_exactly_its_motor(probe, start_graph, run_double):
    double = run_double()
    publisher = probe.command_publisher()
    graph = start_bridge(start_graph, double, only=("unitree_bridge",), commander=probe.name)
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
    graph = start_bridge(start_graph, double, only=("unitree_bridge",))
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
    joy = probe.record(Joy, "/joy", qos.SENSOR_SUBSCRIBE)
    start_bridge(start_graph, double)
    stood_in_standby(probe, status)
    double.handle("remote select")  # the remote's e-stop (config/safety/go2.yaml remote:)
    assert wait_for(lambda: status.mode() == "ESTOP", 2.0), (
        status.mode(),
        joy[-1].buttons if joy else None,
        {kv.key: kv.value for kv in status.messages[-1].status[0].values},
    )
    double.handle("remote")
    time.sleep(0.5)
    assert status.mode() == "ESTOP"  # latched until a reset


@pytest.mark.parametrize("fault", ["bad_crc", "freeze_tick", "drop_lowstate"])
def test_a_broken_lowstate_stream_damps_within_the_supervisors_deadline(probe, start_graph, run_double, fault):
    double = run_double()
    status = Status(probe)
    graph = start_bridge(start_graph, double)
    stood_in_standby(probe, status)  # stood: the short deadlines apply
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    trips = int(status.value("trips"))
    assert status.mode() == "STANDBY", status.value("last_trip")
    double.handle(f"fault {fault} on")
    assert wait_for(lambda: status.mode() == "DAMPING", 2.0), (
        status.mode(),
        len(states),
        {kv.key: kv.value for kv in status.messages[-1].status[0].values},
        graph.log.text()[-1500:],
    )
    trip = status.value("last_trip")
    assert "joint_states_stale" in trip and int(status.value("trips")) == trips + 1, trip
    # the supervisor's own account: it tripped within two of its periods past the deadline in force
    # (the STANDBY one until the robot first stood)
    age = float(trip.split(" for ", 1)[1].split(" s", 1)[0])
    deadline = float(trip.split("(deadline ", 1)[1].split(" s", 1)[0])
    assert age <= deadline + 0.1, trip  # 0.1 s: the supervisor's timer on a loaded machine


@pytest.mark.parametrize(
    "options, fault, words",
    [
        ((), "hot_motor", "preflight: motor FL_hip_joint at 95 C, need <= 70 C"),
        ((), "low_battery", "preflight: battery 20.0 V, need >= 22.0 V"),
        (("--sport-mode",), None, "preflight: rt/lowcmd has other writers"),
    ],
)
def test_preflight_refuses_to_command_until_the_fault_is_gone(probe, start_graph, run_double, options, fault, words):
    double = run_double(*options)
    if fault:
        double.handle(f"fault {fault} on")
    graph = start_bridge(start_graph, double)
    assert wait_for(lambda: words in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    time.sleep(1.0)
    counts = double.counts
    assert counts["applied"] == 0 and counts["foreign"] == 0  # nothing at all is written while it waits
    double.handle(f"fault {fault} off" if fault else "release")
    assert wait_for(lambda: "preflight passed" in graph.log.text(), 15.0), graph.log.text()[-2000:]
    assert wait_for(lambda: double.counts["driven"] > 10, 5.0)  # the supervisor's stand-up


@pytest.mark.parametrize(
    "fault, code, words", [(None, 0, "all checks passed: "), ("hot_motor", 1, "FAIL motor FL_hip_joint at 95 C")]
)
def test_sim2real_preflight_reports_from_a_terminal(run_double, fault, code, words):
    double = run_double()
    if fault:
        double.handle(f"fault {fault} on")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim2real.cli.main",
            "preflight",
            "--network-interface",
            "lo",
            "--domain",
            str(double.domain),
            "--window",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == code, result.stdout + result.stderr
    assert words in result.stdout
    # This computer's clock, said beside the checks and failing none of them.
    assert ("NOTE the system clock is not synchronised" in result.stdout) == (system_clock_synchronised() is False)


@pytest.mark.slow
def test_sysid_record_through_the_bridge_writes_a_complete_bag(run_double, tmp_path):
    """`sim2real sysid record --hardware unitree`: the Go2 recorded through its own interface, as
    an owner records it: the operator holds the remote's deadman, the logger engages the
    supervisor once the robot stands, and the excitation reaches the motors through the bridge."""
    double = run_double()
    double.handle("remote L1")  # the deadman (config/safety/go2.yaml remote:), held through the recording
    bag = tmp_path / "go2_sysid"
    result = run_cli(
        [
            "sysid",
            "record",
            "--robot",
            "go2",
            "--hardware",
            "unitree",
            "--network-interface",
            "lo",
            "--unitree-domain",
            str(double.domain),
            "--duration",
            "6",
            "-o",
            str(bag),
            "--realtime",
        ],
        timeout=240,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "could not get" not in result.stdout + result.stderr, "real time refused: see docs/realtime.md"
    # recorded standing: the bag can weigh the robot, which a fit on a stand cannot
    assert f"next: sim2real sysid weigh {bag} --robot go2 --fit config/identified/go2.yaml" in result.stdout
    assert f"sim2real sysid fit {bag} --robot go2" in result.stdout
    segment = read_bag(bag, GO2)
    assert segment.metadata["completed"] is True
    assert segment.metadata["hardware"] == "unitree"
    assert segment.duration > 6.0
    # the recorded states moved as the excitation asked: the bag holds an excitation, not a stand
    moved = np.ptp(segment.q, axis=0)
    assert moved.max() > 0.02, moved


def test_sim2real_preflight_refuses_two_robots_on_one_domain(run_double):
    """Two rt/lowstate writers on one domain and interface (here two doubles; on a bench, two
    robots or a robot and a simulator): the bridge would command one robot from the other's
    states, so preflight refuses and says how to part them."""
    first = run_double()
    run_double(domain=first.domain)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim2real.cli",
            "preflight",
            "--network-interface",
            "lo",
            "--domain",
            str(first.domain),
            "--window",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL rt/lowstate has 2 writers" in result.stdout and "unitree_domain:=" in result.stdout


def armed_and_standing(probe, start_graph, run_double):
    double = run_double()
    status = Status(probe)
    graph = start_bridge(start_graph, double)
    assert wait_for(lambda: "preflight passed" in graph.log.text(), STARTUP_S), graph.log.text()[-2000:]
    stood_in_standby(probe, status)
    assert double.counts["driven"] > 50
    return double, status, graph


def test_a_dead_supervisor_leaves_the_robot_damped_within_the_command_timeout(probe, start_graph, run_double):
    double, _, graph = armed_and_standing(probe, start_graph, run_double)
    killed = time.monotonic()  # CLOCK_MONOTONIC: the same clock in the double's process
    os.kill(graph.processes["safety_supervisor"].pid, signal.SIGKILL)
    assert wait_for(lambda: double.status()["last_kp_max"] == 0.0, 5.0)
    status = double.status()
    assert status["last_kd_max"] == pytest.approx(GO2.damping_kd)
    # On the robot's side, from the kill: the supervisor's last command left about one of its
    # periods (20 ms) before it, and the bridge damps one timeout after that (0.082-0.103 s in 15
    # runs; the bounds leave a loaded machine's ~0.1 s stall of a process). Not timed from the
    # last new frame the robot saw: a supervisor holding a pose sends the same frame for a while.
    assert GO2.command_timeout - 0.06 < status["damped_at"] - killed < GO2.command_timeout + 0.15, status


def test_a_second_lowcmd_writer_after_arming_latches_the_bridge_on_damping(probe, start_graph, run_double):
    double, status, graph = armed_and_standing(probe, start_graph, run_double)
    rival = UnitreeDds(double.domain, "lo", role="bridge")  # e.g. sport mode started again
    assert wait_for(lambda: "latched on damping" in graph.log.text(), 10.0), graph.log.text()[-2000:]
    assert wait_for(lambda: status.mode() == "DAMPING", 2.0)  # /joint_states stopped
    rival.close()
    driven = double.counts["driven"]
    time.sleep(3.0)  # the rival is gone: the bridge does not re-arm by itself
    assert double.counts["driven"] == driven and double.status()["last_kp_max"] == 0.0


def test_stopping_the_bridge_leaves_the_robot_damped(probe, start_graph, run_double):
    """The bridge alone, commanded to the end (no supervisor to go silent first): its own stop."""
    double = run_double()
    states = probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE)
    publisher = probe.command_publisher()
    graph = start_bridge(start_graph, double, only=("unitree_bridge",), commander=probe.name)
    assert wait_for(lambda: "preflight passed" in graph.log.text() and states, STARTUP_S)
    hold = np.array(states[-1].position)
    stop = threading.Event()

    def command():
        while not stop.is_set():
            publisher.publish(JointState(name=GO2.joint_names, position=hold.tolist()))
            time.sleep(0.02)

    commander = threading.Thread(target=command, daemon=True)
    commander.start()
    try:
        assert wait_for(lambda: double.status()["last_kp_max"] > 0, 10.0)
        graph.processes["unitree_bridge"].send_signal(signal.SIGINT)
        assert wait_for(lambda: double.status()["last_kp_max"] == 0.0, 5.0)
        assert double.status()["last_kd_max"] == pytest.approx(GO2.damping_kd)
        assert wait_for(lambda: graph.exited().get("unitree_bridge") == 0, 10.0), graph.exited()
    finally:
        stop.set()
        commander.join()
