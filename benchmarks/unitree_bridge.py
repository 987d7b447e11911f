#!/usr/bin/env python3
"""What unitree_bridge adds to the Go2's control path, beside a bare relay doing the same hop.

Two paths, each timed end to end from this process (same clock):
- state: LowState written on rt/lowstate -> /joint_states received here;
- command: /joint_commands published here -> LowCmd received on rt/lowcmd.
Through ``unitree_bridge`` (a real node process: CRC check, joint mapping, IMU and /joy, the
damping/preflight logic), and through a bare relay process that does only the hop (cyclonedds
take -> rclpy publish of a JointState; rclpy callback -> the bridge's sealed frame written, and
that frame resent with every LowState, as any Go2 low-level writer sends LowCmd at the robot's
rate): the floor of a Python DDS<->ROS hop on this machine. Printed: p50/p99 of both, the bridge's excess over the
relay, and each process's CPU for the 500 Hz stream. Segments alternate bridge, relay, bridge,
relay so machine noise falls on both.

    ROS_DOMAIN_ID=57 .venv/bin/python benchmarks/unitree_bridge.py --seconds 5
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np

from _graph import cpu_seconds  # benchmarks/_graph.py

RATE_HZ = 500.0
SEGMENTS = ("bridge", "relay", "bridge", "relay")  # alternating, so machine noise falls on both


def relay_main(domain: int) -> int:
    """The bare relay: the same two hops as the bridge, nothing else."""
    import rclpy
    from sensor_msgs.msg import JointState

    from sim2real.core.joint_command import JointTargets
    from sim2real.core.robot_profile import load_profile
    from sim2real.core.unitree.dds import UnitreeDds
    from sim2real.core.unitree.frames import flat_indices
    from sim2real.core.unitree.low_level import Go2LowLevel
    from sim2real.core.unitree.messages import LowState_
    from sim2real.nodes import qos

    profile = load_profile("go2")
    slots = profile.unitree.slots(profile.joint_names)
    rclpy.init()
    node = rclpy.create_node("bare_relay")
    dds = UnitreeDds(domain, "lo")
    publisher = node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)

    low_level = Go2LowLevel(profile)

    newest = [None]  # the frame last commanded, resent with every LowState as the bridge does

    def on_command(msg: JointState) -> None:  # the bridge's own frame path, without its checks
        newest[0] = frame = low_level.command_frame(JointTargets.positions(msg.position))
        dds.write_frame(frame)

    node.create_subscription(JointState, "/joint_commands", on_command, qos.COMMAND)
    stop = threading.Event()

    q_at = [flat_indices(LowState_)["motor_state.q"][s] for s in slots]

    def states() -> None:
        while not stop.is_set():
            for values in dds.take_state_values(0.1):  # the bridge's own take, without the checks
                publisher.publish(JointState(name=profile.joint_names, position=[values[i] for i in q_at]))
                if newest[0] is not None:  # a Go2 takes LowCmd at its LowState rate
                    dds.write_frame(newest[0])

    reader = threading.Thread(target=states, daemon=True)
    reader.start()
    try:
        rclpy.spin(node)
    except KeyboardInterrupt:
        pass
    stop.set()
    reader.join(timeout=1.0)  # out of cyclonedds before the interpreter tears it down
    return 0


def segment(kind: str, domain: int, seconds: float, node, state_times: list) -> dict:
    """Run one process (bridge or relay) and stream through it for ``seconds``."""
    from sensor_msgs.msg import JointState

    from sim2real.core.robot_profile import load_profile
    from sim2real.core.unitree.dds import UnitreeDds
    from sim2real.core.unitree.frames import flat_indices, flat_values, seal_state
    from sim2real.core.unitree.messages import LowCmd_, LowState_
    from sim2real.nodes import qos
    from sim2real.sim.go2_double import BATTERY_V

    profile = load_profile("go2")
    slots = profile.unitree.slots(profile.joint_names)
    if kind == "bridge":
        args = [
            sys.executable,
            "-m",
            "sim2real.nodes.unitree_bridge",
            "--ros-args",
            "-p",
            "network_interface:=lo",
            "-p",
            f"unitree_domain:={domain}",
            "-p",
            "command_writer:=''",
        ]
    else:
        args = [sys.executable, __file__, "--relay", str(domain)]
    log = open(f"/tmp/unitree_bridge_benchmark_{kind}.log", "w")
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    dds = UnitreeDds(domain, "lo", role="robot")
    commands = node.create_publisher(JointState, "/joint_commands", qos.COMMAND)
    state_times.clear()
    sent_states, sent_commands = {}, {}
    state_lat, command_lat = [], []

    # The robot's side reads only the field it times: the bridge resends its newest frame with
    # every LowState (500 Hz, as a robot needs), the relay writes one per command (50 Hz), and
    # building 500 LowCmd_ objects a second here would load this process in the bridge's segments.
    q_at = flat_indices(LowCmd_)["motor_cmd.q"][slots[0]]

    def collect_commands(stop):
        while not stop.is_set():
            for payload in dds.take_payloads(0.05):
                key = round((flat_values(LowCmd_, payload)[q_at] - profile.default_positions[0]) * 1e5)
                if key in sent_commands:
                    command_lat.append(time.perf_counter() - sent_commands.pop(key))

    stop = threading.Event()
    threading.Thread(target=collect_commands, args=(stop,), daemon=True).start()
    start = time.perf_counter()
    warmup = 3.0  # discovery, and the bridge's one-second preflight
    n = 0
    cpu_start = None
    while time.perf_counter() - start < warmup + seconds:
        now = time.perf_counter()
        if cpu_start is None and now - start >= warmup:
            cpu_start, wall_start = cpu_seconds(process.pid), now
            state_lat.clear()
            command_lat.clear()
        n += 1
        msg = LowState_(head=[0xFE, 0xEF], level_flag=0xFF, tick=n, power_v=BATTERY_V)
        msg.imu_state.quaternion = [1.0, 0.0, 0.0, 0.0]
        key = n % 10000
        for slot, q in zip(slots, profile.default_positions):
            msg.motor_state[slot].q = float(q)
            msg.motor_state[slot].temperature = 40
        msg.motor_state[slots[0]].q = float(profile.default_positions[0] + key * 1e-5)
        sent_states[key] = time.perf_counter()
        dds.write(seal_state(msg))
        if n % 10 == 0:  # the supervisor's 50 Hz
            q = profile.default_positions.copy()
            q[0] += key * 1e-5
            sent_commands[key] = time.perf_counter()
            commands.publish(JointState(name=profile.joint_names, position=q.tolist()))
        for arrival, value in state_times[:]:
            k = round((value - profile.default_positions[0]) * 1e5)
            if k in sent_states:
                state_lat.append(arrival - sent_states.pop(k))
        state_times.clear()
        time.sleep(max(0.0, 1.0 / RATE_HZ - (time.perf_counter() - now)))
    cpu = (cpu_seconds(process.pid) - cpu_start) / (time.perf_counter() - wall_start)
    stop.set()
    process.send_signal(signal.SIGINT)  # as Ctrl-C: both end their spin on it
    process.wait(timeout=10)
    node.destroy_publisher(commands)
    return {"state": np.array(state_lat) * 1e3, "command": np.array(command_lat) * 1e3, "cpu": cpu}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0, help="measured s per segment (4 segments)")
    parser.add_argument("--relay", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.relay is not None:
        return relay_main(args.relay)
    import rclpy
    import rclpy.executors
    from sensor_msgs.msg import JointState

    from sim2real.nodes import qos

    domain = 100 + int(os.environ.get("ROS_DOMAIN_ID", "0")) % 100
    rclpy.init()
    node = rclpy.create_node("unitree_bridge_benchmark")
    arrivals: list = []
    node.create_subscription(
        JointState,
        "/joint_states",
        lambda m: arrivals.append((time.perf_counter(), m.position[0])),
        qos.SENSOR_SUBSCRIBE,
    )
    executor = rclpy.executors.SingleThreadedExecutor()
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        segments = []
        for kind in SEGMENTS:
            segments.append(segment(kind, domain, args.seconds, node, arrivals))
            done = segments[-1]
            print(f"  {kind}: {len(done['state'])} states, {len(done['command'])} commands", file=sys.stderr)
        report(args.seconds, segments)
    finally:
        executor.shutdown()  # the spin thread out of rclpy before the context goes (else a C++ abort)
        spinner.join(timeout=5.0)
        node.destroy_node()
        rclpy.shutdown()
    return 0


def report(seconds: float, segments: list[dict]) -> None:
    """The table: each path through the bridge and the relay, and what the bridge adds."""
    results = {kind: [r for k, r in zip(SEGMENTS, segments) if k == kind] for kind in ("bridge", "relay")}
    each = seconds * SEGMENTS.count("bridge")
    print(f"unitree_bridge vs a bare relay, {RATE_HZ:.0f} Hz LowState, 50 Hz commands, {each:g} s each")
    print(f"{'path':10s} {'bridge p50/p99 ms':>18s} {'relay p50/p99 ms':>18s} {'added p50/p99 ms':>18s}")
    for path in ("state", "command"):
        b = np.concatenate([r[path] for r in results["bridge"]])
        r = np.concatenate([r[path] for r in results["relay"]])
        bp, rp = np.percentile(b, [50, 99]), np.percentile(r, [50, 99])
        print(
            f"{path:10s} {bp[0]:8.3f} / {bp[1]:7.3f} {rp[0]:8.3f} / {rp[1]:7.3f} {bp[0] - rp[0]:8.3f} / "
            f"{bp[1] - rp[1]:7.3f}"
        )
    cpu_b = np.mean([r["cpu"] for r in results["bridge"]])
    cpu_r = np.mean([r["cpu"] for r in results["relay"]])
    print(f"CPU: bridge {cpu_b * 100:.0f} % of a core, relay {cpu_r * 100:.0f} % ({cpu_b / cpu_r:.2f}x)")


if __name__ == "__main__":
    raise SystemExit(main())
