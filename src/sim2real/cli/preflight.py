"""`sim2real preflight`: the checks the Go2 bridge runs before it commands, from a terminal."""

from __future__ import annotations

import argparse
import sys
import time


def clock_note() -> str:
    """A NOTE line when this computer's system clock is not synchronised ('' when it is, or when
    the kernel cannot say): this computer's, not the robot's, so no reason to refuse."""
    from sim2real.core.steady_time import CLOCK_NOT_SYNCHRONISED, system_clock_synchronised

    return f"NOTE {CLOCK_NOT_SYNCHRONISED}" if system_clock_synchronised() is False else ""


def cmd_preflight(args: argparse.Namespace) -> int:
    from sim2real.core.robot_profile import load_profile
    from sim2real.core.unitree.dds import UnitreeDds
    from sim2real.core.unitree.low_level import Go2LowLevel
    from sim2real.core.unitree.preflight import preflight

    profile = load_profile(args.robot)
    try:
        low_level = Go2LowLevel(profile)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dds = UnitreeDds(args.domain, args.network_interface)
    print(
        f"listening to rt/lowstate on DDS domain {args.domain}, interface {args.network_interface or 'default'} "
        f"for {args.window:g} s ...",
        flush=True,
    )
    time.sleep(1.0)  # discovery: the robot's writer, any rival rt/lowcmd writer and a second robot
    while dds.take_state_values(timeout=0.0):  # queued during discovery: not part of the window
        pass
    received = []
    start = time.monotonic()
    while time.monotonic() - start < args.window:
        for values in dds.take_state_values(timeout=0.1):
            received.append((time.monotonic(), low_level.read_values(values)))
    failures = preflight(received, args.window, profile, *dds.rivals())
    dds.close()
    note = clock_note()
    if note:
        print(note)
    for line in failures:
        print(f"FAIL {line}")
    if failures:
        print(f"{len(failures)} check(s) failed: the bridge (hardware:=unitree) will not command the robot")
        return 1
    latest = received[-1][1]
    print(
        f"all checks passed: {len(received) / args.window:.0f} Hz lowstate, battery {latest.battery_voltage:.1f} V, "
        f"hottest motor {latest.motor_temperature.max():.0f} C"
    )
    return 0


def add_parser(sub, formatter) -> None:
    parser = sub.add_parser(
        "preflight",
        formatter_class=formatter,
        help="check a Unitree Go2 before the bridge may command it",
        description="Wait a second for DDS discovery, then listen to the robot's rt/lowstate for a window and run "
        "the checks unitree_bridge runs before "
        "it forwards any command:\nrate >= 90 %, tick advancing, CRCs valid, unit IMU quaternion, joints "
        "inside their limits, battery and motor temperatures,\nno other writer on rt/lowcmd (the "
        "robot's sport mode) and one robot on rt/lowstate. Each failure is one line: value, limit, fix. Exit code 1 if any failed.\n"
        "A NOTE line (no failure) says when this computer's system clock is not synchronised.",
        epilog="example:\n  sim2real preflight --robot go2 --network-interface eth0\n",
    )
    parser.add_argument("--robot", default="go2", help="robot profile with a unitree: section (default go2)")
    parser.add_argument(
        "--hardware",
        default="unitree",
        choices=["unitree"],
        help="the robot's interface (only unitree has a preflight)",
    )
    parser.add_argument("--network-interface", default="", help="interface on the robot's subnet, e.g. eth0")
    parser.add_argument("--domain", type=int, default=0, help="DDS domain of the robot's topics (a Go2: 0)")
    parser.add_argument("--window", type=float, default=1.0, help="s of lowstate to judge (default 1)")
    parser.set_defaults(func=cmd_preflight)
