"""Pieces the graph benchmarks share: a process's CPU time, a robot driver double and the DDS floors.

Run as a helper process of a benchmark (``python benchmarks/_graph.py --serve-driver-double go2``);
imported by the benchmarks beside it (they run with this folder first on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from sim2real.core.robot_profile import load_profile
from sim2real.nodes.dds_transport import use_graph_transport

FLOORS = ("receive", "callbacks")
# The floors, doubles and probes measured here on the nodes' own DDS transport (UDP), as the nodes
# set it up for themselves: the same environment for every process these benchmarks start.
use_graph_transport()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def hog(duty: float, stop) -> None:
    """Busy for ``duty`` of each 20 ms, asleep for the rest, until ``stop`` is set: the load of
    perception or a build beside the graph on the robot computer."""
    busy, idle = 0.02 * duty, 0.02 * (1.0 - duty)
    while not stop.is_set():
        end = time.perf_counter() + busy
        while time.perf_counter() < end:
            pass
        if idle:
            time.sleep(idle)


class Hogs:
    """Two CPU hogs while the block runs: one busy loop at 100 % of a core, one at 50 %."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled

    def __enter__(self) -> "Hogs":
        import multiprocessing

        self.stop = multiprocessing.Event()
        self.processes = [
            multiprocessing.Process(target=hog, args=(duty, self.stop), daemon=True)
            for duty in ((1.0, 0.5) if self.enabled else ())
        ]
        for process in self.processes:
            process.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for process in self.processes:
            process.join(timeout=2.0)


def helper_environment(role: str, realtime: bool) -> dict[str, str]:
    """What a helper standing in for a node of ``role`` runs with: under ``realtime`` that role's
    real-time request, as the plan gives the node it stands in for (applied by the helper)."""
    from sim2real.graph.plan import node_environment

    return {**os.environ, **node_environment(role, realtime, ())}


def apply_realtime_request() -> None:
    """In a helper: the real-time request of its environment (helper_environment), if any."""
    from sim2real.core import realtime
    from sim2real.core.launch_env import REALTIME_ENV

    for line in realtime.apply_encoded(os.environ.pop(REALTIME_ENV, None)).lines():
        print(f"[{os.path.basename(sys.argv[0])}] {line}", flush=True)


def helper_command(flag: str, argument: str) -> list[str]:
    """This file as a helper process: ``flag`` is one of its --serve-* options."""
    return [sys.executable, str(Path(__file__).resolve()), flag, argument]


class SpunNode:
    """A node of the benchmark's own process, in a context of its own, spun on a thread; the
    benchmarks' watchers and operators subclass it and add their subscriptions."""

    def __init__(self, name: str):
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)

    def start(self) -> None:
        """Spin, once the subclass made its subscriptions."""
        self.thread.start()

    def close(self) -> None:
        import rclpy

        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        self.thread.join(timeout=2.0)


class SensingFeed:
    """A robot's sensing as the hardware contract has it: /joint_states and /imu/data, stamped
    when sent (the stand pose, level, until ``state.position`` is changed)."""

    def __init__(self, node, profile, state_pub, imu_pub):
        from sensor_msgs.msg import Imu, JointState

        self.node, self.state_pub, self.imu_pub = node, state_pub, imu_pub
        self.state = JointState(
            name=profile.joint_names,
            position=profile.default_positions.tolist(),
            velocity=[0.0] * profile.num_joints,
            effort=[0.0] * profile.num_joints,
        )
        self.imu = Imu()
        self.imu.orientation.w = 1.0

    def publish(self) -> None:
        self.state.header.stamp = self.imu.header.stamp = self.node.get_clock().now().to_msg()
        self.state_pub.publish(self.state)
        self.imu_pub.publish(self.imu)


def serve_driver_double(robot: str) -> None:
    """A robot driver as the hardware contract sees one (``hardware:=topic``): /joint_states
    and /imu/data at the sensing rate, stamped when sent; the joints follow the last
    /joint_commands. No physics: on the robot computer the physics is the robot, and a real
    driver (C++, a few % of a core) costs far less than PyBullet in real time."""
    import rclpy
    from sensor_msgs.msg import Imu, JointState

    from sim2real.nodes import qos

    apply_realtime_request()  # before rclpy: DDS threads inherit it
    profile = load_profile(robot)
    rclpy.init()
    node = rclpy.create_node("driver_double")
    sensing = SensingFeed(
        node,
        profile,
        node.create_publisher(JointState, "/joint_states", qos.SENSOR_PUBLISH),
        node.create_publisher(Imu, "/imu/data", qos.SENSOR_PUBLISH),
    )

    def on_command(msg):
        if len(msg.position) == profile.num_joints:
            sensing.state.position = list(msg.position)

    node.create_subscription(JointState, "/joint_commands", on_command, qos.COMMAND)
    deadline = time.monotonic()
    try:
        while rclpy.ok():
            sensing.publish()
            deadline += profile.sensing_period
            rclpy.spin_once(node, timeout_sec=max(0.0, deadline - time.monotonic()))
            while time.monotonic() < deadline:  # spin_once returns early when a command arrives
                rclpy.spin_once(node, timeout_sec=max(0.0, deadline - time.monotonic()))
    except KeyboardInterrupt:
        pass


def serve_floor(kind: str) -> None:
    """The DDS floor of a node taking the robot's sensing: subscribed to /joint_states and
    /imu/data with the nodes' QoS, doing nothing with them.

    receive    the subscriptions exist and no message is ever taken: DDS receiving the stream
               (its listener thread wakes for every message). Every subscriber pays this,
               in any language; one process of a graph cannot pay less.
    callbacks  every message taken by rclpy (EventsExecutor) into an empty callback: the least a
               Python node handling each 500 Hz sample costs.
    """
    import rclpy
    from rclpy.experimental import EventsExecutor
    from sensor_msgs.msg import Imu, JointState

    from sim2real.nodes import qos
    from sim2real.nodes.polled import never_called

    rclpy.init()
    node = rclpy.create_node(f"dds_floor_{kind}")
    callback = never_called if kind == "receive" else (lambda msg: None)
    for msg_type, topic in ((JointState, "/joint_states"), (Imu, "/imu/data")):
        node.create_subscription(msg_type, topic, callback, qos.SENSOR_SUBSCRIBE)
    try:
        if kind == "receive":
            while rclpy.ok():  # rclpy turns SIGINT/SIGTERM into a shutdown of its context
                time.sleep(0.2)
        else:
            executor = EventsExecutor()
            executor.add_node(node)
            while rclpy.ok():  # as sim2real.nodes.lifecycle spins the nodes
                executor.spin_once(timeout_sec=0.1)
    except KeyboardInterrupt:
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve-driver-double", metavar="ROBOT")
    parser.add_argument("--serve-floor", choices=FLOORS)
    args = parser.parse_args()
    if args.serve_driver_double:
        serve_driver_double(args.serve_driver_double)
    elif args.serve_floor:
        serve_floor(args.serve_floor)
    else:
        parser.error("give --serve-driver-double ROBOT or --serve-floor KIND")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
