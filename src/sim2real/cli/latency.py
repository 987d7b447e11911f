"""`sim2real dr from-latency`: the latency a robot measured -> a training randomization."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def cmd_dr_from_latency(args: argparse.Namespace) -> int:
    import yaml

    from sim2real.core.config_files import ConfigError
    from sim2real.core.latency import latency_randomization, read_latency_log
    from sim2real.sim.randomization import load_randomization

    try:
        data, summary = latency_randomization(read_latency_log(args.logs), name=args.name or Path(args.output).stem)
        if args.base:
            # Every other condition as the base draws it (its own latency replaced by the measured one).
            base = load_randomization(args.base).to_dict()
            data = {**base, "name": data["name"], "parameters": {**base["parameters"], **data["parameters"]}}
    except (ValueError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Written by `sim2real dr from-latency` from {', '.join(args.logs)}: {summary['samples']} samples, "
        f"p1 {summary['p1_s'] * 1e3:.1f} ms, p50 {summary['p50_s'] * 1e3:.1f} ms, p99 {summary['p99_s'] * 1e3:.1f} ms, "
        f"max {summary['max_s'] * 1e3:.1f} ms (sensor -> command + command -> actuation)"
        + (f"; every other condition as in {args.base}" if args.base else "")
        + ".\n"
    )
    out.write_text(header + yaml.safe_dump(data, sort_keys=False))
    load_randomization(out)  # what training will do with it: fail here, not there
    if args.json:
        print(json.dumps({"output": str(out), **data, "measured": summary}))
    else:
        low_high = data["parameters"]["latency"]
        print(
            f"wrote {out}: latency {low_high} s (measured p50 {summary['p50_s'] * 1e3:.1f} ms, "
            f"p99 {summary['p99_s'] * 1e3:.1f} ms over {summary['samples']} samples)\n"
            f"  train with it: sim2real train ... --config <train config with randomization: {out}>"
        )
    return 0


def add_dr_from_latency(dr_sub, formatter) -> None:
    parser = dr_sub.add_parser(
        "from-latency",
        formatter_class=formatter,
        help="measured latency -> a randomization YAML",
        description="Turn the latency policy_runtime measured on the robot (sensor -> command publish -> "
        "actuation, logged with -p latency_log:=FILE) into a randomization of the 'latency' "
        "condition, uniform over the measured [p1, p99], in the config/randomization format.",
        epilog="examples:\n  sim2real up --robot panda --hardware topic --policy p.onnx --latency-log lat.jsonl\n"
        "  (or: ros2 run sim2real policy_runtime --ros-args -p robot:=panda -p policy_path:=p.onnx "
        "-p latency_log:=lat.jsonl)\n"
        "  sim2real dr from-latency lat.jsonl -o config/randomization/robot1_latency.yaml\n"
        "  sim2real dr from-latency lat.jsonl --base config/randomization/robot1_identified.yaml "
        "-o config/randomization/robot1_measured.yaml\n",
    )
    parser.add_argument("logs", nargs="+", help="latency log files (JSON lines) written by policy_runtime")
    parser.add_argument("-o", "--output", required=True, help="randomization YAML to write")
    parser.add_argument("--name", default="", help="randomization name (default: the output file's stem)")
    parser.add_argument(
        "--base",
        default="",
        help="a randomization (name or path) supplying every other condition, e.g. one from "
        "`dr from-sysid`; its latency is replaced by the measured one (default: latency alone)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(func=cmd_dr_from_latency)
