#!/usr/bin/env python3
"""Policy tick latency, observation in -> command out, from the bare ONNX call to the ROS graph.

The policy is an MLP of the size that ships for the Go2 (47 -> 512-256-128 -> 12, ELU), in
a sim2real policy file. Rows, from the inside out:

  onnxruntime          session.run on one observation: the floor
  PolicyFile.act       the same call through the policy file wrapper
  core tick            RobotInputs -> observation -> onnxruntime -> joint targets
                       (sim2real.core.policy_tick), no ROS
  node tick, direct    the runtime node's /joint_states callback called in a loop: message in,
                       command published (the node's CPU cost, no executor, no waiting)
  in-process graph     a feeder publishing /joint_states + /imu/data at 500 Hz, the runtime
                       node and a listener in ONE process (three DDS participants, one GIL);
                       per rclpy executor of the runtime node:
                         node tick: from its /joint_states callback to the published command
                         stamp -> received: from the state's stamp to the listener's callback
  across nodes         sim_robot (500 Hz, real time), safety_supervisor and policy_runtime as
                       processes, as `sim2real up` runs them (executor chosen by the node's
                       `executor` parameter); the listener here: from the state's stamp (taken
                       when sim_robot published it) to the command's arrival. Each node's CPU
                       (% of one core over the measured window) is printed with the row.
                       With --hardware topic, a driver double (a process speaking the hardware
                       contract, no physics) feeds the graph instead of sim_robot: the robot
                       computer's load without PyBullet on the same two cores.
                       Each across-node graph gives a second row, "command at the driver": from
                       the state's stamp to the supervisor's /joint_commands that follows the
                       policy's answer (what the robot's driver gets).
  relay                the DDS floor: the driver double, the supervisor and, in the runtime's
                       place, a Python node that only forwards one /joint_states per policy
                       period to /policy/joint_commands (same QoS and executor). The runtime's
                       p99 at the driver over the relay's is printed (target <= 1.5).
  --composed           also the across-node graph with the supervisor and the runtime in one
                       process (composed:=true, the chain's EventsExecutor)
  --realtime, --hog    the across-node graphs with realtime:=true (the driver double and the
                       relay at the priorities of the nodes they stand in for, the listener
                       above them at SCHED_FIFO 90) and beside two CPU hogs (100 % and 50 % of
                       a core).

Targets: p99 <= 1 ms for the runtime's own tick in one process, <= 3 ms across nodes.
The load average is printed: on a shared machine other work shows in the tails (a tick of
0.1 ms of CPU work stretches over a scheduler time slice when the cores are oversubscribed).

Examples:
    .venv/bin/python benchmarks/control_loop.py                     # everything, ~2 minutes
    .venv/bin/python benchmarks/control_loop.py --only core         # no ROS, a few seconds
    .venv/bin/python benchmarks/control_loop.py --executors single events --seconds 20 --json
    .venv/bin/python benchmarks/control_loop.py --only across --hardware topic --executors events --realtime --hog
    .venv/bin/python benchmarks/control_loop.py --only across --hardware topic --executors events --composed
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

from _graph import (  # benchmarks/_graph.py
    Hogs,
    SensingFeed,
    apply_realtime_request,
    cpu_seconds,
    helper_command,
    helper_environment,
)
from sim2real.core.observation import ObservationSpec
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import INPUT_NAME, OUTPUT_NAME, PolicyMetadata, load_policy
from sim2real.core.policy_slot import PolicySlot
from sim2real.core.policy_tick import PolicyRuntime
from sim2real.core.robot_inputs import RobotInputs
from sim2real.core.robot_profile import load_profile

HIDDEN = (512, 256, 128)
EXECUTORS = ("single", "multi", "events")
IN_PROCESS_TARGET_MS = 1.0
ACROSS_NODES_TARGET_MS = 3.0
DRIVER_RATIO_TARGET = 1.5  # p99 state stamp -> command at the driver, over the bare relay's
DRIVER_ROW = ": driver stamp -> command at the driver"
LISTENER_PRIORITY = 90  # --realtime: the measuring listener above the chain (hardware 80)


# -- the policy ----------------------------------------------------------------------------------
def write_shipped_size_policy(folder: Path, profile) -> Path:
    """A go2 walk policy file of the shipped network size, random weights (latency does not care)."""
    import onnx
    import torch
    import yaml

    torch.manual_seed(0)
    task = yaml.safe_load((share_dir() / "config" / "tasks" / "go2_walk.yaml").read_text())
    spec = ObservationSpec.from_config(task["observation"], profile.num_joints)
    sizes = [spec.size, *HIDDEN]
    layers = []
    for a, b in zip(sizes, sizes[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(sizes[-1], profile.num_joints)).eval()
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            model,
            (torch.zeros(1, spec.size),),
            buffer,
            dynamo=False,
            opset_version=17,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
        )
    proto = onnx.load_from_string(buffer.getvalue())
    n = profile.num_joints
    meta = PolicyMetadata(
        robot=profile.name,
        task="walk",
        joint_names=tuple(profile.joint_names),
        observation_spec=spec,
        action_scale=np.full(n, 0.25),
        action_offset=profile.default_positions,
        action_clip=100.0,
        default_joint_positions=profile.default_positions,
        control_period=profile.policy_period,
        kp=profile.kp,
        kd=profile.kd,
        source_commit="benchmark",
        task_config={"gait": task["gait"]},
    )
    for key, value in meta.to_props().items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    path = folder / "go2_benchmark.onnx"
    path.write_bytes(proto.SerializeToString())
    return path


# -- statistics ----------------------------------------------------------------------------------
@dataclasses.dataclass
class Row:
    name: str
    samples: np.ndarray  # seconds
    target_ms: float | None = None
    note: str = ""

    def figures(self) -> dict:
        ms = self.samples * 1e3
        if ms.size == 0:
            return {"name": self.name, "n": 0, "note": self.note or "no samples"}
        p50, p99 = np.percentile(ms, (50, 99))
        return {
            "name": self.name,
            "n": int(ms.size),
            "p50_ms": float(p50),
            "p99_ms": float(p99),
            "max_ms": float(ms.max()),
            "target_p99_ms": self.target_ms,
            "meets_target": None if self.target_ms is None else bool(p99 <= self.target_ms),
            "note": self.note,
        }


def timed(function, repeats: int) -> np.ndarray:
    samples = np.empty(repeats)
    for i in range(repeats):
        start = time.perf_counter()
        function()
        samples[i] = time.perf_counter() - start
    return samples


# -- without ROS ---------------------------------------------------------------------------------
def core_rows(path: Path, profile, repeats: int) -> list[Row]:
    policy = load_policy(path)
    obs = np.zeros((1, policy.metadata.observation_size), dtype=np.float32)
    session = policy.session
    for _ in range(200):
        session.run([OUTPUT_NAME], {INPUT_NAME: obs})  # warm caches and the CPU clock
    raw = timed(lambda: session.run([OUTPUT_NAME], {INPUT_NAME: obs}), repeats)
    act = timed(lambda: policy.act(obs[0]), repeats)

    slot = PolicySlot(profile, [path.parent])
    slot.start(path)
    inputs = RobotInputs(profile)
    runtime = PolicyRuntime(slot, inputs)
    rng = np.random.default_rng(0)
    names, zeros = profile.joint_names, np.zeros(profile.num_joints)
    samples = np.empty(repeats)
    for i in range(repeats):
        q = profile.default_positions + 0.05 * rng.standard_normal(profile.num_joints)
        start = time.perf_counter()
        inputs.set_joint_states(names, q, zeros, i * 20_000_000)
        inputs.set_imu((0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
        runtime.tick(i * 0.02, i * 20_000_000)
        samples[i] = time.perf_counter() - start
    return [
        Row("onnxruntime session.run", raw),
        Row("PolicyFile.act", act),
        Row("core tick (inputs -> targets)", samples, IN_PROCESS_TARGET_MS),
    ]


# -- the node's callback, called directly -------------------------------------------------------------
def node_direct_rows(path: Path, profile, repeats: int) -> list[Row]:
    """The runtime node's whole tick (message in, ROS message published) as CPU work: its
    /joint_states callback called in a loop, no executor, no waiting, no other process."""
    import rclpy
    from rclpy.context import Context
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import JointState

    from sim2real.nodes.policy_runtime import PolicyRuntimeNode

    context = Context()
    rclpy.init(context=context)
    node = PolicyRuntimeNode(
        context=context,
        parameter_overrides=[Parameter("robot", value=profile.name), Parameter("policy_path", value=str(path))],
    )
    # The node polls /imu/data at its tick (nothing arrives here): as if one level IMU sample had.
    node.inputs.set_imu((0.0, 0.0, 0.0, 1.0), (0.0, 0.0, 0.0))
    msg = JointState(
        name=profile.joint_names,
        position=profile.default_positions.tolist(),
        velocity=[0.0] * profile.num_joints,
        effort=[0.0] * profile.num_joints,
    )
    samples = np.empty(repeats)
    for i in range(repeats + 200):
        msg.header.stamp = node.get_clock().now().to_msg()
        node._next_tick_ns = 0  # every call is a tick boundary
        start = time.perf_counter()
        node._on_joint_states(msg)
        if i >= 200:
            samples[i - 200] = time.perf_counter() - start
    node.stop()
    node.destroy_node()
    rclpy.shutdown(context=context)
    return [
        Row(
            "node tick, callback called directly",
            samples,
            IN_PROCESS_TARGET_MS,
            "JointState in -> command published; CPU cost without executor or scheduling",
        )
    ]


# -- one process, three participants --------------------------------------------------------------
def in_process_rows(path: Path, profile, kind: str, seconds: float) -> list[Row]:
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from sensor_msgs.msg import Imu, JointState

    from sim2real.nodes import qos
    from sim2real.nodes.policy_runtime import PolicyRuntimeNode, make_executor

    runtime_context, io_context = Context(), Context()
    rclpy.init(context=runtime_context)
    rclpy.init(context=io_context)
    node = PolicyRuntimeNode(
        context=runtime_context,
        parameter_overrides=[Parameter("robot", value=profile.name), Parameter("policy_path", value=str(path))],
    )
    executor = make_executor(kind, context=runtime_context)
    executor.add_node(node)
    io_node = rclpy.create_node("benchmark_io", context=io_context)
    io_executor = SingleThreadedExecutor(context=io_context)
    io_executor.add_node(io_node)
    latencies: list[float] = []

    def on_command(msg):
        now = io_node.get_clock().now().nanoseconds
        latencies.append((now - (msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec)) * 1e-9)

    io_node.create_subscription(JointState, "/policy/joint_commands", on_command, qos.COMMAND)
    state_pub = io_node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH)
    imu_pub = io_node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH)
    stop = threading.Event()

    def feed():
        sensing = SensingFeed(io_node, profile, state_pub, imu_pub)
        deadline = time.monotonic()
        while not stop.is_set():
            sensing.publish()
            deadline += profile.sensing_period
            stop.wait(max(0.0, deadline - time.monotonic()))

    threads = [threading.Thread(target=io_executor.spin, daemon=True), threading.Thread(target=feed, daemon=True)]
    for thread in threads:
        thread.start()

    def spin(duration: float) -> None:
        # The runtime's executor on the main thread, as in its own process: rclpy's EventsExecutor
        # does not run from a background thread (it keeps the GIL while it waits).
        end = time.monotonic() + duration
        while time.monotonic() < end:
            executor.spin_once(timeout_sec=0.1)

    spin(2.0)  # discovery and the first ticks
    node.runtime.latency = type(node.runtime.latency)()  # measure the steady state only
    del latencies[:]
    spin(seconds)
    stop.set()
    own = np.array(node.runtime.latency._samples)
    summary = node.runtime.summary()
    executor.shutdown()
    io_executor.shutdown()
    node.stop()
    node.destroy_node()
    io_node.destroy_node()
    rclpy.shutdown(context=runtime_context)
    rclpy.shutdown(context=io_context)
    note = f"ticks {summary['ticks']}, stale inputs {summary['stale_observations']}, late {summary['ticks_late']}"
    return [
        Row(f"in-process graph, {kind}: node tick", own, IN_PROCESS_TARGET_MS, note),
        Row(f"in-process graph, {kind}: stamp -> received", np.array(latencies)),
    ]


# -- across processes ------------------------------------------------------------------------------
def measure_graph(
    plan, helpers: dict[str, tuple[list[str], dict]], seconds: float, hogs: bool = False, realtime: bool = False
) -> tuple[dict[str, np.ndarray], dict, dict]:
    """Run ``plan`` plus helper processes (name -> (command, environment)), optionally beside two
    CPU hogs, and listen: ({"policy": state stamp -> /policy/joint_commands arrival, "driver":
    state stamp -> the next /joint_commands arrival after it (the supervisor's command, what the
    driver gets)} in s, each process's CPU % of a core, the runtime's last /diagnostics values,
    its stale_observations counted over the window)."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    from sim2real.graph.processes import GraphProcesses
    from sim2real.nodes import qos

    context = Context()
    rclpy.init(context=context)
    listener = rclpy.create_node("benchmark_listener", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(listener)
    policy: list[tuple[int, int]] = []  # (arrival, state stamp) ns
    commands: list[int] = []  # /joint_commands arrivals, ns
    diagnostics: list[dict] = []

    def on_policy(msg):
        policy.append((time.time_ns(), msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec))

    def on_command(_msg):
        commands.append(time.time_ns())

    def on_diagnostics(msg):
        diagnostics.extend(
            {kv.key: kv.value for kv in s.values} for s in msg.status if s.name == "policy_runtime: policy"
        )

    listener.create_subscription(JointState, "/policy/joint_commands", on_policy, qos.COMMAND)
    listener.create_subscription(JointState, "/joint_commands", on_command, qos.COMMAND, raw=True)
    listener.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 10)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    if realtime:
        listen_above_the_chain()
    try:
        output = io.StringIO()
        with Hogs(hogs), GraphProcesses(plan, output=output) as graph:
            # In the graph's process table: stopped with it (SIGINT) and measured with it.
            graph.processes.update(
                {name: subprocess.Popen(command, env=env) for name, (command, env) in helpers.items()}
            )
            deadline = time.monotonic() + 30.0
            while not policy and time.monotonic() < deadline and not graph.exited():
                time.sleep(0.1)
            time.sleep(2.0)
            del policy[:], commands[:]
            at_start = dict(diagnostics[-1]) if diagnostics else {}
            if graph.exited():
                raise RuntimeError(f"processes exited: {graph.exited()}; their output:\n{output.getvalue()[-3000:]}")
            pids = {name: process.pid for name, process in graph.processes.items()}
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            started = time.monotonic()
            time.sleep(seconds)
            taken, arrivals = list(policy), np.array(commands)
            elapsed = time.monotonic() - started
            cpu = {name: (cpu_seconds(pid) - before[name]) / elapsed * 100 for name, pid in pids.items()}
    finally:
        executor.shutdown()
        listener.destroy_node()
        rclpy.shutdown(context=context)
    last = dict(diagnostics[-1]) if diagnostics else {}
    if "stale_observations" in last:  # the measured window's, not the start-up's
        last["stale_observations"] = int(last["stale_observations"]) - int(at_start.get("stale_observations", 0))
    received = np.array([arrival for arrival, _ in taken], dtype=np.int64)
    stamp = np.array([state for _, state in taken], dtype=np.int64)
    following = np.searchsorted(arrivals, received) if len(arrivals) else np.zeros(0, dtype=int)
    answered = following < len(arrivals)
    latencies = {
        "policy": (received - stamp) * 1e-9,
        "driver": (arrivals[following[answered]] - stamp[answered]) * 1e-9 if len(arrivals) else np.zeros(0),
    }
    return latencies, cpu, last


