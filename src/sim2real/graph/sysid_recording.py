"""The sysid recording graph: the bringup plan's hardware and safety part plus sysid_logger.

``launch/sysid_record.launch.py`` and ``sim2real sysid record`` both render
:func:`make_sysid_plan`, as bringup.launch.py and ``sim2real up`` render the bringup plan;
the hardware part comes from :func:`sim2real.graph.plan.make_plan` itself, so the sysid
recording runs exactly the robot (sim or real) that bringup runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sim2real.core.robot_profile import load_profile
from sim2real.graph.plan import (
    BOOL_CHOICES,
    LAUNCH_ARGUMENTS,
    SIMULATED_HARDWARE,
    SIMULATED_ROBOT_ARGUMENTS,
    BringupPlan,
    LaunchArgument,
    NodeSpec,
    PlanError,
    make_plan,
    node_environment,
    parse_bool,
    require_suspendable,
)

# The bringup arguments a recording shares, meaning the same: the hardware part (ros2_control and
# the Go2's own interface included) and the supervisor; the policy and demo ones do not apply.
SHARED = (
    "robot",
    "hardware",
    "network_interface",
    "unitree_domain",
    "controller",
    "controller_joints",
    "lockstep",
    "seed",
    "conditions",
    *SIMULATED_ROBOT_ARGUMENTS,
    "safety_config",
    "realtime",
    "realtime_cpus",
)
SYSID_ARGUMENTS: dict[str, LaunchArgument] = {
    **{name: LAUNCH_ARGUMENTS[name] for name in SHARED},
    **{
        a.name: a
        for a in (
            LaunchArgument("bag", "", "rosbag2 directory to create (required; must not exist)"),
            LaunchArgument(
                "kind", "fourier", "excitation: fourier | multisine | chirp", ("fourier", "multisine", "chirp")
            ),
            LaunchArgument("duration", "40.0", "excitation seconds"),
            LaunchArgument("joints", "", "comma-separated joints to excite ('' = all)"),
            LaunchArgument(
                "amplitude",
                "auto",
                "each joint's largest excursion, rad (limits may lower it; auto: 0.6, or "
                "0.1 for a quadruped standing on its feet)",
            ),
            LaunchArgument(
                "legs",
                "auto",
                "a quadruped: 0 every joint at once, 1 one leg at a time, 2 a diagonal pair "
                "(auto: 1 standing, 0 suspended); a standing plan is checked in sim first",
            ),
            LaunchArgument("f_min", "0.1", "lowest frequency, Hz"),
            LaunchArgument("f_max", "1.0", "highest frequency, Hz"),
            LaunchArgument("velocity_fraction", "0.5", "peak speed as a fraction of the velocity limit"),
            LaunchArgument("excitation_seed", "0", "seed of the Fourier coefficient search"),
            LaunchArgument("extra_topics", "", "comma-separated 'topic:pkg/msg/Type' to record as well"),
            LaunchArgument(
                "start_timeout",
                "60.0",
                "wall seconds to get the robot engaged (stand-up, engage, one reset "
                "after a trip) before the recorder gives up and says why",
            ),
            LaunchArgument(
                "suspended",
                "false",
                "the robot hangs on a stand, feet clear of the ground (sim: sim_robot "
                "holds it so), and the fit replays it hanging; a quadruped on the "
                "ground excites only small motions",
                BOOL_CHOICES,
            ),
        )
    },
}
_FLOATS = ("duration", "f_min", "f_max", "velocity_fraction", "start_timeout")
AUTO = "auto"  # amplitude and legs: the logger picks them for the robot (excitation_defaults)


def make_sysid_plan(**arguments: Any) -> BringupPlan:
    unknown = sorted(set(arguments) - set(SYSID_ARGUMENTS))
    if unknown:
        raise PlanError(f"unknown sysid launch arguments {unknown}; known: {sorted(SYSID_ARGUMENTS)}")
    values = {name: arguments.get(name, arg.default) for name, arg in SYSID_ARGUMENTS.items()}
    if not str(values["bag"]):
        raise PlanError("launch argument bag:=DIR is required: the rosbag2 directory to create")
    if Path(str(values["bag"])).exists():
        raise PlanError(f"bag:={values['bag']} exists already; choose a new directory (bags are never overwritten)")
    # Only the hardware, the supervisor and the logger: the excitation needs no estimate, and the
    # logger's bag already records what a failure bundle would.
    suspended = parse_bool("suspended", values["suspended"])
    # On hardware the robot is on its stand already: only the bag says so.
    base = make_plan(
        **{name: values[name] for name in SHARED},
        estimator="false",
        failure_collector="false",
        suspended=suspended and str(values["hardware"]) in SIMULATED_HARDWARE,
    )
    if suspended:
        require_suspendable(load_profile(base.robot))
    logger: dict[str, Any] = {
        "robot": base.robot,
        "bag": str(Path(str(values["bag"])).absolute()),
        "use_sim_time": base.use_sim_time,
        "hardware": base.hardware,
        "conditions": str(values["conditions"]) if base.known_conditions else "",
        "suspended": suspended,
    }
    for name in ("kind", "joints", "extra_topics"):
        logger[name] = str(values[name])
    try:
        for name in _FLOATS:
            logger[name] = float(values[name])
        logger["excitation_seed"] = int(values["excitation_seed"])
        # The logger's parameters are typed: 0.0 and -1 stand for auto.
        logger["amplitude"] = 0.0 if str(values["amplitude"]) == AUTO else float(values["amplitude"])
        logger["legs"] = -1 if str(values["legs"]) == AUTO else int(values["legs"])
        if str(values["amplitude"]) != AUTO and not logger["amplitude"] > 0:
            raise ValueError(f"amplitude:={values['amplitude']} must be > 0 rad (or auto)")
        if logger["legs"] not in (-1, 0, 1, 2):
            raise ValueError(f"legs:={values['legs']} must be 0, 1, 2 or auto")
    except (TypeError, ValueError) as exc:
        raise PlanError(
            f"sysid launch argument: {exc}; numbers expected for {list(_FLOATS)}, excitation_seed, "
            "amplitude and legs (or auto for the last two)"
        ) from None
    _check_excitation(load_profile(base.robot), logger)
    # The logger commands the robot in the policy's place, under the supervisor's check of the
    # command's age (tick_overrun): it is the chain's control part, at the policy's priority.
    nodes = (
        *base.nodes,
        NodeSpec(
            "sysid_logger",
            "sysid_logger",
            "control",
            logger,
            environment=node_environment("control", base.realtime, base.realtime_cpus),
        ),
    )
    return replace(base, nodes=nodes)


def _check_excitation(profile, logger: dict[str, Any]) -> None:
    """The logger's excitation arguments as it will build them (its amplitude and legs defaults
    included), checked here: a bad one is refused before any process starts, not by the logger
    after the robot has stood up."""
    from sim2real.sysid.excitation import ExcitationError, check_excitation, recording_arguments

    try:
        check_excitation(
            profile,
            **recording_arguments(
                profile,
                logger["suspended"],
                *(
                    logger[name]
                    for name in (
                        "kind",
                        "joints",
                        "duration",
                        "amplitude",
                        "f_min",
                        "f_max",
                        "velocity_fraction",
                        "legs",
                    )
                ),
            ),
        )
    except ExcitationError as exc:
        raise PlanError(f"sysid excitation: {exc}") from None


def sysid_plan_from_args(args: argparse.Namespace) -> BringupPlan:
    """The plan of `sim2real sysid record`'s arguments (PlanError or ValueError when they are wrong)."""
    hardware_part = {
        "network_interface": args.network_interface,
        "unitree_domain": args.unitree_domain,
        "controller": args.controller,
        "controller_joints": args.controller_joints,
    }
    return make_sysid_plan(
        robot=args.robot,
        hardware=args.hardware,
        lockstep=args.lockstep,
        seed=args.seed,
        conditions=args.conditions,
        bag=args.output,
        kind=args.kind,
        duration=args.duration,
        joints=",".join(args.joints or []),
        amplitude=AUTO if args.amplitude is None else args.amplitude,
        legs=AUTO if args.legs is None else args.legs,
        f_min=args.f_min,
        f_max=args.f_max,
        velocity_fraction=args.velocity_fraction,
        excitation_seed=args.excitation_seed,
        extra_topics=",".join(args.topics or []),
        suspended=args.suspended,
        start_timeout=args.start_timeout,
        realtime=getattr(args, "realtime", False),
        realtime_cpus=getattr(args, "realtime_cpus", ""),
        **{name: value for name, value in hardware_part.items() if value is not None},
        **{name: getattr(args, name) for name in SIMULATED_ROBOT_ARGUMENTS if hasattr(args, name)},
    )


