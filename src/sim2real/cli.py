"""The `sim2real` command line. `sim2real COMMAND --help` explains each command with an example."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from sim2real.bringup import HARDWARE_CHOICES, PlanError, make_plan
from sim2real.core.robot_profile import ProfileError, available_profiles


class _Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


def _add_graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--robot", default="go2", help=f"robot profile name ({', '.join(available_profiles())}) or path")
    parser.add_argument("--lockstep", action="store_true",
                        help="sim publishes /clock and advances only when the graph answers (use_sim_time everywhere)")
    parser.add_argument("--seed", type=int, default=0, help="seed for terrain and sensor noise")
    parser.add_argument("--conditions", default="{}",
                        help="physical conditions for the sim as YAML, e.g. '{ground_friction: 0.5, latency: 0.01}'")


def _plan_from(args: argparse.Namespace, demo: bool):
    return make_plan(robot=args.robot, hardware=getattr(args, "hardware", "sim"), lockstep=args.lockstep,
                     seed=args.seed, conditions=args.conditions, demo=demo)


def cmd_up(args: argparse.Namespace) -> int:
    from sim2real.graph_processes import GraphProcesses

    plan = _plan_from(args, demo=args.demo)
    if args.print_plan:
        print(json.dumps({"robot": plan.robot, "hardware": plan.hardware, "use_sim_time": plan.use_sim_time,
                          "nodes": [vars(n) for n in plan.nodes]}, indent=2, default=list))
        return 0
    if not plan.nodes:
        print(f"hardware:={plan.hardware} with no extra nodes: nothing to start yet", file=sys.stderr)
        return 0
    print(f"starting {', '.join(n.name for n in plan.nodes)} (Ctrl-C stops)", flush=True)
    graph = GraphProcesses(plan)
    try:
        graph.start()
        reason = graph.wait(duration=args.duration)
    except KeyboardInterrupt:
        reason = "interrupted"
    codes = graph.stop()
    failed = {name: code for name, code in codes.items() if code not in (0, -2)}
    if reason == "exited" and failed:
        print(f"error: node(s) exited: {failed}; see their output above", file=sys.stderr)
        return 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from sim2real.evaluate.tracking_plot import plot_tracking
    from sim2real.graph_processes import GraphProcesses

    plan = _plan_from(args, demo=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report_path = out / "tracking.json"
    report_path.unlink(missing_ok=True)
    commander = plan.node("pose_commander")
    commander.parameters["report_path"] = str(report_path.resolve())
    print(f"demo: {plan.robot} in sim ({'lockstep' if args.lockstep else 'real time'}): holding the default pose, "
          f"then moving every joint; output in {out}/", flush=True)
    started = time.monotonic()
    with GraphProcesses(plan) as graph:
        graph.wait(duration=args.timeout, until=lambda: "pose_commander" in graph.exited())
    wall = time.monotonic() - started
    if not report_path.exists():
        print(f"error: the demo produced no report within {args.timeout:.0f} s; see the node output above",
              file=sys.stderr)
        return 1
    report = json.loads(report_path.read_text())
    png = plot_tracking(report_path.with_suffix(".npz"), out / "tracking.png")
    print(f"\n=== sim2real demo: {report['robot']} ===")
    for key, value in report.items():
        if key != "robot":
            print(f"  {key:38s} {value:.4g}" if isinstance(value, float) else f"  {key:38s} {value}")
    print(f"  {'wall time [s]':38s} {wall:.1f}")
    print(f"  plot: {png}\n  report: {report_path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sim2real", formatter_class=_Formatter,
        description="Take a robot policy from PyBullet to hardware under ROS 2.",
        epilog="examples:\n  sim2real demo --robot go2\n  sim2real up --robot panda --hardware sim --duration 10\n")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    up = sub.add_parser("up", formatter_class=_Formatter, help="bring up the node graph (what bringup.launch.py runs)",
                        description="Run the node plan for a robot as processes, without `ros2 launch`.\n"
                                    "Same plan as `ros2 launch sim2real bringup.launch.py`.",
                        epilog="examples:\n  sim2real up --robot go2 --hardware sim --duration 30\n"
                               "  sim2real up --robot go2 --lockstep --print-plan\n")
    _add_graph_arguments(up)
    up.add_argument("--hardware", default="sim", choices=HARDWARE_CHOICES,
                    help="sim: PyBullet robot; topic: a real driver speaks the hardware contract")
    up.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: run until Ctrl-C)")
    up.add_argument("--demo", action="store_true", help="add pose_commander (hold, then move the joints)")
    up.add_argument("--print-plan", action="store_true", help="print the node plan as JSON and exit")
    up.set_defaults(func=cmd_up)

    demo = sub.add_parser("demo", formatter_class=_Formatter, help="run the simulated robot through the ROS 2 graph "
                                                                   "and print what was measured",
                          description="Bring up the sim graph with pose_commander: hold the default pose, move every "
                                      "joint, then report tracking error and the /joint_states rate, and plot it.",
                          epilog="examples:\n  sim2real demo --robot go2\n  sim2real demo --robot panda --lockstep\n")
    _add_graph_arguments(demo)
    demo.add_argument("--out", default="runs/demo", help="folder for the report and the plot")
    demo.add_argument("--timeout", type=float, default=90.0, help="give up after this many wall seconds")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ProfileError, PlanError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
