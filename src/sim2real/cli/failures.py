"""`sim2real failures list|show|replay|export`: look at, plot, replay and ship failure bundles.

Bundles are what ``failure_collector`` writes (see :mod:`sim2real.core.failure_bundle`):
a rosbag2 directory (metadata.yaml + MCAP) with ``failure.json`` beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np

from sim2real.core.bags import BagReadError, read_bag
from sim2real.core.failure_bundle import Bundle, find_bundle, list_bundles
from sim2real.core.failure_config import load_failure_config
from sim2real.core.rotations import tilt_angle
from sim2real.core.units import NS_PER_S


def default_dir() -> Path:
    return Path(load_failure_config("default").output_dir).expanduser()


def _resolve(args: argparse.Namespace) -> Path:
    return Path(args.dir).expanduser() if args.dir else default_dir()


# ------------------------------------------------------------------ list
def bundle_row(bundle: Bundle) -> dict[str, Any]:
    info = bundle.info
    policy = info.get("policy") or {}
    sha = policy.get("sha256") or next((s.get("sha256") for s in (info.get("policy_runtime") or {}).values()), "")
    return {
        "name": bundle.name,
        "kind": info.get("kind", "?"),
        "reason": info.get("reason", ""),
        "robot": info.get("robot", "?"),
        "time": info.get("wall_time", ""),
        "policy_sha256": sha or "",
        "size_mb": round(bundle.size_bytes() / 1e6, 2),
        "path": str(bundle.path),
    }


def cmd_list(args: argparse.Namespace) -> int:
    root = _resolve(args)
    rows = [bundle_row(b) for b in list_bundles(root)]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"no failure bundles in {root} (the failure_collector node writes them; `--dir` looks elsewhere)")
        return 0
    print(f"{len(rows)} failure bundle(s) in {root}:")
    print(f"{'NAME':44} {'ROBOT':6} {'POLICY':12} {'MB':>6}  REASON")
    for r in rows:
        print(f"{r['name']:44} {r['robot']:6} {r['policy_sha256'][:12]:12} {r['size_mb']:6.2f}  {r['reason']}")
    return 0


# ------------------------------------------------------------------ show
def bundle_series(bundle: Bundle) -> dict[str, Any]:
    """Time series around the event (seconds relative to it): joints, tilt, commands, modes."""
    event = int(bundle.info.get("time_ns", 0))
    series: dict[str, list] = {
        "q_t": [],
        "q": [],
        "tilt_t": [],
        "tilt": [],
        "policy_t": [],
        "policy": [],
        "cmd_t": [],
        "cmd": [],
        "mode_t": [],
        "mode": [],
    }
    names = None
    for topic, t, msg in read_bag(bundle.path):
        rel = (t - event) / NS_PER_S
        if topic == "/joint_states":
            names = names or list(msg.name)
            series["q_t"].append(rel)
            series["q"].append(np.asarray(msg.position, float))
        elif topic == "/imu/data":
            o = msg.orientation
            series["tilt_t"].append(rel)
            series["tilt"].append(math.degrees(tilt_angle((o.x, o.y, o.z, o.w))))
        elif topic == "/policy/joint_commands" and len(msg.position):
            series["policy_t"].append(rel)
            series["policy"].append(np.asarray(msg.position, float))
        elif topic == "/joint_commands" and len(msg.position):
            series["cmd_t"].append(rel)
            series["cmd"].append(np.asarray(msg.position, float))
        elif topic == "/safety/status" and msg.status:
            series["mode_t"].append(rel)
            series["mode"].append(msg.status[0].message)
    series["joint_names"] = names or []
    return series


def plot_bundle(bundle: Bundle, png: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = bundle_series(bundle)
    has_tilt = bool(s["tilt"])
    rows = 3 if has_tilt else 2
    fig, axes = plt.subplots(rows, 1, figsize=(10, 2.6 * rows), sharex=True)
    ax = axes[0]
    if s["q"]:
        q = np.vstack(s["q"])
        for j in range(q.shape[1]):
            ax.plot(s["q_t"], q[:, j], lw=0.8, label=s["joint_names"][j] if j < len(s["joint_names"]) else None)
    ax.set_ylabel("joint position (rad)")
    ax.set_title(f"{bundle.name}: {bundle.info.get('reason', '')}", fontsize=9)
    if s["q"] and q.shape[1] <= 12:
        ax.legend(fontsize=6, ncol=4, loc="upper left")
    ax = axes[1]
    for key, style, label in (("policy", "-", "policy target"), ("cmd", ":", "supervisor command")):
        if s[key]:
            values = np.vstack([v for v in s[key]])
            for j in range(values.shape[1]):
                ax.plot(s[f"{key}_t"], values[:, j], style, lw=0.8, label=label if j == 0 else None)
    ax.set_ylabel("commanded (rad)")
    if s["policy"] or s["cmd"]:
        ax.legend(fontsize=7, loc="upper left")
    if has_tilt:
        axes[2].plot(s["tilt_t"], s["tilt"], color="k", lw=1.0)
        axes[2].set_ylabel("base tilt (deg)")
    changes = [(t, m) for i, (t, m) in enumerate(zip(s["mode_t"], s["mode"])) if i == 0 or m != s["mode"][i - 1]]
    for ax in axes:
        ax.axvline(0.0, color="r", lw=1.0)
        for t, _ in changes[1:]:
            ax.axvline(t, color="grey", lw=0.6, ls="--")
    for t, m in changes[1:]:
        axes[0].annotate(m, (t, 1.0), xycoords=("data", "axes fraction"), fontsize=7, va="top", rotation=90)
    axes[-1].set_xlabel("time from the event (s)")
    fig.tight_layout()
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return png


def cmd_show(args: argparse.Namespace) -> int:
    bundle = find_bundle(_resolve(args), args.bundle)
    png = plot_bundle(bundle, args.plot or bundle.path.parent / f"{bundle.name}.png") if not args.no_plot else None
    if args.json:
        print(json.dumps({**bundle.info, "path": str(bundle.path), "plot": str(png) if png else None}, indent=2))
        return 0
    info = bundle.info
    print(f"{bundle.name}  ({bundle.path})")
    print(f"  reason   {info.get('reason')}")
    for extra in info.get("triggers", [])[1:]:
        print(f"  also     {extra['reason']}")
    print(f"  robot    {info.get('robot')} ({info.get('hardware', 'hardware unknown')}), at {info.get('wall_time')}")
    policy = info.get("policy") or {}
    print(f"  policy   {policy.get('path', '?')} sha256 {str(policy.get('sha256', '?'))[:16]}")
    print(f"  conditions {json.dumps(info.get('conditions', 'unknown'))}")
    sup = info.get("supervisor") or {}
    failing = {k: v for k, v in (sup.get("checks") or {}).items() if v != "ok"}
    print(
        f"  supervisor {sup.get('mode', '?')} (last trip: {sup.get('last_trip') or 'none'}); "
        f"failing checks: {failing or 'none'}"
    )
    for node, stats in (info.get("latency") or {}).items():
        print(f"  latency  {node}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    w = info.get("window", {})
    print(f"  window   {w.get('pre_event_s')} s before, {w.get('post_event_s')} s after; topics:")
    for topic, t in (info.get("topics") or {}).items():
        print(f"    {topic:26} {t['messages']:6d}  {t['type']}")
    if png:
        print(f"  plot     {png}")
    return 0


# ------------------------------------------------------------------ replay
def cmd_replay(args: argparse.Namespace) -> int:
    from sim2real.evaluate.failure_replay import ReplayError, replay_failure

    root = _resolve(args)
    every = args.bundle == "all"
    bundles = list_bundles(root) if every else [find_bundle(root, args.bundle)]
    results, skipped = [], []
    for bundle in bundles:
        try:
            for seed in range(args.runs):
                results.append(replay_failure(bundle, args.policy, lead_s=args.lead, seed=seed))
        except (ReplayError, BagReadError) as exc:
            if not every:
                raise
            skipped.append(f"{bundle.name}: {exc}" if isinstance(exc, BagReadError) else str(exc))
            # one bundle that cannot replay does not stop the others
    for reason in skipped:
        print(f"skipped {reason}", file=sys.stderr)
    if every and not results:
        raise ReplayError(
            f"none of the {len(bundles)} bundles in {root} could be replayed (reasons above)"
            if bundles
            else f"no failure bundles in {root}"
        )
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
    else:
        for r in results:
            verdict = "FAILS AGAIN" if r.failed else "no failure"
            print(
                f"{r.bundle} seed {r.seed}: {verdict} after {r.survived_s:.2f} of {r.duration_s:.2f} s "
                f"({r.reason}); policy {Path(r.policy).name}; max tilt {r.max_tilt_deg} deg"
            )
            for note in r.notes:
                print(f"    note: {note}")
        again = sum(r.failed for r in results)
        print(f"{again} of {len(results)} replays failed again")
    return 1 if any(r.failed for r in results) else 0


# ------------------------------------------------------------------ export
def cmd_snapshot(args: argparse.Namespace) -> int:
    from sim2real.nodes.trigger_call import call_trigger

    ok, message = call_trigger(f"{args.node.rstrip('/')}/snapshot", args.timeout)
    print(f"{'snapshot' if ok else 'no snapshot'}: {message}")
    return 0 if ok else 1


def cmd_export(args: argparse.Namespace) -> int:
    root = _resolve(args)
    bundles = list_bundles(root) if args.bundle == "all" else [find_bundle(root, args.bundle)]
    if not bundles:
        print(f"no failure bundles in {root} to export")
        return 1
    out = Path(args.output)
    if out.name.endswith((".tar.gz", ".tgz")):
        out.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(out, "w:gz") as tar:
            for bundle in bundles:
                tar.add(bundle.path, arcname=bundle.name)
    else:
        out.mkdir(parents=True, exist_ok=True)
        for bundle in bundles:
            if not (out / bundle.name).exists():
                shutil.copytree(bundle.path, out / bundle.name)
    print(f"exported {len(bundles)} bundle(s) to {out}")
    return 0


def add_parser(sub, fmt: type[argparse.HelpFormatter] = argparse.RawDescriptionHelpFormatter) -> None:
    """The `failures` command and its actions, on the main parser's subparsers."""
    failures = sub.add_parser(
        "failures",
        formatter_class=fmt,
        help="list, plot, replay and export failure bundles from the robot",
        description="The failure_collector node keeps the last seconds of the robot's topics in memory and, when\n"
        "the supervisor damps or e-stops, the robot falls, the policy outputs NaN or saturates, its\n"
        "latency overruns, a sensor goes silent or an operator calls ~/snapshot, writes a bundle:\n"
        "a rosbag2 directory (metadata.yaml + MCAP, `ros2 bag info` reads it) with failure.json\n"
        "(reason, robot, policy sha256 and metadata, conditions, supervisor checks, latency).",
        epilog="examples:\n  sim2real failures list\n  sim2real failures show 20261130T0418  # a unique prefix is enough\n"
        "  sim2real failures replay all --policy runs/reach/policy.onnx\n"
        "  sim2real failures export all -o failures.tar.gz\n"
        "then: sim2real pipeline run --robot panda --policy policies/panda_reach.onnx --dry-run\n"
        "      # failures -> adapted randomization -> retrained, validated, hot-swapped policy\n",
    )
    actions = failures.add_subparsers(dest="failures_command", required=True, metavar="ACTION")

    def action(name, help_text, description, epilog, func):
        p = actions.add_parser(name, formatter_class=fmt, help=help_text, description=description, epilog=epilog)
        p.add_argument(
            "--dir", help=f"bundle folder (default: output_dir of config/failures/default.yaml, {default_dir()})"
        )
        p.set_defaults(func=func)
        return p

    p = action(
        "list",
        "a table of the bundles, oldest first",
        "One line per bundle: name (UTC time and kind), robot, policy sha256, size, reason.",
        "example:\n  sim2real failures list --dir /data/failures",
        cmd_list,
    )
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p = action(
        "show",
        "what failed, with a plot of the window",
        "Print failure.json in words and plot joint positions, policy targets and supervisor commands,\n"
        "and base tilt, against time from the event (red line); dashed lines are supervisor mode changes.",
        "example:\n  sim2real failures show 20261130T041815 --plot fall.png",
        cmd_show,
    )
    p.add_argument("bundle", help="bundle name, unique name prefix or path")
    p.add_argument("--plot", help="PNG to write (default: <bundle>.png beside the bundle)")
    p.add_argument("--no-plot", action="store_true", help="no plot")
    p.add_argument("--json", action="store_true", help="print failure.json (and the plot's path) as JSON")
    p = action(
        "replay",
        "re-run the event in simulation; does the policy fail again?",
        "Start the simulated robot in the recorded state LEAD seconds before the event, under the recorded\n"
        "conditions, with the recorded goal or velocity command, and run the policy through the same\n"
        "policy slot and safety supervisor as on the robot. It fails again if the supervisor trips, the\n"
        "output is not finite or the base falls. Exit status 1 if any replay failed again.",
        "examples:\n  sim2real failures replay 20261130T041815\n"
        "  sim2real failures replay all --policy runs/reach/policy.onnx --runs 3 --json",
        cmd_replay,
    )
    p.add_argument("bundle", help="bundle name, unique prefix, path, or 'all'")
    p.add_argument("--policy", help="policy to replay with (default: the one recorded in failure.json)")
    p.add_argument("--lead", type=float, default=1.0, help="seconds before the event to start from")
    p.add_argument("--runs", type=int, default=1, help="replays per bundle (seeds 0..N-1: sensor noise)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p = actions.add_parser(
        "snapshot",
        formatter_class=fmt,
        help="ask the running collector for a bundle now",
        description="The operator's ~/snapshot of the running failure_collector: it writes a "
        "bundle of the last seconds\nas for a failure (`ros2 service call "
        "/failure_collector/snapshot std_srvs/srv/Trigger`, without ros2).",
        epilog="example:\n  sim2real failures snapshot\nthen: sim2real failures list\n",
    )
    p.add_argument("--node", default="/failure_collector", help="the failure_collector node")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for its answer")
    p.set_defaults(func=cmd_snapshot)
    p = action(
        "export",
        "copy bundles to a folder or a .tar.gz, for a workstation",
        "Copy whole bundles (bag + failure.json) to a folder, or pack them into one .tar.gz when OUTPUT\n"
        "ends in .tar.gz or .tgz. Bundles already in the folder are left alone.",
        "examples:\n  sim2real failures export all -o robot1_failures.tar.gz\n"
        "  sim2real failures export 20261130T041815 -o /mnt/usb/failures/",
        cmd_export,
    )
    p.add_argument("bundle", help="bundle name, unique prefix, path, or 'all'")
    p.add_argument("-o", "--output", required=True, help="folder, or a .tar.gz file")