def record_on_graph(args: argparse.Namespace) -> int:
    """`sim2real sysid record`: run the plan as processes until the logger finishes."""
    from sim2real.graph.processes import GraphProcesses

    try:
        plan = sysid_plan_from_args(args)
    except (PlanError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    timeout = args.timeout or args.start_timeout + args.duration * 4 + 60.0
    print(f"starting {', '.join(n.name for n in plan.nodes)}; recording to {args.output} (Ctrl-C stops)", flush=True)
    graph = GraphProcesses(plan)
    started = time.monotonic()
    try:
        graph.start()
        reason = graph.wait(duration=timeout, until=lambda: "sysid_logger" in graph.exited())
    except KeyboardInterrupt:
        reason = "interrupted"
    codes = graph.stop()
    logger_code = codes.get("sysid_logger")
    aborted = _aborted_reason(Path(args.output))
    if reason == "duration":
        print(
            f"error: the recording did not finish within {timeout:.0f} s (--timeout)"
            + (f": {aborted}" if aborted else "")
            + ". The bag is kept, marked completed: false; sysid fit "
            "refuses it",
            file=sys.stderr,
        )
        return 1
    if logger_code not in (0, None):
        print(
            f"error: the recording stopped: {aborted or f'sysid_logger exited with {logger_code}'}; see the "
            "output above. The bag is kept, marked completed: false",
            file=sys.stderr,
        )
        return 1
    print(
        f"recorded {args.output} in {time.monotonic() - started:.0f} s\n"
        + next_steps(args.output, args.robot, args.suspended)
    )
    return 0


def next_steps(bag: str, robot: str, suspended: bool) -> str:
    """What to run on a finished recording: its fit; for a legged robot recorded standing (its
    feet carrying it), first the weighing, which a fit on a stand cannot do, with that fit."""
    identified = f"config/identified/{Path(robot).stem}.yaml"
    profile = load_profile(robot)
    if suspended or profile.fixed_base or not profile.foot_links:
        return f"next: sim2real sysid fit {bag} --robot {robot} -o {identified}"
    return (
        f"next: sim2real sysid weigh {bag} --robot {robot} --fit {identified} "
        f"-o {identified.removesuffix('.yaml')}_weighed.yaml\n"
        f"      (the whole robot's mass, with {identified} from a recording on a stand: sysid record --suspended)\n"
        f"  or fit this standing bag (approximate): sim2real sysid fit {bag} --robot {robot} "
        f"-o {identified.removesuffix('.yaml')}_standing.yaml"
    )


def _aborted_reason(bag: Path) -> str:
    """The reason the logger wrote into the bag when it aborted ('' if none)."""
    from sim2real.core.bags import bag_information

    return str((bag_information(bag).get("custom_data") or {}).get("aborted") or "")
