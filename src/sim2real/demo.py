"""The main job: bring up the whole graph in sim and show what it does.

With a policy (the shipped one by default): sim_robot -> policy_runtime ->
safety_supervisor -> sim_robot, driven by demo_script's scripted /cmd_vel or /goal_pose;
prints distance, velocity or reach error, supervisor events and the runtime's tick
latency, and writes a plot and a GIF. Without a policy: pose_commander holds and
moves the joints through the same supervisor and reports tracking.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from sim2real.bringup import BringupPlan
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile

DEFAULT_TASK = {"quadruped": "walk", "arm": "reach"}


DISCOVERY_RANGE = "ROS_AUTOMATIC_DISCOVERY_RANGE"


def demo_environment() -> dict[str, str]:
    """The demo is a sim on this machine: its topics stay on it (DDS discovery on loopback), so
    two people running it on one network in the default ROS_DOMAIN_ID do not drive each
    other's sims. A range the user set (to watch from another machine) is kept."""
    return {} if os.environ.get(DISCOVERY_RANGE) else {DISCOVERY_RANGE: "LOCALHOST"}


def shipped_policy(robot: str) -> Path | None:
    profile = load_profile(robot)
    path = share_dir() / "policies" / f"{profile.name}_{DEFAULT_TASK[profile.kind]}.onnx"
    return path if path.is_file() else None


def _with_report(plan: BringupPlan, node: str, report: Path) -> BringupPlan:
    nodes = tuple(dataclasses.replace(n, parameters={**n.parameters, "report_path": str(report.resolve())})
                  if n.name == node else n for n in plan.nodes)
    return dataclasses.replace(plan, nodes=nodes)


def _run(plan: BringupPlan, node: str, report: Path, timeout: float) -> tuple[dict | None, float]:
    from sim2real.graph_processes import GraphProcesses

    report.unlink(missing_ok=True)
    plan = _with_report(plan, node, report)
    started = time.monotonic()
    with GraphProcesses(plan, env=demo_environment()) as graph:
        reason = graph.wait(duration=timeout, until=lambda: node in graph.exited())
        died = {name: code for name, code in graph.exited().items() if name != node}
    wall = time.monotonic() - started
    if not report.exists():
        if reason == "exited" and died:
            print(f"error: {', '.join(f'{name} (exit code {code})' for name, code in died.items())} stopped "
                  f"after {wall:.1f} s, so the demo could not finish; its error is in the node output above",
                  file=sys.stderr)
        elif reason == "duration":
            print(f"error: the demo produced no report within {timeout:.0f} s (--timeout); see the node output "
                  "above", file=sys.stderr)
        else:
            print(f"error: {node} ended without writing its report; see the node output above", file=sys.stderr)
        return None, wall
    return json.loads(report.read_text()), wall


def _print_rows(rows: dict) -> None:
    for key, value in rows.items():
        print(f"  {key:40s} {value:.4g}" if isinstance(value, float) else f"  {key:40s} {value}")


def run_joint_demo(plan: BringupPlan, out: Path, timeout: float) -> int:
    from sim2real.evaluate.tracking_plot import plot_tracking

    report, wall = _run(plan, "pose_commander", out / "tracking.json", timeout)
    if report is None:
        return 1
    png = plot_tracking(out / "tracking.npz", out / "tracking.png")
    print(f"\n=== sim2real demo: {report.pop('robot')} (joint script, no policy) ===")
    _print_rows({**report, "wall time [s]": wall})
    print(f"  plot: {png}\n  report: {out / 'tracking.json'}")
    return 0


def run_policy_demo(plan: BringupPlan, out: Path, timeout: float, video: bool = True) -> int:
    import numpy as np

    from sim2real.evaluate.replay_video import render_gif
    from sim2real.evaluate.tracking_plot import plot_demo

    profile = load_profile(plan.robot)
    report, wall = _run(plan, "demo_script", out / "report.json", timeout)
    if report is None:
        return 1
    series = out / "report.npz"
    png = plot_demo(series, out / "motion.png", profile.kind)
    print(f"\n=== sim2real demo: {profile.name} with {Path(plan.node('policy_runtime').parameters['policy_path']).name} ===")
    _print_rows({**report["summary"], "wall time [s]": wall})
    runtime = report.get("policy_runtime", {})
    latency = {k: v for k, v in runtime.items() if "latency" in k or "inference" in k or "swap" in k or "late" in k}
    if latency:
        print("  policy_runtime:")
        for key, value in sorted(latency.items()):
            print(f"    {key:38s} {value}")
    print("  supervisor modes:")
    for event in report.get("supervisor_modes", []):
        trip = f"  ({event['last_trip']})" if event["last_trip"] not in ("", "none") and event["mode"] != "ACTIVE" else ""
        print(f"    t={event['t']:6.2f} s  {event['mode']}{trip}")
    print(f"  plot: {png}")
    if video:
        data = np.load(series)
        gif = render_gif(profile, data["t"], data["joint_positions"], out / "demo.gif",
                         data["base_positions"] if "base_positions" in data else None,
                         data["base_orientations"] if "base_orientations" in data else None)
        print(f"  video: {gif}")
    print(f"  report: {out / 'report.json'}")
    return 0
