"""failure_collector in real graphs: injected faults produce bundles rosbags reads back.

Faults: the supervisor damped by its service, a NaN action from the policy (the probe
plays the policy), a policy pose that rolls the Go2 over (a fall), a frozen robot driver
(stale sensors), and an operator's snapshot.
The bundle must hold the window around the event (pre_event_s before, post_event_s after)
with the robot's topics, and failure.json must say why.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from std_srvs.srv import Trigger

from sim2real.core.bags import bag_topics, read_bag
from sim2real.core.failure_bundle import list_bundles
from sim2real.core.failure_config import load_failure_config
from sim2real.core.rotations import tilt_angle
from tests.ros.conftest import wait_for
from tests.ros.test_safety_supervisor import GO2, Operator

pytestmark = pytest.mark.ros

CONFIG = load_failure_config("default")
WRITE_S = CONFIG.post_event_s + 15.0  # post window, then the write (a loaded 2-core machine)
NS = 10**9


@pytest.fixture
def go2_graph(probe, start_graph, tmp_path):
    out = tmp_path / "bundles"
    graph = start_graph(
        robot="go2", only=["sim_robot", "safety_supervisor", "failure_collector"], failures_dir=str(out)
    )
    operator = Operator(probe, GO2)
    operator.out = out
    operator.graph = graph
    assert wait_for(lambda: operator.mode() is not None, 25.0), "no /safety/status"
    # Faults are injected once the collector records the robot: DDS discovery between two
    # processes started together took ~2 s on a loaded machine, and a fault before that has
    # no sensing before it in its bundle.
    diagnostics = probe.record(DiagnosticArray, "/diagnostics", 10)

    def recording_states():
        return any(
            kv.key == "received/joint_states" and int(kv.value) > 0
            for array in list(diagnostics)
            for status in array.status
            if status.name.startswith("failure_collector")
            for kv in status.values
        )

    assert wait_for(recording_states, 25.0), "the failure collector never received /joint_states"
    return operator


def wait_bundle(out, kind, timeout=WRITE_S, after_ns=0):
    """The first bundle with a trigger of ``kind`` whose event came at or after ``after_ns`` (wall
    clock, as the nodes' real-time clock): not one an earlier event of the same kind wrote, such
    as a start-up stall on a loaded machine."""
    found = []

    def ready():
        # A loaded machine can stall the sim first (a stale_sensor event the fault then joins).
        found[:] = [
            b
            for b in list_bundles(out)
            if kind in {t["kind"] for t in b.info.get("triggers", [])} and int(b.info.get("time_ns", 0)) >= after_ns
        ]
        return bool(found)

    assert wait_for(ready, timeout, poll=0.2), f"no {kind} bundle in {out}: {[b.name for b in list_bundles(out)]}"
    return found[0]


def check_window(bundle, topics):
    """The bag holds the event window (nothing outside it), with messages of every topic
    and sensing on both sides of the event. Sensing density is not asserted here: on a
    loaded 2-core machine the sim itself misses periods (its /diagnostics, also in the
    bundle, counts them); benchmarks/failure_collector.py measures the collector's losses."""
    info = bundle.info
    start, end = info["window"]["start_ns"], info["window"]["end_ns"]
    assert end - start == int((CONFIG.pre_event_s + CONFIG.post_event_s) * NS)
    counts = bag_topics(bundle.path)
    assert set(topics) <= set(counts), f"bag topics {sorted(counts)}"
    assert info["topics"] == {t: {"type": counts[t][0], "messages": counts[t][1]} for t in counts}
    stamps = {}
    for topic, t, _ in read_bag(bundle.path, topics):
        stamps.setdefault(topic, []).append(t)
        assert start <= t <= end
    sensing = np.array(stamps["/joint_states"])
    assert sensing[0] < info["time_ns"] < sensing[-1] + CONFIG.triggers.stale_s * NS
    return stamps


def test_supervisor_damp_and_a_manual_snapshot_each_write_a_bundle(go2_graph, probe):
    time.sleep(CONFIG.pre_event_s + 0.5)  # let the rings fill the pre-event window
    client = probe.node.create_client(Trigger, "/failure_collector/snapshot")
    assert client.wait_for_service(timeout_sec=10.0)
    future = client.call_async(Trigger.Request())
    # The answer comes once the bundle is on disk (after the post-event window), not before.
    assert wait_for(future.done, WRITE_S) and future.result().success, future.result()
    manual = wait_bundle(go2_graph.out, "manual")
    assert future.result().message.endswith(manual.name) and Path(future.result().message).is_dir()
    check_window(manual, ["/joint_states", "/imu/data", "/safety/status"])

    time.sleep(CONFIG.cooldown_s)  # a separate event, not a continuation of the snapshot
    if go2_graph.mode() != "STANDBY":  # a start-up stall on a loaded machine damps by itself
        go2_graph.call("reset")
        assert go2_graph.wait_mode("STANDBY", 5.0)
        time.sleep(0.5)
    # That stall wrote a bundle of its own (the collector records a fault it starts in): not this one.
    damped_at = time.time_ns()
    assert go2_graph.call("damp").success
    bundle = wait_bundle(go2_graph.out, "supervisor_damping", after_ns=damped_at)
    stamps = check_window(bundle, ["/joint_states", "/imu/data", "/joint_commands", "/safety/status"])
    info = json.loads((bundle.path / "failure.json").read_text())
    reasons = [t["reason"] for t in info["triggers"]]
    # On a loaded machine the sim can stall and the supervisor damp by itself (joint_states_stale)
    # before the service call: either way the collector must have caught a transition to DAMPING.
    assert info["robot"] == "go2" and any("-> DAMPING" in r for r in reasons)
    assert info["supervisor"]["checks"] and "base_tilt" in info["supervisor"]["checks"]
    assert info["hardware"] == "sim" and info["engine"] == "pybullet"
    assert info["conditions"] == {} and info["suspended"] is False
    modes = [(t, m.status[0].message) for _, t, m in read_bag(bundle.path, ["/safety/status"])]
    before = [mode for t, mode in modes if t < info["time_ns"]]
    assert before and before[-1] != "DAMPING"  # the transition happened at the event
    assert any(mode == "DAMPING" for t, mode in modes if t >= info["time_ns"])
    assert stamps["/joint_states"][0] < info["time_ns"]


def test_a_nan_action_writes_a_bundle_with_the_nan_command(go2_graph):
    go2_graph.start()  # engaged: the probe is the policy
    time.sleep(1.0)
    go2_graph.action = GO2.default_positions.copy()
    go2_graph.action[4] = math.nan
    bundle = wait_bundle(go2_graph.out, "non_finite_command")
    check_window(bundle, ["/joint_states", "/policy/joint_commands", "/joint_commands"])
    commands = [m for _, t, m in read_bag(bundle.path, ["/policy/joint_commands"]) if t >= bundle.info["time_ns"]]
    assert commands and math.isnan(commands[0].position[4])
    assert all(np.all(np.isfinite(m.position)) for _, _, m in read_bag(bundle.path, ["/joint_commands"]))


def test_a_frozen_driver_writes_a_stale_sensor_bundle(go2_graph):
    time.sleep(2.0)
    frozen_at = time.time_ns()  # a start-up stall's bundle is not this one
    sim = go2_graph.graph.processes["sim_robot"]
    os.kill(sim.pid, signal.SIGSTOP)  # the robot's driver freezes: no more /joint_states
    try:
        bundle = wait_bundle(go2_graph.out, "stale_sensor", after_ns=frozen_at)
    finally:
        os.kill(sim.pid, signal.SIGCONT)
    assert any("silent" in t["reason"] for t in bundle.info["triggers"])
    states = [t for _, t, _ in read_bag(bundle.path, ["/joint_states"])]
    stale_at = next(t for t in bundle.info["triggers"] if t["kind"] == "stale_sensor")
    assert states, stale_at


@pytest.mark.timing_sensitive(reason="the real-time graph must stay ACTIVE until the policy tips the robot over")
def test_a_policy_that_tips_the_robot_over_writes_a_fall_bundle(go2_graph):
    go2_graph.start()  # engaged: the probe is the policy
    time.sleep(1.0)
    # Left legs straight and out, right legs folded: the Go2 rolls over (about 180 deg in sim).
    pose = GO2.default_positions.copy()
    pose[[0, 6]], pose[[1, 7]], pose[[2, 8]] = -1.0, 0.0, -0.9
    pose[[3, 9]], pose[[4, 10]], pose[[5, 11]] = 1.0, 3.0, -2.7
    go2_graph.action = pose
    bundle = wait_bundle(go2_graph.out, "fall")
    check_window(bundle, ["/joint_states", "/imu/data", "/policy/joint_commands", "/safety/status"])
    fall = next(t for t in bundle.info["triggers"] if t["kind"] == "fall")
    assert "tilt" in fall["reason"] and bundle.info["max_tilt_deg"] > 0
    tilts = []
    for _, t, msg in read_bag(bundle.path, ["/imu/data"]):
        o = msg.orientation
        tilts.append((t, math.degrees(tilt_angle((o.x, o.y, o.z, o.w)))))
    assert max(tilt for _, tilt in tilts) > CONFIG.triggers.fall_tilt_deg
    assert tilts[0][1] < 20.0  # the window starts with the robot still standing


def test_in_lockstep_a_snapshot_bundle_is_on_the_sim_clock(probe, start_graph, tmp_path):
    """Sim time: the collector drains its subscriptions in batches and maps each message's
    receive time onto the sim clock, so bag times match the samples' own (sim) stamps."""
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import JointState

    from sim2real.nodes import qos
    from tests.ros.test_sim_robot import command

    out = tmp_path / "bundles"
    # On a stand: the bundle must say so (the replay then hangs the robot too). A reality robot:
    # the bundle names it and shows none of its conditions.
    start_graph(
        robot="go2",
        hardware="mujoco",
        reality="go2_independent",
        reality_robot=1,
        only=["sim_robot", "failure_collector"],
        failures_dir=str(out),
        lockstep=True,
        commander=probe.name,
        suspended=True,
    )
    clock = probe.record(Clock, "/clock", qos.CLOCK)
    publisher = probe.command_publisher()
    policy_ns = round(GO2.policy_period * NS)

    def answer(state: JointState):
        if (state.header.stamp.sec * NS + state.header.stamp.nanosec) % policy_ns == 0:
            publisher.publish(command(GO2.joint_names, GO2.default_positions, stamp=state.header.stamp))

    probe.record(JointState, "/joint_states", qos.SENSOR_SUBSCRIBE, callback=answer)

    def sim_s():
        return clock[-1].clock.sec + clock[-1].clock.nanosec * 1e-9 if clock else 0.0

    assert wait_for(lambda: sim_s() >= 2.0, 60.0), f"sim time only reached {sim_s():.3f} s"
    client = probe.node.create_client(Trigger, "/failure_collector/snapshot")
    # Started with the sim, the collector has heavier imports: its service may come later.
    assert client.wait_for_service(timeout_sec=30.0)
    future = client.call_async(Trigger.Request())
    assert wait_for(future.done, 60.0 + WRITE_S) and future.result().success
    bundle = wait_bundle(out, "manual", timeout=10.0)
    info = bundle.info
    assert 1.5 * NS < info["time_ns"] < sim_s() * NS  # on the sim clock, not the wall clock
    assert info["hardware"] == "mujoco" and info["suspended"] is True
    assert info["reality"] == "go2_independent robot 1" and "conditions" not in info
    assert info["model"] == "example-robot-data:go2"  # a replay runs on the set's robot model
    offsets = []
    for _, t, msg in read_bag(bundle.path, ["/joint_states"]):
        assert info["window"]["start_ns"] <= t <= info["window"]["end_ns"]
        offsets.append(t - (msg.header.stamp.sec * NS + msg.header.stamp.nanosec))
    assert len(offsets) > 100
    # Received after it was stamped, and by far less than a drain period (50 ms) late on average.
    assert np.median(offsets) >= -0.002 * NS and np.median(offsets) < 0.025 * NS, np.percentile(offsets, [5, 50, 95])


def test_sim2real_failures_snapshot_asks_the_running_collector(start_graph, tmp_path, capsys):
    from sim2real.cli.main import main

    start_graph(robot="panda", only=["failure_collector"], failures_dir=str(tmp_path / "bundles"))
    assert main(["failures", "snapshot", "--timeout", "30"]) == 0
    out = capsys.readouterr().out
    assert f"snapshot: {tmp_path / 'bundles'}" in out
    assert Path(out.split("snapshot: ", 1)[1].strip()).is_dir(), "answered before the bundle was written"


def test_a_snapshot_that_cannot_be_written_answers_failure(start_graph, tmp_path, capsys):
    """Fault matrix case 18: the service answered success with a path that never appeared."""
    from sim2real.cli.main import main

    blocked = tmp_path / "a_file"
    blocked.write_text("a file where the bundle folder should be")
    start_graph(robot="panda", only=["failure_collector"], failures_dir=str(blocked / "bundles"))
    assert main(["failures", "snapshot", "--timeout", "30"]) == 1
    out = capsys.readouterr().out  # the nodes' output too (the graph's log prints)
    assert "no snapshot: could not write failure bundle" in out and "Not a directory" in out, out
    assert not (blocked.parent / "bundles").exists()
