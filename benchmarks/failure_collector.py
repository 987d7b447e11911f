#!/usr/bin/env python3
"""failure_collector: CPU, messages lost at 500 Hz sensing, and trigger-to-bundle time.

A feeder process publishes the robot's topics of config/failures/default.yaml at robot rates:
/joint_states and /imu/data at 500 Hz (Go2: 12 joints), /joint_commands,
/policy/joint_commands and /safety/status at 50 Hz, /diagnostics at 1 Hz. The collector
runs as its own process, exactly as `sim2real up` starts it. Measured:

  CPU       the collector process's user+system time over the measuring window, as % of one core;
            also over the part before the snapshot (buffering only, no bundle being written)
  floor     the same for a bare process subscribed to the same topics with the same QoS that
            never takes a message: the cost of DDS receiving the stream, paid by any subscriber
  lost      per topic: published by the feeder after the collector matched it, minus what the
            collector's /diagnostics says it received (targets: CPU < 5 %, none lost)
  bundle    ~/snapshot (called mid-stream) -> the bundle's directory appears; minus
            post_event_s (the collector waits that long on purpose) this is the write time
            of a full 7 s bundle of every topic

The load average is printed: on a shared 2-core machine other work inflates every figure,
so compare collectors side by side in one invocation: --against GIT_REF runs the node file
of that commit too, alternating with the current one, --rounds times.

    .venv/bin/python benchmarks/failure_collector.py --seconds 20
    .venv/bin/python benchmarks/failure_collector.py --seconds 20 --against eadfc4e --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import yaml

from _graph import cpu_seconds  # benchmarks/_graph.py
from sim2real.core.failure_bundle import list_bundles
from sim2real.core.failure_config import load_failure_config
from sim2real.nodes.dds_transport import set_graph_transport

FEEDER = textwrap.dedent("""
    import json, sys, time
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from sensor_msgs.msg import Imu, JointState
    from sim2real.core.robot_profile import load_profile
    from sim2real.nodes import qos

    seconds = float(sys.argv[1])
    rclpy.init()
    node = rclpy.create_node("feeder")
    profile = load_profile("go2")
    names = list(profile.joint_names)
    pubs = {
        "/joint_states": node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH),
        "/imu/data": node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH),
        "/joint_commands": node.create_publisher(JointState, "/joint_commands", qos.COMMAND),
        "/policy/joint_commands": node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND),
        "/safety/status": node.create_publisher(DiagnosticArray, "/safety/status", 10),
        "/diagnostics": node.create_publisher(DiagnosticArray, "/diagnostics", 10),
    }
    deadline = time.monotonic() + 30
    while any(p.get_subscription_count() == 0 for p in pubs.values()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    print("matched", flush=True)
    sent = {t: 0 for t in pubs}
    state = JointState(name=names, position=[0.1] * 12, velocity=[0.0] * 12, effort=[0.0] * 12)
    imu = Imu()
    imu.orientation.w = 1.0
    status = DiagnosticArray(status=[DiagnosticStatus(name="safety_supervisor: mode", message="ACTIVE",
                                                      values=[KeyValue(key="mode", value="ACTIVE")])])
    diag = DiagnosticArray(status=[DiagnosticStatus(name="sim_robot: sensing loop", message="ok")])
    period, k = 0.002, 0
    start = time.monotonic()
    next_t = start
    while time.monotonic() - start < seconds:
        now = node.get_clock().now().to_msg()
        state.header.stamp = imu.header.stamp = now
        for topic, msg in (("/joint_states", state), ("/imu/data", imu)):
            pubs[topic].publish(msg); sent[topic] += 1
        if k % 10 == 0:
            for topic, msg in (("/joint_commands", state), ("/policy/joint_commands", state),
                               ("/safety/status", status)):
                pubs[topic].publish(msg); sent[topic] += 1
        if k % 500 == 0:
            pubs["/diagnostics"].publish(diag); sent["/diagnostics"] += 1
        k += 1
        next_t += period
        delay = next_t - time.monotonic()
        if delay > 0:
            time.sleep(delay)
    elapsed = time.monotonic() - start
    print(json.dumps({"sent": sent, "elapsed": elapsed}), flush=True)
    node.destroy_node()
    rclpy.shutdown()
""")

LISTENER = textwrap.dedent("""
    import json, sys, time
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from std_srvs.srv import Trigger
    rclpy.init()
    node = rclpy.create_node("bench_listener")
    latest = {}
    def on_diag(msg):
        for s in msg.status:
            if s.name.startswith("failure_collector"):
                latest.update({kv.key: kv.value for kv in s.values})
    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 10)
    mode = sys.argv[1]
    if mode == "snapshot":
        client = node.create_client(Trigger, "/failure_collector/snapshot")
        client.wait_for_service(timeout_sec=10)
        t0 = time.time()
        future = client.call_async(Trigger.Request())
        rclpy.spin_until_future_complete(node, future, timeout_sec=10)
        print(json.dumps({"called_at": t0, "answered_at": time.time(), "message": future.result().message}))
    else:
        # The feeder has stopped: any status from now on carries the final counts. Wait for
        # one (discovery on a loaded machine can take seconds), not for a fixed time.
        end = time.monotonic() + 20.0
        while not latest and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        print(json.dumps(latest))
    node.destroy_node()
    rclpy.shutdown()
