"""Fixtures for real ROS 2 graphs: nodes run as processes exactly as `sim2real up` runs them,
and the test talks to them over DDS from a probe node spinning in a background thread."""

from __future__ import annotations

import dataclasses
import gc
import threading
import time
import uuid

import pytest
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.parameter import Parameter
from rclpy.qos import QoSProfile, QoSReliabilityPolicy

from sim2real.graph.plan import make_plan
from sim2real.graph.processes import GraphProcesses

# Reliable like the command publishers, but deep: the command QoS keeps one message, and a probe
# busy for two periods would silently lose one and count a gap (or a command) that never was.
RECORD = QoSProfile(depth=100, reliability=QoSReliabilityPolicy.RELIABLE)


def wait_for(predicate, timeout: float, poll: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(poll)
    return predicate()


class Probe:
    """A node of the test's own, with helpers to record topics."""

    def __init__(self):
        # The test process holds torch, onnx and pybullet: a full garbage collection walked
        # 200k objects for ~150-350 ms, during which the probe dropped the graph's 500 Hz
        # messages and took a core from the graph. Frozen, those objects are never walked again.
        gc.collect()
        gc.freeze()
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"probe_{uuid.uuid4().hex[:8]}", context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()

    def record(self, msg_type, topic: str, qos, callback=None, raw: bool = False) -> list:
        """Subscribe and keep every message (optionally calling ``callback`` too). ``raw``: keep the
        serialized bytes, which costs the probe a fraction of deserializing a 500 Hz stream."""
        messages: list = []

        def on_message(msg):
            with self.lock:
                messages.append(msg)
            if callback is not None:
                callback(msg)

        self.node.create_subscription(msg_type, topic, on_message, qos, raw=raw)
        return messages

    def command_publisher(self):
        """The probe's /joint_commands publisher, for a driver started with
        ``start_graph(commander=probe.name)`` (drivers take commands from one writer alone)."""
        from sensor_msgs.msg import JointState

        from sim2real.nodes import qos

        return self.node.create_publisher(JointState, "/joint_commands", qos.COMMAND)

    @property
    def name(self) -> str:
        return f"/{self.node.get_name()}"

    def close(self):
        # The spin thread ends first: rclpy 9's Executor.shutdown returns without waiting for it,
        # and a node destroyed while the thread still waits on it raises InvalidHandle there (an
        # unhandled-thread-exception warning in the test's report).
        self.executor.shutdown(timeout_sec=1.0)
        self.thread.join(timeout=5.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)


class GraphLog:
    """Collects the node processes' output so tests can assert on what they said."""

    def __init__(self):
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)
        print(text, end="")

    def flush(self) -> None:
        pass

    def text(self) -> str:
        return "".join(self.lines)


def spin_until(executor, predicate, timeout: float) -> bool:
    """Spin ``executor`` (nodes a test runs in its own process) until ``predicate()`` or ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        executor.spin_once(timeout_sec=0.005)
        if predicate():
            return True
    return False


@pytest.fixture
def context():
    """An rclpy context of its own, for nodes a test runs in its own process."""
    context = Context()
    rclpy.init(context=context)
    yield context
    rclpy.shutdown(context=context)


@pytest.fixture
def probe():
    p = Probe()
    yield p
    p.close()


@pytest.fixture
def start_graph(tmp_path_factory):
    """start_graph(only=None, commander=None, parameters=None, **launch_arguments) -> GraphProcesses
    (stopped at teardown).

    ``only``: names of the plan's nodes to start (e.g. just sim_robot, to drive it directly);
    ``commander``: the node the drivers take /joint_commands from instead of the supervisor (the
    test's probe, through its ``command_writer`` parameter); ``parameters``: node name -> ROS
    parameters set on that node beside the plan's."""
    graphs: list[GraphProcesses] = []

    def start(only=None, commander=None, parameters=None, **arguments) -> GraphProcesses:
        log = GraphLog()
        # The failure collector (in every default plan) runs where a test asks for it (failures_dir,
        # or by name in `only`): elsewhere its ~8 % of a core only adds sensing stalls on a loaded
        # 2-core machine to tests of other nodes. Its bundles belong to the test, never to ~/.
        wanted = "failures_dir" in arguments or (only is not None and "failure_collector" in only)
        arguments.setdefault("failure_collector", "true" if wanted else "false")
        arguments.setdefault("failures_dir", str(tmp_path_factory.mktemp("failures")))
        # Likewise the estimator: its 500 Hz filter (~1 ms a step in Python) starved the runtime's
        # graph tests on 2 cores; tests/ros/test_state_estimator.py asks for it by name.
        arguments.setdefault("estimator", "true" if only is not None and "state_estimator" in only else "false")
        plan = make_plan(**arguments)
        if only is not None:
            plan = dataclasses.replace(plan, nodes=tuple(n for n in plan.nodes if n.name in only))
            # Without the plan's driver, the test plays the robot: any reader of /joint_commands
            # (the test's own) lets the supervisor's stand-up begin.
            started = {n.name for n in plan.nodes}
            plan = dataclasses.replace(
                plan,
                nodes=tuple(
                    dataclasses.replace(n, parameters={**n.parameters, "driver": ""})
                    if n.name == "safety_supervisor" and n.parameters.get("driver") not in started
                    else n
                    for n in plan.nodes
                ),
            )
        if parameters:
            unknown = set(parameters) - {n.name for n in plan.nodes}
            assert not unknown, f"parameters for nodes the plan does not start: {sorted(unknown)}"
            plan = dataclasses.replace(
                plan,
                nodes=tuple(
                    dataclasses.replace(n, parameters={**n.parameters, **parameters.get(n.name, {})})
                    for n in plan.nodes
                ),
            )
        if commander is not None:
            plan = dataclasses.replace(
                plan,
                nodes=tuple(
                    dataclasses.replace(n, parameters={**n.parameters, "command_writer": commander})
                    if n.role == "hardware"
                    else n
                    for n in plan.nodes
                ),
            )
        graph = GraphProcesses(plan, output=log)
        graph.log = log
        graph.start()
        graphs.append(graph)
        return graph

    yield start
    for graph in graphs:
        graph.stop()


@pytest.fixture
def make_any(context):
    """make_any(NodeClass, **parameters): a node in this process, in a context of its own, its
    handlers driven directly with real messages (no graph, no spinning). ``robot`` defaults to
    panda. Nodes are destroyed and the context shut down after the test."""
    nodes = []

    def make(node_class, **parameters):
        node = node_class(
            context=context,
            parameter_overrides=[
                Parameter(name, value=value) for name, value in {"robot": "panda", **parameters}.items()
            ],
        )
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.destroy_node()
