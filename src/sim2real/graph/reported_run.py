"""Run a node plan until one node writes its report: the demo, and the trials built on it.

The run is a sim on this machine, so its DDS discovery stays on loopback; a node that dies
first, or no report in time, is said plainly on stderr.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from sim2real.graph.plan import BringupPlan
from sim2real.graph.processes import GraphProcesses

DISCOVERY_RANGE = "ROS_AUTOMATIC_DISCOVERY_RANGE"


def demo_environment() -> dict[str, str]:
    """The demo is a sim on this machine: its topics stay on it (DDS discovery on loopback), so
    two people running it on one network in the default ROS_DOMAIN_ID do not drive each
    other's sims. A range the user set (to watch from another machine) is kept."""
    return {} if os.environ.get(DISCOVERY_RANGE) else {DISCOVERY_RANGE: "LOCALHOST"}


def _with_report(plan: BringupPlan, node: str, report: Path) -> BringupPlan:
    nodes = tuple(
        dataclasses.replace(n, parameters={**n.parameters, "report_path": str(report.resolve())})
        if n.name == node
        else n
        for n in plan.nodes
    )
    return dataclasses.replace(plan, nodes=nodes)


def run_until_report(plan: BringupPlan, node: str, report: Path, timeout: float) -> tuple[dict | None, float]:
    """Run ``plan`` until ``node`` exits (or ``timeout`` s) and return the JSON report it wrote at
    ``report`` (None, with the reason on stderr, when it wrote none) and the wall time."""
    report.unlink(missing_ok=True)
    plan = _with_report(plan, node, report)
    started = time.monotonic()
    with GraphProcesses(plan, env=demo_environment()) as graph:
        reason = graph.wait(duration=timeout, until=lambda: node in graph.exited())
        died = {name: code for name, code in graph.exited().items() if name != node}
    wall = time.monotonic() - started
    if not report.exists():
        if reason == "exited" and died:
            print(
                f"error: {', '.join(f'{name} (exit code {code})' for name, code in died.items())} stopped "
                f"after {wall:.1f} s, so the demo could not finish; its error is in the node output above",
                file=sys.stderr,
            )
        elif reason == "duration":
            print(
                f"error: the demo produced no report within {timeout:.0f} s (--timeout); see the node output above",
                file=sys.stderr,
            )
        else:
            print(f"error: {node} ended without writing its report; see the node output above", file=sys.stderr)
        return None, wall
    return json.loads(report.read_text()), wall
