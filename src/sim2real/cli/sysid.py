"""`sim2real sysid ...` and `sim2real dr from-sysid`: the command-line side of system identification.

Kept apart from cli/main.py (which only registers these commands) so the sysid workflow reads
in one file: record -> fit -> dr from-sysid -> train.
"""

from __future__ import annotations

import argparse
import json
import sys

WORKFLOW = (
    "workflow:\n"
    "  1. record   sim2real sysid record --robot panda --hardware topic -o bags/panda_sysid_1\n"
    "              (on the robot; the excitation goes through the safety supervisor)\n"
    "  2. fit      sim2real sysid fit bags/panda_sysid_1 --robot panda -o config/identified/panda.yaml\n"
    "  3. re-centre sim2real dr from-sysid config/identified/panda.yaml -o config/randomization/panda_identified.yaml\n"
    "  4. train    set 'randomization: panda_identified' in a training config; sim2real train --config it\n"
)


def _positive_seconds(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give a number of seconds > 0")
    return value


def _fail(exc: Exception, code: int = 2) -> int:
    print(f"error: {exc}", file=sys.stderr)
    return code


def _excitation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kind",
        default="fourier",
        choices=("fourier", "multisine", "chirp"),
        help="fourier: coefficients chosen for a low rigid-body regressor condition number; "
        "multisine: each joint on its own frequency lines; chirp: sweep f-min -> f-max",
    )
    parser.add_argument("--duration", type=float, default=40.0, help="excitation seconds (plus 2 x ramp inside)")
    parser.add_argument("--joints", nargs="+", help="joints to excite (default: all; the others hold the default pose)")
    parser.add_argument(
        "--amplitude",
        type=float,
        default=None,
        help="each joint's largest excursion, rad (limits may lower it; default 0.6, or 0.1 for a "
        "quadruped standing on its feet)",
    )
    parser.add_argument(
        "--legs",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="a quadruped: 0 moves every joint at once, 1 one leg at a time, 2 a diagonal pair at a "
        "time (default 1 standing, 0 with --suspended). A standing robot's plan is played in "
        "simulation first and refused if it would tip the robot over",
    )
    parser.add_argument("--f-min", type=float, default=0.1, help="lowest frequency, Hz")
    parser.add_argument("--f-max", type=float, default=1.0, help="highest frequency, Hz")
    parser.add_argument(
        "--velocity-fraction",
        type=float,
        default=0.5,
        help="peak joint speed as a fraction of the profile's velocity limit",
    )
    parser.add_argument("--excitation-seed", type=int, default=0, help="seed of the Fourier coefficient search")


def _make_excitation(args: argparse.Namespace, profile):
    from sim2real.sysid.excitation import excitation_defaults, make_excitation

    amplitude, legs = excitation_defaults(profile, bool(getattr(args, "suspended", False)))
    return make_excitation(
        profile,
        args.kind,
        args.joints,
        args.duration,
        amplitude if args.amplitude is None else args.amplitude,
        args.f_min,
        args.f_max,
        velocity_fraction=args.velocity_fraction,
        seed=args.excitation_seed,
        legs=legs if args.legs is None else args.legs,
    )


