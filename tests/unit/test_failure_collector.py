"""Failure collector core: ring bounds, triggers, atomic bundles, quota rotation, bag read-back."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from sim2real.core.bags import (
    bag_topics,
    diagnostic_statuses,
    imu_orientation,
    joint_state_positions,
    read_bag,
    typestore,
)
from sim2real.core.failure_bundle import STAGING_DIR, list_bundles, partial_path, rotate, write_bundle
from sim2real.core.failure_capture import FailureCollector, FailureDetector, TopicRing, Trigger, wall_to_clock
from sim2real.core.failure_config import (
    FailureConfigError,
    TopicBuffer,
    TriggerConfig,
    load_failure_config,
    parse_failure_config,
)
from sim2real.core.robot_profile import load_profile
from sim2real.core.units import NS_PER_S


def joint_state_cdr(t_ns: int, position) -> bytes:
    store = typestore()
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header = store.types["std_msgs/msg/Header"]
    Time = store.types["builtin_interfaces/msg/Time"]
    msg = JointState(
        header=Header(stamp=Time(sec=t_ns // NS_PER_S, nanosec=t_ns % NS_PER_S), frame_id=""),
        name=[f"j{i}" for i in range(len(position))],
        position=np.asarray(position, float),
        velocity=np.zeros(len(position)),
        effort=np.zeros(len(position)),
    )
    return bytes(store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def small_config(**changes):
    data = {
        "pre_event_s": 1.0,
        "post_event_s": 0.5,
        "cooldown_s": 0.2,
        "quota_mb": 10,
        "topics": {"/joint_states": {"type": "sensor_msgs/msg/JointState", "seconds": 3, "max_mb": 1}},
        "triggers": {"stale_topics": ["/joint_states"]},
    }
    data.update(changes)
    return parse_failure_config(data, "test")


def test_default_config_loads_and_bad_configs_name_the_fix():
    config = load_failure_config("default")
    assert config.topic("/joint_states").msgtype == "sensor_msgs/msg/JointState"
    assert {"DAMPING", "ESTOP"} <= set(config.triggers.supervisor_modes)
    with pytest.raises(FailureConfigError, match="cannot hold the event window"):
        small_config(topics={"/x": {"type": "std_msgs/msg/String", "seconds": 1}})
    with pytest.raises(FailureConfigError, match="Fix: add them under topics"):
        small_config(triggers={"stale_topics": ["/imu/data"]})
    with pytest.raises(FailureConfigError, match="unknown setting"):
        small_config(pre_event=3)
    bad = {  # each silently switched a trigger off, lost every bundle, or used a default unseen
        "saturation_streak: 0.7": (
            {"triggers": {"saturation_streak": 0.7, "stale_topics": []}},
            "triggers.saturation_streak: expected a whole number",
        ),
        "non_finite_command: 'false'": (
            {"triggers": {"non_finite_command": "false", "stale_topics": []}},
            "triggers.non_finite_command: expected true or false",
        ),
        "fall_tilt_deg: 720": ({"triggers": {"fall_tilt_deg": 720, "stale_topics": []}}, "can never be reached"),
        "a typo in a topic": (
            {"topics": {"/joint_states": {"type": "sensor_msgs/msg/JointState", "second": 30}}},
            "topics./joint_states.second: unknown setting",
        ),
        "a type the writer lacks": (
            {"topics": {"/low": {"type": "unitree_go/msg/LowState"}}, "triggers": {"stale_topics": []}},
            "not a message type the bag writer knows",
        ),
    }
    for changes, words in bad.values():
        with pytest.raises(FailureConfigError, match=words):
            small_config(**changes)


def test_ring_keeps_its_duration_and_byte_bounds():
    ring = TopicRing(TopicBuffer("/t", "std_msgs/msg/String", seconds=1.0, max_bytes=10_000))
    for k in range(300):  # 3 s at 100 Hz, 10 bytes each
        ring.append(k * NS_PER_S // 100, b"x" * 10)
    assert ring.oldest_ns() >= 2 * NS_PER_S - NS_PER_S // 100 and len(ring) <= 101
    assert ring.received == 300 and ring.evicted == 300 - len(ring)
    tight = TopicRing(TopicBuffer("/t", "std_msgs/msg/String", seconds=10.0, max_bytes=1000))
    for k in range(300):
        tight.append(k * NS_PER_S // 100, b"x" * 100)
    assert tight.bytes <= 1000 and len(tight) == 10
    assert [t for t, _ in ring.window(2 * NS_PER_S, int(2.5 * NS_PER_S))] == [
        k * NS_PER_S // 100 for k in range(200, 251)
    ]


def test_detector_triggers_on_each_failure_kind_once_per_episode():
    profile = load_profile("go2")
    d = FailureDetector(
        TriggerConfig(saturation_streak=3, latency_p99_ms=10.0, stale_s=0.2, stale_topics=("/joint_states",)),
        profile.joint_names,
        profile.lower_limits,
        profile.upper_limits,
    )
    assert d.safety_status("ACTIVE", {}) is None
    fired = d.safety_status("DAMPING", {"last_trip": "base_tilt: base tilted 1.2 rad", "check/base_tilt": "FAIL"})
    assert fired.kind == "supervisor_damping" and "base_tilt" in fired.reason
    assert d.safety_status("DAMPING", {}) is None  # no new transition
    assert d.context()["supervisor"]["checks"] == {}
    upright, side = (0, 0, 0, 1), (math.sin(math.pi / 4), 0, 0, math.cos(math.pi / 4))
    assert d.imu(upright) is None
    assert d.imu((math.nan, 0, 0, 1)) is None and d.imu((0, 0, 0, 0)) is None  # no tilt in these, not "upright"
    assert d.max_tilt_deg == 0.0
    assert d.imu(side).kind == "fall" and d.imu(side) is None
    names = profile.joint_names
    nan = np.full(len(names), np.nan)
    assert d.policy_command(names, nan).kind == "non_finite_command"
    assert d.policy_command(names, nan) is None
    at_limit = profile.upper_limits.copy()
    kinds = [d.policy_command(names, at_limit) for _ in range(4)]
    assert [k.kind if k else None for k in kinds] == [None, None, "saturation", None]
    assert d.policy_command(names, profile.default_positions) is None
    assert d.diagnostics_status("policy_runtime: policy", {"tick_latency_p99_ms": "25.0"}).kind == "latency_overrun"
    assert d.diagnostics_status("policy_runtime: policy", {"tick_latency_p99_ms": "26.0"}) is None
    assert d.stale(NS_PER_S, {"/joint_states": None}) is None  # never streamed
    assert d.stale(NS_PER_S, {"/joint_states": NS_PER_S // 2}).kind == "stale_sensor"
    assert "latency" in d.context() and d.context()["latency"]["policy_runtime"]["tick_latency_p99_ms"] == "26.0"


def test_collector_writes_the_window_as_a_rosbag2_bundle_that_rosbags_and_mcap_read(tmp_path):
    config = small_config()
    collector = FailureCollector(config, tmp_path, {"robot": "go2"})
    try:
        for k in range(300):  # 3 s at 100 Hz
            t = k * NS_PER_S // 100
            collector.record("/joint_states", t, joint_state_cdr(t, [k, 0.0]))
            if k == 200:
                name = collector.trigger(Trigger("manual", "test"), t)
                assert collector.trigger(Trigger("fall", "joins"), t + NS_PER_S // 10) == name  # within cooldown
            collector.poll(t)
        assert collector.wait_idle(20.0), collector.errors
    finally:
        collector.stop()
    (bundle,) = list_bundles(tmp_path)
    info = json.loads((bundle.path / "failure.json").read_text())
    assert info["reason"] == "test" and [t["kind"] for t in info["triggers"]] == ["manual", "fall"]
    assert info["robot"] == "go2" and info["window"]["start_ns"] == NS_PER_S
    assert bag_topics(bundle.path) == {"/joint_states": ("sensor_msgs/msg/JointState", 151)}
    stamps = [(t, msg.position[0]) for _, t, msg in read_bag(bundle.path)]
    assert stamps[0] == (NS_PER_S, 100.0) and stamps[-1] == (int(2.5 * NS_PER_S), 250.0)
    from mcap.reader import make_reader

    (mcap_file,) = bundle.path.glob("*.mcap")
    assert mcap_file.name == f"{bundle.name}.mcap"  # named as the bundle, not as its staging directory
    assert mcap_file.name in (bundle.path / "metadata.yaml").read_text()
    with open(mcap_file, "rb") as handle:
        reader = make_reader(handle)
        summary = reader.get_summary()
        assert {c.topic for c in summary.channels.values()} == {"/joint_states"}
        assert sum(summary.statistics.channel_message_counts.values()) == 151
        assert {s.encoding for s in summary.schemas.values()} == {"ros2msg"}


def test_a_crash_while_writing_leaves_no_bundle_visible_and_the_next_start_cleans_it(tmp_path):
    # A writer process killed mid-bag: only the hidden partial directory may remain.
    script = textwrap.dedent(f"""
        import time
        from sim2real.core.failure_bundle import write_bundle
        def messages():
            for k in range(1000):
                yield "/x", k, b"\\x00\\x01\\x00\\x00" + b"\\x00" * 8
                if k == 10:
                    print("writing", flush=True)
                    time.sleep(60)
        write_bundle({str(tmp_path)!r}, "b1", {{"/x": "std_msgs/msg/String"}}, messages(), {{"reason": "x"}})
    """)
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "writing"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    assert list_bundles(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == [STAGING_DIR]
    assert [p.name for p in (tmp_path / STAGING_DIR).iterdir()] == ["b1"]
    collector = FailureCollector(small_config(), tmp_path)
    collector.stop()
    assert collector.cleaned and list(tmp_path.iterdir()) == []


def test_quota_rotates_the_oldest_bundles(tmp_path):
    data = b"\x00\x01\x00\x00" + b"\x00" * 100_000
    for k in range(5):
        write_bundle(
            tmp_path, f"b{k}", {"/x": "std_msgs/msg/String"}, [("/x", k, data)] * 3, {"reason": "x", "time_ns": k}
        )
    sizes = [b.size_bytes() for b in list_bundles(tmp_path)]
    deleted = rotate(tmp_path, quota_bytes=int(sum(sizes[:2]) + 1000))
    assert [p.name for p in deleted] == ["b0", "b1", "b2"]
    assert [b.name for b in list_bundles(tmp_path)] == ["b3", "b4"]


def test_collector_applies_the_quota_after_each_bundle(tmp_path):
    config = small_config(quota_mb=0.8)  # each bundle ~0.36 MB: two fit
    collector = FailureCollector(config, tmp_path)
    try:
        t = 0
        for event in range(4):
            for _ in range(100):
                t += NS_PER_S // 100
                collector.record("/joint_states", t, joint_state_cdr(t, np.zeros(200)))
            collector.trigger(Trigger("manual", f"event {event}"), t - NS_PER_S)
            collector.poll(t)
            assert collector.wait_idle(20.0), collector.errors
    finally:
        collector.stop()
    bundles = list_bundles(tmp_path)
    assert len(bundles) < 4 and bundles[-1].info["reason"] == "event 3"
    assert sum(b.size_bytes() for b in bundles) <= 0.8 * 1024 * 1024


@pytest.mark.parametrize("frame_id", ["", "imu", "base_imu_link", "a" * 13])
def test_imu_orientation_is_read_in_place_from_the_cdr_bytes(frame_id):
    store = typestore()
    Imu = store.types["sensor_msgs/msg/Imu"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    Quaternion, Vector3 = store.types["geometry_msgs/msg/Quaternion"], store.types["geometry_msgs/msg/Vector3"]
    q = (0.1, -0.2, 0.3, math.sqrt(1 - 0.14))
    msg = Imu(
        header=Header(stamp=Time(sec=3, nanosec=7), frame_id=frame_id),
        orientation=Quaternion(x=q[0], y=q[1], z=q[2], w=q[3]),
        orientation_covariance=np.zeros(9),
        angular_velocity=Vector3(x=1, y=2, z=3),
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=Vector3(x=4, y=5, z=6),
        linear_acceleration_covariance=np.zeros(9),
    )
    data = bytes(store.serialize_cdr(msg, "sensor_msgs/msg/Imu"))
    assert imu_orientation(data) == pytest.approx(q)
    assert imu_orientation(b"\x00\x00" + data[2:]) is None  # big-endian: the caller deserializes


def test_receive_times_map_onto_a_sim_clock_between_two_drains():
    # Sim time ran 0.5 s while 1 s of wall time passed between the drains.
    to_sim = wall_to_clock((10 * NS_PER_S, 100 * NS_PER_S), 11 * NS_PER_S, 100 * NS_PER_S + NS_PER_S // 2)
    assert to_sim(10 * NS_PER_S + NS_PER_S // 2) == 100 * NS_PER_S + NS_PER_S // 4
    assert to_sim(9 * NS_PER_S) == 100 * NS_PER_S  # received before the previous drain
    assert to_sim(12 * NS_PER_S) == 100 * NS_PER_S + NS_PER_S // 2  # never past the clock's now
    assert wall_to_clock(None, 11 * NS_PER_S, 7)(10 * NS_PER_S) == 7  # first drain: the clock's now


@pytest.mark.parametrize("frame_id", ["", "base", "a" * 13])
def test_trigger_fields_are_read_in_place_from_the_cdr_bytes(frame_id):
    store = typestore()
    T = store.types
    header = T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=3, nanosec=7), frame_id=frame_id)
    KeyValue, Status = T["diagnostic_msgs/msg/KeyValue"], T["diagnostic_msgs/msg/DiagnosticStatus"]
    array = T["diagnostic_msgs/msg/DiagnosticArray"](
        header=header,
        status=[
            Status(
                level=2,
                name="safety_supervisor: mode",
                message="DAMPING",
                hardware_id="go2",
                values=[KeyValue(key="mode", value="DAMPING"), KeyValue(key="check/base_tilt", value="")],
            ),
            Status(level=0, name="x", message="", hardware_id="", values=[]),
        ],
    )
    data = bytes(store.serialize_cdr(array, "diagnostic_msgs/msg/DiagnosticArray"))
    assert diagnostic_statuses(data) == [
        ("safety_supervisor: mode", "DAMPING", {"mode": "DAMPING", "check/base_tilt": ""}),
        ("x", "", {}),
    ]
    assert diagnostic_statuses(data[:-3]) is None  # truncated: the caller deserializes
    position = [0.5, math.nan, -1.25]
    state = T["sensor_msgs/msg/JointState"](
        header=header, name=["a", "bb", "ccc"], position=np.asarray(position), velocity=np.zeros(3), effort=np.zeros(0)
    )
    names, q = joint_state_positions(bytes(store.serialize_cdr(state, "sensor_msgs/msg/JointState")))
    assert names == list(state.name)
    np.testing.assert_array_equal(q, state.position)


def test_a_disk_below_min_free_is_made_room_on_before_the_write_and_a_failed_write_leaves_nothing(
    tmp_path, monkeypatch
):
    """On a full disk rotation frees space before the write: were it to run only after a
    successful write, the old bundles would stay and every later bundle fail too."""
    import shutil as shutil_module

    from sim2real.core import failure_bundle

    data = b"\x00\x01\x00\x00" + b"\x00" * 100_000
    for k in range(3):
        write_bundle(
            tmp_path,
            f"2026113{k}T000000.000Z_old",
            {"/x": "std_msgs/msg/String"},
            [("/x", k, data)],
            {"reason": "x", "time_ns": k},
        )
    collector = FailureCollector(small_config(min_free_mb=1), tmp_path)
    real_usage = shutil_module.disk_usage
    held = lambda: sum(b.size_bytes() for b in list_bundles(tmp_path))  # noqa: E731

    def usage(path):  # a disk whose free space is what the bundles leave of 1.2 MB
        total, used, _ = real_usage(path)
        return type(real_usage(path))(total, used, max(0, int(1.2 * 1024 * 1024) - held()))

    monkeypatch.setattr(failure_bundle.shutil, "disk_usage", usage)
    try:
        t = 0
        for _ in range(100):
            t += NS_PER_S // 100
            collector.record("/joint_states", t, joint_state_cdr(t, np.zeros(200)))
        collector.trigger(Trigger("manual", "on a nearly full disk"), t - NS_PER_S)
        collector.poll(t)
        assert collector.wait_idle(20.0)
    finally:
        collector.stop()
    names = [b.name for b in list_bundles(tmp_path)]
    assert not collector.errors and "20261130T000000.000Z_old" not in names and names[-1].endswith("_manual")

    def failing_write(*args, **kwargs):
        partial_path(tmp_path, "x").mkdir(parents=True)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("sim2real.core.failure_capture.write_bundle", failing_write)
    collector = FailureCollector(small_config(), tmp_path)
    try:
        collector.record("/joint_states", t + NS_PER_S, joint_state_cdr(t + NS_PER_S, np.zeros(200)))
        collector.trigger(Trigger("manual", "disk full"), t + NS_PER_S)
        collector.poll(t + 3 * NS_PER_S)
        assert collector.wait_idle(20.0)
    finally:
        collector.stop()
    assert "No space left on device" in collector.errors[0]
    assert not (tmp_path / STAGING_DIR).exists()


def test_a_malformed_policy_command_is_no_trigger_and_no_crash():
    detector = FailureDetector(
        small_config(triggers={"saturation_streak": 3, "stale_topics": []}).triggers,
        ["a", "b"],
        np.array([-1.0, -2.0]),
        np.array([1.0, 2.0]),
    )
    detector.safety_status("ACTIVE", {"trips": "0"})  # engaged: saturation counts
    assert detector.policy_command(["a", "b"], [0.0]) is None
    # ... and the detector still works: three commands at a limit are a saturation streak, also
    # when the next command names the joints in another order.
    assert detector.policy_command(["a", "b"], [1.0, 0.0]) is None
    assert detector.policy_command(["a", "b"], [1.0, 0.0]) is None
    trigger = detector.policy_command(["b", "a"], [0.0, 1.0])
    assert trigger is not None and trigger.kind == "saturation" and "(a)" in trigger.reason


def test_a_hold_trip_writes_a_bundle_and_an_operators_takeover_does_not():
    """Fault matrix case 9: a killed policy runtime makes the supervisor hold (TAKEOVER, with a
    config that holds a silent policy, as the Panda's), which writes a bundle; an operator taking
    over is no failure."""
    profile = load_profile("go2")
    d = FailureDetector(TriggerConfig(), profile.joint_names, profile.lower_limits, profile.upper_limits)
    d.safety_status("ACTIVE", {"trips": "0", "last_trip": "none"})
    assert d.safety_status("TAKEOVER", {"trips": "0", "last_trip": "none"}) is None  # the operator's
    d.safety_status("ACTIVE", {"trips": "0", "last_trip": "none"})
    dead = "ACTIVE -> TAKEOVER: policy_stale: no /policy/joint_commands for 0.102 s (deadline 0.100 s)"
    fired = d.safety_status("TAKEOVER", {"trips": "1", "last_trip": dead})
    assert fired.kind == "supervisor_takeover" and "policy_stale" in fired.reason
    d.safety_status("ACTIVE", {"trips": "1", "last_trip": dead})
    assert d.safety_status("TAKEOVER", {"trips": "1", "last_trip": dead}) is None  # the operator's again


def test_an_operators_stop_is_not_labelled_with_an_older_trip():
    """After a trip and a reset, the operator damps: the bundle's reason says so, instead of
    repeating the last trip (still in /safety/status) as if the checks had fired again."""
    profile = load_profile("go2")
    d = FailureDetector(TriggerConfig(), profile.joint_names, profile.lower_limits, profile.upper_limits)
    stale = "STANDBY -> DAMPING: joint_states_stale: no /joint_states for 0.059 s (deadline 0.050 s)"
    d.safety_status("STANDBY", {"trips": "0", "last_trip": "none"})
    assert "joint_states_stale" in d.safety_status("DAMPING", {"trips": "1", "last_trip": stale}).reason
    d.safety_status("STANDBY", {"trips": "1", "last_trip": stale})  # reset
    fired = d.safety_status("DAMPING", {"trips": "1", "last_trip": stale})  # ~/damp
    assert fired.kind == "supervisor_damping"
    assert fired.reason.startswith("supervisor STANDBY -> DAMPING: an operator's request (no trip")


def test_a_fault_present_when_the_collector_starts_is_a_failure():
    """Discovery takes seconds: a supervisor already in DAMPING (or ESTOP, or a hold trip's
    TAKEOVER) in the first status seen is a failure, not the start of an edge."""
    profile = load_profile("go2")
    for mode, last_trip in (
        ("DAMPING", "STANDBY -> DAMPING: joint_states_stale: no /joint_states for 0.2 s"),
        ("ESTOP", "ACTIVE -> ESTOP: base_tilt: 61 deg"),
        ("TAKEOVER", "ACTIVE -> TAKEOVER: policy_stale: no /policy/joint_commands"),
    ):
        d = FailureDetector(TriggerConfig(), profile.joint_names, profile.lower_limits, profile.upper_limits)
        fired = d.safety_status(mode, {"trips": "1", "last_trip": last_trip})
        assert fired is not None and fired.kind == f"supervisor_{mode.lower()}"
        assert f"already in {mode}" in fired.reason and last_trip in fired.reason
        assert d.safety_status(mode, {"trips": "1", "last_trip": last_trip}) is None  # once
    d = FailureDetector(TriggerConfig())
    assert d.safety_status("STANDBY", {"trips": "0", "last_trip": ""}) is None
    d = FailureDetector(TriggerConfig())
    assert d.safety_status("TAKEOVER", {"trips": "0", "last_trip": ""}) is None  # an operator's takeover


def test_start_up_noise_is_no_failure_until_the_robot_is_engaged():
    """Latency, saturation and falls before the first engage are start-up, not failures
    (unless before_engage); a NaN command and a sensor that stops are always ones."""
    profile = load_profile("go2")
    triggers = TriggerConfig(saturation_streak=1)
    d = FailureDetector(triggers, profile.joint_names, profile.lower_limits, profile.upper_limits)
    d.safety_status("STANDBY", {"trips": "0"})
    slow = {"tick_latency_p99_ms": "40.0"}
    assert d.diagnostics_status("policy_runtime: policy", slow) is None
    assert d.imu((1.0, 0.0, 0.0, 0.0)) is None  # upside down while standing up
    assert d.policy_command(profile.joint_names, profile.upper_limits) is None
    assert d.stale(10 * NS_PER_S, {"/joint_states": 0}).kind == "stale_sensor"
    nan = [float("nan")] * len(profile.joint_names)
    assert d.policy_command(profile.joint_names, nan).kind == "non_finite_command"
    d.safety_status("ACTIVE", {"trips": "0"})
    # A condition that lasts past the engage is reported once, at its next sample.
    assert d.diagnostics_status("policy_runtime: policy", slow).kind == "latency_overrun"
    assert d.diagnostics_status("policy_runtime: policy", slow) is None
    eager = FailureDetector(TriggerConfig(before_engage=True))
    eager.safety_status("STANDBY", {"trips": "0"})
    assert eager.diagnostics_status("policy_runtime: policy", slow).kind == "latency_overrun"


def test_a_silent_command_stream_is_a_stale_command_and_the_first_stream_to_stop_names_the_event():
    """The supervisor commands every period once it has a state: its silence is its death (or the
    composed chain's). Of two streams gone silent, the one that stopped first is the cause, and
    its trigger comes first (the bundle takes its name)."""
    profile = load_profile("go2")
    config = TriggerConfig(stale_s=0.2, stale_topics=("/joint_states",), stale_commands=("/joint_commands",))
    d = FailureDetector(config, profile.joint_names, profile.lower_limits, profile.upper_limits)
    assert d.stale(NS_PER_S, {"/joint_states": NS_PER_S, "/joint_commands": None}) is None  # never flowed
    died = d.stale(NS_PER_S, {"/joint_states": NS_PER_S, "/joint_commands": NS_PER_S // 2})
    assert died.kind == "stale_command" and "/joint_commands silent for 0.50 s" in died.reason
    assert "safety supervisor" in died.reason and "only the driver's own command timeout" in died.reason
    assert d.stale(NS_PER_S, {"/joint_states": NS_PER_S, "/joint_commands": NS_PER_S // 2}) is None  # once
    for driver_stopped, supervisor_stopped, order in (
        (0, NS_PER_S // 10, ["stale_sensor", "stale_command"]),
        (NS_PER_S // 10, 0, ["stale_command", "stale_sensor"]),
    ):
        both = FailureDetector(config, profile.joint_names, profile.lower_limits, profile.upper_limits)
        silent = {"/joint_states": driver_stopped, "/joint_commands": supervisor_stopped}
        assert [both.stale(NS_PER_S, silent).kind, both.stale(NS_PER_S, silent).kind] == order
        assert both.stale(NS_PER_S, silent) is None


def test_stale_commands_default_to_the_buffered_supervisor_commands():
    assert load_failure_config("default").triggers.stale_commands == ("/joint_commands",)
    assert small_config().triggers.stale_commands == ()  # /joint_commands not buffered: not watched
    with pytest.raises(FailureConfigError, match=r"triggers.stale_commands: \['/joint_commands'\] are not buffered"):
        small_config(triggers={"stale_topics": [], "stale_commands": ["/joint_commands"]})


def test_trigger_fields_of_bytes_that_are_no_message_are_nothing_to_judge():
    """A message the in-place reader cannot read goes to rclpy; bytes rclpy cannot read either
    are recorded as they came and judged as nothing, never raised in the collector's poll."""
    from sim2real.nodes.failure_collector import _statuses

    assert _statuses(b"\x00\x01\x00\x00" + b"\xff" * 12) == []
    assert _statuses(b"") == []