def cpu_note(cpu: dict) -> str:
    return "CPU % of a core: " + ", ".join(f"{name} {share:.0f}" for name, share in cpu.items())


def across_nodes_rows(
    path: Path,
    profile,
    kind: str,
    seconds: float,
    hardware: str = "sim",
    realtime: bool = False,
    hogs: bool = False,
    composed: bool = False,
) -> list[Row]:
    """``composed``: the supervisor and the runtime in one process (composed:=true), whose
    executor is the chain's (the EventsExecutor; ``kind`` is then only the row's label)."""
    from sim2real.graph.plan import make_plan

    plan = make_plan(
        robot=profile.name,
        policy=str(path),
        estimator="false",
        failure_collector="false",
        hardware=hardware,
        autoengage="true",
        realtime=realtime,
        composed=composed,
    )
    nodes = tuple(
        dataclasses.replace(n, parameters={**n.parameters, "executor": kind}) if n.name == "policy_runtime" else n
        for n in plan.nodes
    )
    plan = dataclasses.replace(plan, nodes=nodes)
    helpers = {}
    if hardware == "topic":
        helpers["driver_double"] = (
            helper_command("--serve-driver-double", profile.name),
            helper_environment("hardware", realtime),
        )
    latencies, cpu, last = measure_graph(plan, helpers, seconds, hogs, realtime)
    kind = "composed" if composed else kind
    own = (
        f"runtime's own tick p50/p99/max {last.get('tick_latency_p50_ms', '?')}/"
        f"{last.get('tick_latency_p99_ms', '?')}/{last.get('tick_latency_max_ms', '?')} ms, "
        f"stale inputs in the window {last.get('stale_observations', '?')}; {cpu_note(cpu)}"
    )
    source = "sim" if hardware == "sim" else "driver"
    return [
        Row(
            f"across nodes, {kind}: {source} stamp -> command received",
            latencies["policy"],
            ACROSS_NODES_TARGET_MS,
            own,
        ),
        Row(f"across nodes, {kind}: {source} stamp -> command at the driver", latencies["driver"]),
    ]


