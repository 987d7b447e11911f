#!/usr/bin/env python3
"""CPU of the Go2 control graph per node at 500 Hz sensing, beside the DDS floor, in one run.

The graph is what `sim2real up hardware:=topic demo:=true` brings up on the robot computer:
safety_supervisor, state_estimator, policy_runtime (the shipped walking policy), demo_script
and failure_collector, engaged by the operator once it is up. A driver double (benchmarks/_graph.py: /joint_states
and /imu/data at 500 Hz, the joints following /joint_commands, no physics) stands in for the
robot's driver, whose cost is the driver's and not the graph's. Beside them, measured in the
same window, the two DDS floors of a process taking the same two topics with the same QoS:

  receive floor     subscribed, never taking a message: DDS receiving the stream. Each process
                    that subscribes to the sensing pays this; a graph of N such processes pays
                    it N times
  callbacks floor   every message into an empty rclpy callback (EventsExecutor): the least a
                    Python node handling each 500 Hz sample costs (with --callbacks-floor)

Both layouts, one after the other in the same run (``--layout both``, the default): a process
per node, and the control chain in one process (``composed:=true``, nodes/control_chain.py).

Printed: each process's CPU (% of one core, user + system, over --seconds), as a multiple of
the receive floor; the graph's total (control and monitoring nodes, not the driver) against
the target of 40 % of one core and against the floor of its own number of subscribing
processes; the supervisor's mode at the end (a graph that tripped would idle and look cheap).

Examples:
    .venv/bin/python benchmarks/graph_cpu.py                   # 60 s measured
    .venv/bin/python benchmarks/graph_cpu.py --seconds 20 --json
    .venv/bin/python benchmarks/graph_cpu.py --realtime        # the chain with realtime:=true
    .venv/bin/python benchmarks/graph_cpu.py --layout composed # only the chain in one process
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from diagnostic_msgs.msg import DiagnosticArray
from sensor_msgs.msg import Joy
from std_srvs.srv import Trigger

from _graph import FLOORS, SpunNode, cpu_seconds, helper_command  # benchmarks/_graph.py
from sim2real.core.paths import share_dir
from sim2real.core.safety_config import load_safety_config
from sim2real.graph.plan import make_plan
from sim2real.graph.processes import GraphProcesses
from sim2real.graph.reported_run import demo_environment
from sim2real.nodes import qos

TARGET_PERCENT = 40.0
JOY_PERIOD_S = 0.05
ENGAGE_ATTEMPTS = 5  # engage calls, a second apart, while the supervisor refuses
# The nodes that take the 500 Hz sensing (a floor each); failure_collector buffers it too.
SENSING_SUBSCRIBERS = (
    "safety_supervisor",
    "state_estimator",
    "policy_runtime",
    "control_chain",
    "demo_script",
    "failure_collector",
)
LAYOUTS = ("separate", "composed")


class Operator(SpunNode):
    """The operator, in this process (not measured): holds the deadman on /joy, as on the robot
    (hardware:=topic is real hardware to the supervisor), and watches the supervisor's mode."""

    def __init__(self):
        super().__init__("graph_cpu_operator")
        self.modes: list[str] = []
        self.node.create_subscription(DiagnosticArray, "/safety/status", self._on_status, 10)
        buttons = [0] * 16
        buttons[load_safety_config("go2").buttons["deadman"]] = 1
        joy, publisher = Joy(buttons=buttons), self.node.create_publisher(Joy, "/joy", qos.SENSOR_PUBLISH)
        self.node.create_timer(JOY_PERIOD_S, lambda: publisher.publish(joy))
        self._services = {
            action: self.node.create_client(Trigger, f"/safety_supervisor/{action}") for action in ("reset", "engage")
        }
        self.start()

    def engage(self) -> str:
        """Engage as an operator does once the graph is up (not on start: the start-up of six
        Python processes on two cores can stall the sensing for longer than its deadline, and
        then the operator resets first). A refusal (the robot still standing up) is tried again
        a second later, as an operator would: a graph left in STANDBY would idle and look cheap."""
        for _ in range(ENGAGE_ATTEMPTS):
            if self.modes and self.modes[-1] == "DAMPING":
                self._call("reset")
            answer = self._call("engage")
            if "refused" not in answer:
                return answer
            time.sleep(1.0)
        return answer

    def _call(self, action: str, timeout: float = 10.0) -> str:
        client = self._services[action]
        if not client.wait_for_service(timeout_sec=timeout):
            return f"no {action} service"
        future = client.call_async(Trigger.Request())
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        return future.result().message if future.done() else f"{action} unanswered"

    def _on_status(self, msg) -> None:
        for status in msg.status:
            if not self.modes or self.modes[-1] != status.message:
                self.modes.append(status.message)