""")


# The floor: a process that only subscribes, raw and with the collector's QoS, to the same
# topics and never takes a message. What it costs is DDS receiving the stream (Fast DDS's
# shared-memory listener thread wakes for every message), which any subscriber pays,
# whatever language it is written in; the collector's own work is what it costs above this.
FLOOR = textwrap.dedent("""
    import time
    import rclpy
    from sim2real.core.failure_config import load_failure_config
    from sim2real.nodes.failure_collector import RECORD_QOS, message_class
    from sim2real.nodes.polled import never_called
    rclpy.init()
    node = rclpy.create_node("dds_floor")
    subscriptions = [node.create_subscription(message_class(t.msgtype), t.topic, never_called, RECORD_QOS, raw=True)
                     for t in load_failure_config("default").topics]
    while rclpy.ok():  # rclpy turns SIGTERM into a shutdown of its context
        time.sleep(0.2)
""")


def measure(command: list[str], seconds: float, env: dict, config) -> dict:
    """One run: the collector started by ``command`` (plus its ROS arguments) under the feeder."""
    with tempfile.TemporaryDirectory(prefix="failure-bench-") as tmp:
        out = Path(tmp) / "bundles"
        params = Path(tmp) / "params.yaml"
        params.write_text(
            yaml.safe_dump({"/**": {"ros__parameters": {"robot": "go2", "output_dir": str(out), "conditions": "{}"}}})
        )
        collector = subprocess.Popen(
            command + ["--ros-args", "-r", "__node:=failure_collector", "--params-file", str(params)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        floor = subprocess.Popen(
            [sys.executable, "-c", FLOOR], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        try:
            time.sleep(3.0)
            feeder = subprocess.Popen(
                [sys.executable, "-c", FEEDER, str(seconds)], env=env, stdout=subprocess.PIPE, text=True
            )
            assert feeder.stdout.readline().strip() == "matched", "the feeder never matched the collector"
            cpu0, floor0, wall0 = cpu_seconds(collector.pid), cpu_seconds(floor.pid), time.monotonic()
            # Mid-stream, with a full pre-event window: the bundle is written while sensing goes on.
            time.sleep(min(config.pre_event_s + 1.0, seconds / 2))
            cpu_buffering, wall_buffering = cpu_seconds(collector.pid) - cpu0, time.monotonic() - wall0
            snapshotter = subprocess.Popen(
                [sys.executable, "-c", LISTENER, "snapshot"], env=env, stdout=subprocess.PIPE, text=True
            )
            result = json.loads(feeder.stdout.readline())
            cpu1, floor1, wall1 = cpu_seconds(collector.pid), cpu_seconds(floor.pid), time.monotonic()
            feeder.wait(timeout=10)
            snapshot = json.loads(snapshotter.communicate(timeout=60)[0])
            time.sleep(1.5)  # the collector's 1 Hz /diagnostics reports the final counts
            received = json.loads(
                subprocess.run(
                    [sys.executable, "-c", LISTENER, "count"], env=env, capture_output=True, text=True, timeout=60
                ).stdout
            )
            called = snapshot["called_at"]
            bundle_s = None
            for bundle in list_bundles(out):
                if snapshot["message"].endswith(bundle.name):
                    # The directory's mtime: the rename that published it.
                    bundle_s = bundle.path.stat().st_mtime - called
                    size = bundle.size_bytes()
        finally:
            for process in (collector, floor):
                process.terminate()
                process.wait(timeout=10)
    cpu_pct = 100.0 * (cpu1 - cpu0) / (wall1 - wall0)
    # /diagnostics also carries the collector's own status, which it records too: not a loss.
    lost = {t: max(0, n - int(received.get(f"received{t}", 0))) for t, n in result["sent"].items()}
    return {
        "seconds": round(result["elapsed"], 2),
        "sent": result["sent"],
        "lost": lost,
        "sensing_hz": round(result["sent"]["/joint_states"] / result["elapsed"], 1),
        "collector_cpu_percent_of_one_core": round(cpu_pct, 2),
        "buffering_cpu_percent_of_one_core": round(100.0 * cpu_buffering / wall_buffering, 2),
        "dds_floor_cpu_percent_of_one_core": round(100.0 * (floor1 - floor0) / (wall1 - wall0), 2),
        "snapshot_to_bundle_s": None if bundle_s is None else round(bundle_s, 3),
        "write_s": None if bundle_s is None else round(bundle_s - config.post_event_s, 3),
        "bundle_mb": None if bundle_s is None else round(size / 1e6, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0, help="publishing time at 500 Hz")
    parser.add_argument(
        "--against",
        metavar="GIT_REF",
        help="also run the collector node as it is at this git commit, alternating with "
        "the current one (a before/after under the same load)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each collector")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--domain", type=int, default=77, help="ROS_DOMAIN_ID for the benchmark's processes")
    args = parser.parse_args()
    config = load_failure_config("default")
    # A domain of its own: other graphs on this machine (tests, demos) must not feed the collector.
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
        "ROS_DOMAIN_ID": str(args.domain),
    }
    set_graph_transport(env)  # the floor and feeder on the collector's own DDS transport
    collectors = {"current": [sys.executable, "-m", "sim2real.nodes.failure_collector"]}
    with tempfile.TemporaryDirectory(prefix="failure-bench-ref-") as tmp:
        if args.against:
            # The node file at that commit, run against today's core (the ring buffers and
            # writer are the same): only the node's way of receiving differs.
            old = Path(tmp) / "failure_collector_ref.py"
            root = Path(__file__).resolve().parent.parent
            source = subprocess.run(
                ["git", "show", f"{args.against}:src/sim2real/nodes/failure_collector.py"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            # The core module it imports has since been renamed.
            old.write_text(source.replace("sim2real.core.failure_collector", "sim2real.core.failure_capture"))
            collectors = {args.against: [sys.executable, str(old)], **collectors}
        runs = [
            (name, measure(command, args.seconds, env, config))
            for _ in range(args.rounds)
            for name, command in collectors.items()
        ]
    if args.json:
        print(json.dumps([{"collector": name, **report} for name, report in runs], indent=2))
        return 0
    for name, report in runs:
        sent, lost = report["sent"], report["lost"]
        print(
            f"[{name}] feeder: {report['seconds']} s at {report['sensing_hz']} Hz sensing (/joint_states, "
            f"/imu/data), 50 Hz commands and status, 1 Hz diagnostics"
        )
        print(
            f"[{name}] collector CPU: {report['collector_cpu_percent_of_one_core']} % of one core (target < 5 %), "
            f"{report['buffering_cpu_percent_of_one_core']} % while only buffering (before the snapshot's write)"
        )
        print(
            f"[{name}] DDS floor: {report['dds_floor_cpu_percent_of_one_core']} % of one core for a process that "
            "only subscribes to the same topics (never takes a message); the collector's own work is the rest"
        )
        print(
            f"[{name}] messages lost (target none): {sum(lost.values())} of {sum(sent.values())}: "
            + ", ".join(f"{t} {n} of {sent[t]}" for t, n in lost.items())
        )
        print(
            f"[{name}] ~/snapshot -> bundle on disk: {report['snapshot_to_bundle_s']} s (post_event_s "
            f"{config.post_event_s:g} s by design + {report['write_s']} s writing {report['bundle_mb']} MB)"
        )
        print(f"[{name}] load average {report['load_average']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