def relay_rows(profile, seconds: float, realtime: bool = False, hogs: bool = False) -> list[Row]:
    """Driver double -> relay -> listener, with the supervisor running as in the graph."""
    from sim2real.graph.plan import make_plan

    plan = make_plan(
        robot=profile.name, estimator="false", failure_collector="false", hardware="topic", realtime=realtime
    )
    helpers = {
        "driver_double": (
            helper_command("--serve-driver-double", profile.name),
            helper_environment("hardware", realtime),
        ),
        "relay": ([sys.executable, __file__, "--serve-relay", profile.name], helper_environment("control", realtime)),
    }
    latencies, cpu, _ = measure_graph(plan, helpers, seconds, hogs, realtime)
    note = f"DDS floor: no policy, a relay in its place; {cpu_note(cpu)}"
    return [
        Row("across nodes, relay: driver stamp -> forwarded", latencies["policy"], ACROSS_NODES_TARGET_MS, note),
        Row("across nodes, relay: driver stamp -> command at the driver", latencies["driver"]),
    ]


def serve_relay(robot: str) -> None:
    """The DDS floor of the runtime's place in the graph: a Python node that does nothing but
    forward the first /joint_states of each policy period to /policy/joint_commands (same
    QoS, same stamp, EventsExecutor). What the across-node rows cost beyond this is ours."""
    import rclpy
    from rclpy.experimental import EventsExecutor
    from sensor_msgs.msg import JointState

    from sim2real.nodes import qos, stamps

    apply_realtime_request()  # the runtime's, under --realtime; before rclpy: DDS threads inherit it
    profile = load_profile(robot)
    period_ns = round(profile.policy_period * 1e9)
    rclpy.init()
    node = rclpy.create_node("relay")
    publisher = node.create_publisher(JointState, "/policy/joint_commands", qos.COMMAND)
    command = JointState(name=profile.joint_names)
    next_tick = [0]

    def on_state(msg):
        stamp = stamps.to_ns(msg.header.stamp)
        if stamp < next_tick[0]:
            return
        next_tick[0] = stamps.next_period_start_ns(stamp, period_ns)
        command.header.stamp = msg.header.stamp
        command.position = list(msg.position)
        publisher.publish(command)

    node.create_subscription(JointState, "/joint_states", on_state, qos.SENSOR_SUBSCRIBE)
    executor = EventsExecutor()
    executor.add_node(node)
    try:
        while rclpy.ok():  # as sim2real.nodes.lifecycle spins the nodes (EventsExecutor.spin() here used a core)
            executor.spin_once(timeout_sec=0.1)
    except KeyboardInterrupt:
        pass