def cmd_fit(args: argparse.Namespace) -> int:
    from sim2real.core.robot_profile import ProfileError, load_profile
    from sim2real.sysid.dataset import BagError, BagTopics
    from sim2real.sysid.fit import FitError, FitOptions
    from sim2real.sysid.identify_robot import identify_robot

    try:
        profile = load_profile(args.robot)
        commands, command_type = BagTopics.parse_commands(args.commands)
        topics = BagTopics(
            states=args.states,
            commands=commands,
            command_type=command_type,
            command_joints=tuple(j for j in (args.command_joints or "").split(",") if j),
            stamps=args.stamps,
        )
        options = FitOptions(
            workers=args.workers,
            max_iterations=args.max_iterations,
            cma_iterations=args.cma_iterations,
            train_seconds=args.train_seconds,
            train_fraction=args.train_fraction,
            seed=args.seed,
        )
        log = (lambda _: None) if args.json else (lambda m: print(m, flush=True))
        document = identify_robot(
            profile,
            args.bags,
            args.output,
            options,
            rigid_body=False if args.no_rigid_body else None,
            plots=not args.no_plots,
            log=log,
            topics=topics,
        )
    except (ProfileError, BagError) as exc:
        return _fail(exc)
    except FitError as exc:
        print(f"error: {exc}\nno identified parameters were written", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(f"wrote {args.output}")
        for name, entry in document["simulator"]["parameters"].items():
            print(f"  {name:16s} {entry['value']:10.5g} +- {entry['std']:.2g} {entry['unit']}")
        for name, reason in document["simulator"]["not_identified"].items():
            print(f"  not identified: {name}: {reason}")
        rmse = document["simulator"]["position_rmse_rad"]
        for key in ("heldout_before", "heldout_after"):
            print(
                f"  held-out position RMSE {key.split('_')[1]:6s}: "
                + ", ".join(f"{v * 1e3:.2f}" for v in rmse[key].values())
                + " mrad"
            )
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from sim2real.core.bags import BagWriteError
    from sim2real.core.robot_profile import ProfileError, load_profile
    from sim2real.sim.conditions import PhysicalConditions
    from sim2real.sysid.excitation import ExcitationError
    from sim2real.sysid.sim_recording import record_in_sim

    try:
        profile = load_profile(args.robot)
        conditions = PhysicalConditions.from_yaml(args.conditions, "--conditions")
        excitation = _make_excitation(args, profile)
        from sim2real.sysid.standing_check import require_standing

        require_standing(profile, excitation, args.suspended, conditions)  # as sysid_logger does before a recording
        path = record_in_sim(profile, excitation, args.output, conditions, seed=args.seed, suspended=args.suspended)
    except (ProfileError, ExcitationError, BagWriteError, ValueError, TypeError) as exc:
        return _fail(exc)
    print(f"wrote {path} ({excitation.duration:g} s {excitation.kind} excitation)")
    return 0


def cmd_weigh(args: argparse.Namespace) -> int:
    from sim2real.core.robot_profile import ProfileError, load_profile
    from sim2real.sysid.dataset import BagError, BagTopics
    from sim2real.sysid.identified_file import IdentifiedError
    from sim2real.sysid.weigh import WeighError, write_weighed

    try:
        profile = load_profile(args.robot)
        document, weighing = write_weighed(
            profile, args.bags, args.output, fit=args.fit, topics=BagTopics(states=args.states, stamps=args.stamps)
        )
    except (ProfileError, BagError, IdentifiedError, WeighError) as exc:
        return _fail(exc)
    if args.json:
        print(json.dumps(document, indent=2))
        return 0
    print(
        f"{profile.name} weighs {weighing.mass_kg:.2f} +- {weighing.std_kg:.2f} kg standing: mass_scale "
        f"{weighing.mass_scale:.4g} +- {weighing.mass_scale_std:.2g} of the model's {weighing.model_mass_kg:.2f} kg "
        f"({weighing.readings} s of standing in {len(args.bags)} bag(s))"
    )
    print(
        f"wrote {args.output}\nre-centre a randomization on it: sim2real dr from-sysid {args.output} "
        "-o config/randomization/<robot>_identified.yaml"
    )
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    from sim2real.graph.sysid_recording import record_on_graph

    return record_on_graph(args)


def cmd_dr_from_sysid(args: argparse.Namespace) -> int:
    from sim2real.core.config_files import ConfigError
    from sim2real.sysid.recentre import write_recentred

    try:
        out, kept = write_recentred(args.identified, args.output, base=args.base)
    except (ConfigError, ValueError) as exc:
        return _fail(exc)
    for name, reason in kept.items():
        print(f"{name} kept from the base randomization: {reason}")
    print(
        f"wrote {out}\ntrain on it: set 'randomization: {out.stem}' (or the path) in a copy of a training "
        f"config (config/train/<robot>_<task>.yaml), then sim2real train --config THAT.yaml --out runs/NAME"
    )
    return 0


def add_sysid_commands(sub, formatter) -> None:
    """Register `sysid` on the top-level subparsers of `sim2real`."""
    from sim2real.graph.plan import add_simulated_robot_options

    sysid = sub.add_parser(
        "sysid",
        formatter_class=formatter,
        help="system identification: record, fit, weigh, simulate",
        description="Identify the simulator's physical parameters from recordings of the robot.",
        epilog=WORKFLOW,
    )
    actions = sysid.add_subparsers(dest="sysid_command", required=True, metavar="ACTION")

    fit = actions.add_parser(
        "fit",
        formatter_class=formatter,
        help="fit simulator (and arm rigid-body) parameters to sysid bags",
        description="Replay each bag's /joint_commands in PyBullet from the recorded state and fit motor_strength,\n"
        "mass_scale, joint_friction (Coulomb), joint_damping (viscous), armature, latency (and ground_friction for\n"
        "a quadruped recorded standing; one recorded on a stand, --suspended, is replayed hanging) with\n"
        "CMA-ES then least squares, on the first --train-fraction of each bag;\n"
        "report the position RMSE on the held-out rest, before and after. For a fixed-base arm with\n"
        "efforts, also identify base inertial parameters + per-joint friction with pinocchio's torque\n"
        "regressor and check physical consistency. Writes OUTPUT (YAML) and OUTPUT.png (plots).\n"
        "A fit that does not converge says why and writes nothing.",
        epilog="examples:\n  sim2real sysid fit bags/panda_sysid_1 --robot panda -o config/identified/panda.yaml\n"
        "  sim2real sysid fit bags/a bags/b --robot panda -o ident.yaml --workers 2 --json\n\n" + WORKFLOW,
    )
    fit.add_argument("bags", nargs="+", metavar="BAG", help="rosbag2 directories (or .mcap files)")
    fit.add_argument("--robot", required=True, help="robot profile the bags were recorded on")
    fit.add_argument("-o", "--output", required=True, help="identified-parameters YAML to write")
    fit.add_argument(
        "--states",
        default="/joint_states",
        metavar="TOPIC",
        help="the bag's measured joint states (sensor_msgs/JointState; default /joint_states)",
    )
    fit.add_argument(
        "--commands",
        default="/joint_commands",
        metavar="TOPIC[:TYPE]",
        help="the bag's joint commands and their type: JointState (default), Float64MultiArray (a "
        "ros2_control forward controller: timed by receipt, values in --command-joints order) or "
        "JointTrajectory (its first point). E.g. /forward_position_controller/commands:"
        "Float64MultiArray",
    )
    fit.add_argument(
        "--command-joints",
        metavar="J1,J2,...",
        help="Float64MultiArray: the joint of each value (default: the profile's joint order)",
    )
    fit.add_argument(
        "--stamps",
        default="header",
        choices=("header", "receive"),
        help="time messages by their header.stamp (default: the driver's measurement time) or by "
        "their receipt in the bag (for drivers that leave header.stamp zero)",
    )
    fit.add_argument("--workers", type=int, default=2, help="processes replaying candidates in parallel")
    fit.add_argument(
        "--train-fraction", type=float, default=0.7, help="leading fraction of each bag fitted on; the rest is held out"
    )
    fit.add_argument(
        "--train-seconds",
        type=float,
        default=16.0,
        help="seconds of training windows replayed per candidate (more: slower, less noisy)",
    )
    fit.add_argument("--cma-iterations", type=int, default=10, help="CMA-ES iterations (global search)")
    fit.add_argument(
        "--max-iterations",
        type=int,
        default=100,  # FitOptions.max_iterations (imported lazily, with scipy behind it)
        help="least-squares steps before the fit counts as not converged (default: 100)",
    )
    fit.add_argument("--seed", type=int, default=0, help="CMA-ES seed")
    fit.add_argument("--no-rigid-body", action="store_true", help="skip the rigid-body identification")
    fit.add_argument("--no-plots", action="store_true", help="skip the before/after plot")
    fit.add_argument("--json", action="store_true", help="print the written document as JSON")
    fit.set_defaults(func=cmd_fit)

    weigh = actions.add_parser(
        "weigh",
        formatter_class=formatter,
        help="the whole robot's mass from bags of it standing (what a fit on a stand cannot see)",
        description="Weigh a legged robot from bags of it standing on its feet: in each second of standing the\n"
        "ground's force on the feet, from the motors' efforts through each leg's Jacobian (pinocchio),\n"
        "balances its weight. A fit of bags recorded on a stand (--suspended) sees the legs' masses\n"
        "only; the trunk, and any payload on it, hang from the stand. Give that fit as --fit: its legs'\n"
        "mass_scale enters the balance and OUTPUT is the fit with the weighing added, which\n"
        "'dr from-sysid' centres the mass range on. Without --fit, OUTPUT holds the weighing alone.\n"
        "Bags: 'sysid record' without --suspended (it stands the robot before the excitation and holds\n"
        "it after), or any bag with /joint_states (efforts included) of the robot standing.",
        epilog="examples:\n"
        "  sim2real sysid record --robot go2 --hardware unitree --network-interface eth0 --duration 10 -o bags/go2_standing\n"
        "  sim2real sysid weigh bags/go2_standing --robot go2 --fit config/identified/go2.yaml "
        "-o config/identified/go2_weighed.yaml\n"
        "  sim2real dr from-sysid config/identified/go2_weighed.yaml -o config/randomization/go2_identified.yaml\n",
    )
    weigh.add_argument(
        "bags", nargs="+", metavar="BAG", help="rosbag2 directories (or .mcap files) of the robot standing"
    )
    weigh.add_argument("--robot", required=True, help="robot profile the bags were recorded on")
    weigh.add_argument("-o", "--output", required=True, help="identified-parameters YAML to write")
    weigh.add_argument(
        "--fit",
        metavar="IDENTIFIED",
        help="a file written by 'sysid fit' (of bags on a stand): its legs' mass enters the balance, and OUTPUT is it "
        "with the weighing added",
    )
    weigh.add_argument("--states", default="/joint_states", metavar="TOPIC", help="the bag's joint states")
    weigh.add_argument(
        "--stamps", default="header", choices=("header", "receive"), help="time messages by header.stamp or receipt"
    )
    weigh.add_argument("--json", action="store_true", help="print the written document as JSON")
    weigh.set_defaults(func=cmd_weigh)

    simulate = actions.add_parser(
        "simulate",
        formatter_class=formatter,
        help="write a sysid bag from the simulator (no ROS needed)",
        description="Run an excitation on the simulated robot under given physical conditions and write the\n"
        "same bag 'sysid record' would: try the workflow, or check the fitter against known values.",
        epilog="example:\n  sim2real sysid simulate --robot panda -o /tmp/sysid_sim "
        "--conditions '{motor_strength: 0.9, joint_friction: 0.3, latency: 0.01, joint_position_noise: 0.001}'\n",
    )
    simulate.add_argument("--robot", required=True, help="robot profile")
    simulate.add_argument("-o", "--output", required=True, help="bag directory to create")
    simulate.add_argument("--conditions", default="{}", help="hidden physical conditions as YAML")
    simulate.add_argument("--seed", type=int, default=0, help="sensor-noise seed")
    simulate.add_argument(
        "--suspended",
        action="store_true",
        help="a quadruped hangs on a stand, feet clear of the ground (recorded; the fit replays it so)",
    )
    _excitation_arguments(simulate)
    simulate.set_defaults(func=cmd_simulate)

    record = actions.add_parser(
        "record",
        formatter_class=formatter,
        help="play an excitation through the safety supervisor and record a bag",
        description="Start the hardware part of the bringup plan (sim_robot with --hardware sim or mujoco;\n"
        "unitree_bridge with --hardware unitree, the Go2's own low-level interface; the\n"
        "ros2_control bridge with --hardware ros2_control; nothing with --hardware topic, where\n"
        "the robot's driver already runs), the safety supervisor and\n"
        "sysid_logger. The logger waits for the robot to stand, engages the supervisor, streams the\n"
        "excitation on /policy/joint_commands (the supervisor checks and forwards it), returns to the\n"
        "default pose and writes /joint_states, /imu/data, /joint_commands (+ --topics) to a rosbag2\n"
        "MCAP directory whose metadata carries the excitation, the profile hash and the time.\n"
        "Same as: ros2 launch sim2real sysid_record.launch.py robot:=R hardware:=H bag:=DIR\n"
        "A quadruped on the ground excites only small motions and its fit is approximate (the bag\n"
        "has no base state); hang it on a stand and pass --suspended for larger ones and a fit\n"
        "without that approximation (the base stays put, as in the replay).",
        epilog="examples:\n  sim2real sysid record --robot panda --hardware topic -o bags/panda_1\n"
        "  sim2real sysid record --robot go2 --hardware unitree --network-interface eth0 --suspended "
        "-o bags/go2_1\n"
        "  sim2real sysid record --robot panda --hardware ros2_control --controller "
        "forward_position_controller -o bags/panda_2\n"
        "  sim2real sysid record --robot panda --hardware sim --lockstep -o /tmp/b "
        "--conditions '{motor_strength: 0.9}' --duration 30\n"
        "  sim2real sysid record --robot go2 --hardware mujoco --reality go2_independent --suspended "
        "--lockstep -o bags/reality_1\n",
    )
    record.add_argument("--robot", required=True, help="robot profile")
    record.add_argument(
        "--hardware",
        default="sim",
        choices=("sim", "mujoco", "topic", "unitree", "ros2_control"),
        help="sim: PyBullet robot; mujoco: the MuJoCo robot (the second engine, a reality the "
        "fit's PyBullet never saw); topic: a real driver speaks the hardware contract; "
        "unitree: a Go2 through its own low-level DDS interface (unitree_bridge; "
        "docs/deploy_quadruped.md); ros2_control: an arm behind a ros2_control forward "
        "controller (docs/deploy_arm.md)",
    )
    record.add_argument(
        "--network-interface",
        default=None,
        help="unitree only: the interface on the robot's subnet, e.g. eth0 (launch: network_interface:=)",
    )
    record.add_argument(
        "--unitree-domain", default=None, help="unitree only: DDS domain of rt/lowstate and rt/lowcmd (default 0)"
    )
    record.add_argument(
        "--controller",
        default=None,
        help="ros2_control only: the forward controller (default forward_position_controller)",
    )
    record.add_argument(
        "--controller-joints",
        default=None,
        help="ros2_control only: the controller's joints in its order, comma-separated (default: the profile's order)",
    )
    record.add_argument("-o", "--output", required=True, help="bag directory to create")
    record.add_argument("--lockstep", action="store_true", help="sim only: lockstep (deterministic timing)")
    record.add_argument("--conditions", default="{}", help="sim only: hidden physical conditions as YAML")
    record.add_argument("--seed", type=int, default=0, help="sim only: noise seed")
    add_simulated_robot_options(record)
    record.add_argument("--topics", nargs="*", default=[], help="extra topics to record (standard message types)")
    record.add_argument(
        "--suspended",
        action="store_true",
        help="the quadruped hangs on a stand, feet clear of the ground: in sim, sim_robot holds it "
        "so; on hardware, hang it yourself. Recorded in the bag; the fit replays it hanging",
    )
    record.add_argument(
        "--start-timeout",
        type=_positive_seconds,
        default=60.0,
        help="wall seconds to get the robot engaged (the stand-up, the engage, one reset after a "
        "trip) before giving up with the reason (default 60)",
    )
    record.add_argument(
        "--realtime",
        action="store_true",
        help="the hardware part, the supervisor and the logger (which commands the robot) at SCHED_FIFO "
        "priority (launch: realtime:=true; docs/realtime.md)",
    )
    record.add_argument(
        "--realtime-cpus",
        default="",
        help="with --realtime: CPUs the hardware part, the supervisor and the logger are pinned to (e.g. 1)",
    )
    record.add_argument(
        "--timeout",
        type=float,
        default=0.0,
        help="give up after this many wall seconds (0: start timeout + 4 x the excitation + 60 s)",
    )
    _excitation_arguments(record)
    record.set_defaults(func=cmd_record)


def add_dr_from_sysid(dr_actions, formatter) -> None:
    """Register `dr from-sysid` in the `sim2real dr` group."""
    recentre = dr_actions.add_parser(
        "from-sysid",
        formatter_class=formatter,
        help="a randomization re-centred on identified parameters",
        description="Centre each identified condition's range on its value, with a width from its uncertainty:\n"
        "mass_scale narrow (+-max(2 std, 2 %)), motor_strength normal (std >= 3 %), friction and\n"
        "damping wide (+-max(3 std, 50 %)), armature +-max(2 std, 30 %, 0.002 kg*m^2), latency\n"
        "+-max(2 std, 2 ms). Conditions not identified (sensor noise, pushes, terrain) come from\n"
        "--base unchanged. The output loads with sim2real.sim.randomization.load_randomization\n"
        "and trains with 'randomization: NAME'.",
        epilog="example:\n  sim2real dr from-sysid config/identified/panda.yaml -o config/randomization/panda_identified.yaml\n",
    )
    recentre.add_argument("identified", metavar="IDENTIFIED", help="YAML written by sim2real sysid fit")
    recentre.add_argument("-o", "--output", required=True, help="randomization YAML to write")
    recentre.add_argument(
        "--base",
        default=None,
        help="randomization supplying the other conditions (default: <robot>_reference if it exists; 'none': no base)",
    )
    recentre.set_defaults(func=cmd_dr_from_sysid)