def measure(seconds: float, warmup: float, realtime: bool, composed: bool, floors: tuple[str, ...], out: Path) -> dict:
    plan = make_plan(
        robot="go2",
        policy=str(share_dir() / "policies" / "go2_walk.onnx"),
        hardware="topic",
        demo=True,
        realtime=realtime,
        composed=composed,
        failures_dir=str(out / "failures"),
    )
    # The script, then a zero command, for longer than the run: demo_script must not exit mid-window.
    nodes = tuple(
        dataclasses.replace(
            n, parameters={**n.parameters, "duration": warmup + seconds + 60.0, "report_path": str(out / "demo.json")}
        )
        if n.name == "demo_script"
        else n
        for n in plan.nodes
    )
    plan = dataclasses.replace(plan, nodes=nodes)
    operator = Operator()
    out.mkdir(parents=True, exist_ok=True)
    log = open(out / "graph.log", "w")
    try:
        with GraphProcesses(plan, output=log, env=demo_environment()) as graph:
            helpers = {
                "driver_double": helper_command("--serve-driver-double", "go2"),
                **{f"floor_{kind}": helper_command("--serve-floor", kind) for kind in floors},
            }
            # In the graph's process table: stopped with it and measured with it.
            graph.processes.update(
                {
                    name: subprocess.Popen(command, env=graph.env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
                    for name, command in helpers.items()
                }
            )
            if graph.wait(duration=warmup / 2) == "exited":
                raise RuntimeError(f"a process exited during the warm-up: {graph.exited()}")
            engaged = operator.engage()
            if graph.wait(duration=warmup / 2) == "exited":
                raise RuntimeError(f"a process exited during the warm-up: {graph.exited()}")
            pids = {name: process.pid for name, process in graph.processes.items()}
            before, started = {name: cpu_seconds(pid) for name, pid in pids.items()}, time.monotonic()
            modes_before = len(operator.modes)
            if graph.wait(duration=seconds) == "exited":
                raise RuntimeError(f"a process exited during the measurement: {graph.exited()}")
            elapsed = time.monotonic() - started
            cpu = {name: round(100.0 * (cpu_seconds(pid) - before[name]) / elapsed, 1) for name, pid in pids.items()}
    finally:
        operator.close()
        log.close()
    graph_nodes = [p.name for p in plan.processes()]
    total = round(sum(cpu[n] for n in graph_nodes), 1)
    subscribers = [n for n in graph_nodes if n in SENSING_SUBSCRIBERS]
    floor = cpu["floor_receive"]
    return {
        "seconds": round(elapsed, 1),
        "realtime": realtime,
        "layout": "composed" if composed else "separate",
        "cpu_percent": cpu,
        "graph_nodes": graph_nodes,
        "graph_total_percent": total,
        "target_percent": TARGET_PERCENT,
        "sensing_subscribers": len(subscribers),
        "graph_over_floor_of_its_subscribers": round(total / (floor * len(subscribers)), 2) if floor else None,
        "engage": engaged,
        "modes_in_window": operator.modes[max(0, modes_before - 1) :] or ["(no status)"],
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds (default 60)")
    parser.add_argument(
        "--warmup",
        type=float,
        default=12.0,
        help="seconds before measuring: discovery, engagement, the first policy ticks (default 12)",
    )
    parser.add_argument("--realtime", action="store_true", help="bring the chain up with realtime:=true")
    parser.add_argument(
        "--layout",
        choices=(*LAYOUTS, "both"),
        default="both",
        help="separate: a process per node; composed: the chain in one process (composed:=true); "
        "both (default): one after the other in this run, and their totals side by side",
    )
    parser.add_argument(
        "--callbacks-floor",
        action="store_true",
        help="also run the callbacks floor (its ~15 %% of a core adds to the machine's load)",
    )
    parser.add_argument(
        "--out",
        default="",
        help="folder for the graph's log, failure bundles and demo report (default: a temporary one)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    os.environ.update(demo_environment())  # the operator discovers on loopback like the graph
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="graph-cpu-"))
    out.mkdir(parents=True, exist_ok=True)
    layouts = LAYOUTS if args.layout == "both" else (args.layout,)
    print(
        f"graph_cpu: {', '.join(layouts)}; each {args.warmup:.0f} s warm-up, {args.seconds:.0f} s measured ...",
        file=sys.stderr,
        flush=True,
    )
    floors = FLOORS if args.callbacks_floor else ("receive",)
    results = [
        measure(args.seconds, args.warmup, args.realtime, layout == "composed", floors, out / layout)
        for layout in layouts
    ]
    if args.json:
        print(json.dumps(results if len(results) > 1 else results[0], indent=2))
        return 0
    for result in results:
        print_result(result)
    if len(results) == 2:
        separate, composed = (r["graph_total_percent"] for r in results)
        print(
            f"composed / separate graph total: {composed:.1f} / {separate:.1f} % = {composed / separate:.2f}; "
            f"receive floors {results[0]['cpu_percent']['floor_receive']:.1f} / "
            f"{results[1]['cpu_percent']['floor_receive']:.1f} %"
        )
    return 0


def print_result(result: dict) -> None:
    cpu, floor = result["cpu_percent"], result["cpu_percent"]["floor_receive"]
    load = result["load_average"]
    print(
        f"\n{result['layout']}: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; "
        f"{result['seconds']:.0f} s measured; realtime:={str(result['realtime']).lower()}; "
        f"supervisor modes in the window: {' -> '.join(result['modes_in_window'])}"
    )
    print(f"{'process':22s} {'CPU % of a core':>16s} {'x receive floor':>16s}")
    for name in result["graph_nodes"] + [n for n in cpu if n not in result["graph_nodes"]]:
        ratio = f"{cpu[name] / floor:16.1f}" if floor else f"{'-':>16s}"
        print(f"{name:22s} {cpu[name]:16.1f} {ratio}")
    total = result["graph_total_percent"]
    print(
        f"graph total (control + monitoring): {total:.1f} % of one core, target <= {TARGET_PERCENT:g} % "
        f"({'ok' if total <= TARGET_PERCENT else 'MISSED'}); "
        f"{result['graph_over_floor_of_its_subscribers']} x the receive floor of its "
        f"{result['sensing_subscribers']} subscribing processes"
    )
    if result["modes_in_window"] != ["ACTIVE"]:
        print(
            f"NOT COMPARABLE: the supervisor was not ACTIVE through the window (engage: {result['engage']!r}); "
            "a graph that is not walking idles and looks cheap"
        )


if __name__ == "__main__":
    raise SystemExit(main())