# -- main ------------------------------------------------------------------------------------------
def print_table(rows: list[dict]) -> None:
    print(f"{'':48s} {'n':>6s} {'p50 ms':>8s} {'p99 ms':>8s} {'max ms':>8s}  target p99")
    for row in rows:
        if not row["n"]:
            print(f"{row['name']:48s} {'-':>6s}  {row['note']}")
            continue
        target = (
            ""
            if row["target_p99_ms"] is None
            else f"<= {row['target_p99_ms']:g} {'ok' if row['meets_target'] else 'MISSED'}"
        )
        figures = f"{row['n']:6d} {row['p50_ms']:8.3f} {row['p99_ms']:8.3f} {row['max_ms']:8.3f}"
        print(f"{row['name']:48s} {figures}  {target}")
        if row["note"]:
            print(f"{'':50s}{row['note']}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--only",
        choices=("core", "in-process", "across"),
        action="append",
        help="run only these parts (repeatable); default: all",
    )
    parser.add_argument(
        "--executors",
        nargs="+",
        choices=EXECUTORS,
        default=list(EXECUTORS),
        help="rclpy executors to compare for the runtime node (default: all)",
    )
    parser.add_argument("--seconds", type=float, default=12.0, help="measured seconds per graph run (default 12)")
    parser.add_argument("--repeats", type=int, default=5000, help="calls per row without ROS (default 5000)")
    parser.add_argument(
        "--hardware",
        nargs="+",
        choices=("sim", "topic"),
        default=["sim", "topic"],
        help="what feeds the across-node graph: sim (sim_robot, PyBullet in real time) or "
        "topic (a driver double speaking the hardware contract, no physics); default both",
    )
    parser.add_argument(
        "--realtime",
        action="store_true",
        help="across nodes: the graph with realtime:=true, the driver double and the relay at the "
        "priorities of the nodes they stand in for",
    )
    parser.add_argument(
        "--hog", action="store_true", help="across nodes: two CPU hogs beside the graph (100 %% and 50 %% of a core)"
    )
    parser.add_argument(
        "--composed",
        action="store_true",
        help="across nodes: also the supervisor and the runtime in one process (composed:=true), "
        "beside the separate processes and the relay in the same run",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    parser.add_argument("--serve-relay", metavar="ROBOT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_relay:
        serve_relay(args.serve_relay)
        return 0
    parts = set(args.only or ("core", "in-process", "across"))
    profile = load_profile("go2")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="sim2real-bench-") as folder:
        path = write_shipped_size_policy(Path(folder), profile)
        layers = f"{load_policy(path).metadata.observation_spec.size} -> {'-'.join(map(str, HIDDEN))} -> 12"
        if "core" in parts:
            rows += core_rows(path, profile, args.repeats)
            rows += node_direct_rows(path, profile, args.repeats)
        if "in-process" in parts:
            for kind in args.executors:
                rows += in_process_rows(path, profile, kind, args.seconds)
        if "across" in parts:
            for hardware in args.hardware:
                for kind in args.executors:
                    rows += across_nodes_rows(path, profile, kind, args.seconds, hardware, args.realtime, args.hog)
                if args.composed:
                    rows += across_nodes_rows(
                        path, profile, "events", args.seconds, hardware, args.realtime, args.hog, composed=True
                    )
            if "topic" in args.hardware:
                rows += relay_rows(profile, args.seconds, args.realtime, args.hog)
    figures = [row.figures() for row in rows]
    ratios = driver_ratios(figures)
    load = os.getloadavg()
    if args.json:
        print(
            json.dumps(
                {
                    "policy": layers,
                    "load_average": load,
                    "cpus": os.cpu_count(),
                    "realtime": args.realtime,
                    "hog": args.hog,
                    "rows": figures,
                    "driver_p99_over_relay": ratios,
                },
                indent=2,
            )
        )
    else:
        print(
            f"policy tick latency, go2 MLP {layers}, 50 Hz policy / 500 Hz sensing; {os.cpu_count()} CPUs, "
            f"load average {load[0]:.1f}; realtime:={str(args.realtime).lower()}, hogs {'on' if args.hog else 'off'}"
        )
        print_table(figures)
        for name, ratio in ratios.items():
            print(
                f"runtime ({name}{'' if name == 'composed' else ' executor'}): p99 driver stamp -> command at "
                f"the driver {ratio:.2f} x the relay's (target <= {DRIVER_RATIO_TARGET:g})"
            )
    return 0


def listen_above_the_chain() -> None:
    """Under --realtime the chain runs at SCHED_FIFO 50-80: a listener at normal priority would
    time its own wait for the CPU, not the messages. Every thread of this process so far (the
    listener's executor and DDS threads, started before this is called) runs above the chain;
    threads and processes started from here on do not inherit it (SCHED_RESET_ON_FORK)."""
    try:
        for thread in map(int, os.listdir("/proc/self/task")):
            os.sched_setscheduler(thread, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(LISTENER_PRIORITY))
    except PermissionError:
        print(
            f"warning: no SCHED_FIFO {LISTENER_PRIORITY} for the listener (needs CAP_SYS_NICE): its times include "
            "its own wait for the CPU",
            flush=True,
        )


def driver_ratios(figures: list[dict]) -> dict[str, float]:
    """Per executor of the runtime: p99 driver stamp -> command at the driver over the relay's."""
    rows = {
        f["name"].removeprefix("across nodes, ").removesuffix(DRIVER_ROW): f
        for f in figures
        if f["n"] and f["name"].endswith(DRIVER_ROW)
    }
    relay = rows.pop("relay", None)
    return {} if relay is None else {kind: f["p99_ms"] / relay["p99_ms"] for kind, f in rows.items()}


if __name__ == "__main__":
    raise SystemExit(main())
