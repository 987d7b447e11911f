"""The main job: bring up the whole graph in sim and show what it does.

With a policy (the shipped one by default): sim_robot -> policy_runtime ->
safety_supervisor -> sim_robot, driven by demo_script's scripted /cmd_vel or /goal_pose;
prints distance, velocity or reach error, supervisor events and the runtime's tick
latency, and writes a plot and a GIF. Without a policy: pose_commander holds and
moves the joints through the same supervisor and reports tracking.
"""

from __future__ import annotations

from pathlib import Path

from sim2real.core.robot_profile import load_profile
from sim2real.graph.plan import BringupPlan
from sim2real.graph.reported_run import run_until_report


def _print_rows(rows: dict) -> None:
    for key, value in rows.items():
        print(f"  {key:40s} {value:.4g}" if isinstance(value, float) else f"  {key:40s} {value}")


def run_joint_demo(plan: BringupPlan, out: Path, timeout: float) -> int:
    from sim2real.evaluate.tracking_plot import plot_tracking

    report, wall = run_until_report(plan, "pose_commander", out / "tracking.json", timeout)
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
    report, wall = run_until_report(plan, "demo_script", out / "report.json", timeout)
    if report is None:
        return 1
    series = out / "report.npz"
    png = plot_demo(series, out / "motion.png", profile.kind)
    print(
        f"\n=== sim2real demo: {profile.name} with {Path(plan.node('policy_runtime').parameters['policy_path']).name} ==="
    )
    _print_rows({**report["summary"], "wall time [s]": wall})
    runtime = report.get("policy_runtime", {})
    latency = {k: v for k, v in runtime.items() if "latency" in k or "inference" in k or "swap" in k or "late" in k}
    if latency:
        print("  policy_runtime:")
        for key, value in sorted(latency.items()):
            print(f"    {key:38s} {value}")
    print("  supervisor modes:")
    for event in report.get("supervisor_modes", []):
        trip = (
            f"  ({event['last_trip']})" if event["last_trip"] not in ("", "none") and event["mode"] != "ACTIVE" else ""
        )
        print(f"    t={event['t']:6.2f} s  {event['mode']}{trip}")
    print(f"  plot: {png}")
    if video:
        data = np.load(series)
        gif = render_gif(
            profile,
            data["t"],
            data["joint_positions"],
            out / "demo.gif",
            data["base_positions"] if "base_positions" in data else None,
            data["base_orientations"] if "base_orientations" in data else None,
        )
        print(f"  video: {gif}")
    print(f"  report: {out / 'report.json'}")
    return 0
