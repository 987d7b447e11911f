"""`sim2real up` stops the hardware part last: the supervisor's last command, which holds the
joints where they are, must find the driver (or the ros2_control bridge) still there."""

import io
import sys
import time

from sim2real.graph import processes as graph_processes
from sim2real.graph.plan import BringupPlan, NodeSpec

# Stands in for a node process: on SIGINT it notes when, lingers as a node's shutdown does, exits.
NODE = """
import signal, sys, time
def stop(*_):
    print(f"stopped {time.monotonic():.6f}", flush=True)
    time.sleep(0.3)
    sys.exit(0)
signal.signal(signal.SIGINT, stop)
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def test_the_hardware_part_is_stopped_after_the_others_have_exited(monkeypatch):
    monkeypatch.setattr(graph_processes, "process_command", lambda spec, params: [sys.executable, "-c", NODE])
    plan = BringupPlan(
        "go2",
        "ros2_control",
        False,
        (
            NodeSpec("ros2_control_bridge", "bridge", "hardware"),
            NodeSpec("safety_supervisor", "supervisor", "safety"),
            NodeSpec("policy_runtime", "runtime", "control"),
        ),
    )
    output = io.StringIO()
    graph = graph_processes.GraphProcesses(plan, output=output)
    graph.start()
    deadline = time.monotonic() + 10.0
    while output.getvalue().count("ready") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert graph.stop() == {"bridge": 0, "supervisor": 0, "runtime": 0}
    stopped = {
        line.split("]")[0][1:]: float(line.split()[-1]) for line in output.getvalue().splitlines() if "stopped" in line
    }
    assert stopped["bridge"] > max(stopped["supervisor"], stopped["runtime"]) + 0.25, stopped
