"""The node plan: which nodes run for a robot and a set of launch arguments.

This is the ONE source of the node graph. ``launch/bringup.launch.py`` renders it
with launch_ros for ``ros2 launch``; ``sim2real up`` renders it as processes. Sim and
hardware differ only in the ``hardware`` argument, which changes the hardware part
of the plan and one supervisor parameter, ``simulated`` (a real robot needs the deadman and
the hardware minimum of its safety config).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from sim2real.core.controller_joints import ControllerJointOrder, ControllerJointsError, parse_joint_list
from sim2real.core.errors import InputError
from sim2real.core.launch_env import REALTIME_ENV
from sim2real.core.paths import share_dir
from sim2real.core.realtime import CHAIN_ENVIRONMENT, ROLE_PRIORITY, RealtimeRequest, available_cpus
from sim2real.core.robot_profile import RobotProfile, load_profile
from sim2real.core.unitree.remote import DEFAULT_MAX_VELOCITY, max_velocity_from
from sim2real.sim.conditions import PhysicalConditions


@dataclass(frozen=True)
class LaunchArgument:
    name: str
    default: str
    description: str
    choices: tuple[str, ...] = ()


HARDWARE_CHOICES = ("sim", "mujoco", "topic", "ros2_control", "unitree")
# The simulated robots: sim_robot on PyBullet (sim) or on MuJoCo (mujoco, the second engine).
SIMULATED_HARDWARE = {"sim": "pybullet", "mujoco": "mujoco"}
BOOL_CHOICES = ("true", "false")

LAUNCH_ARGUMENTS: dict[str, LaunchArgument] = {
    a.name: a
    for a in (
        LaunchArgument("robot", "go2", "Robot profile: a name under config/robots/ (go2, panda) or a path"),
        LaunchArgument(
            "hardware",
            "sim",
            "sim: PyBullet robot (sim_robot); mujoco: the same node on MuJoCo, the "
            "second engine (sim2sim before hardware); topic: a real driver already speaks "
            "the hardware contract (/joint_states, /imu/data in, /joint_commands out); "
            "ros2_control: joint_state_broadcaster in, a forward_command_controller "
            "out (ros2_control_bridge maps the joint order); unitree: a Unitree Go2's "
            "own low-level DDS topics (unitree_bridge: rt/lowstate, rt/lowcmd, the "
            "remote as the operator's joystick)",
            HARDWARE_CHOICES,
        ),
        LaunchArgument(
            "network_interface",
            "",
            "unitree only: the robot computer's interface on the robot's subnet "
            "(e.g. eth0); '' = cyclonedds' own choice",
        ),
        LaunchArgument(
            "unitree_domain", "0", "unitree only: DDS domain of the robot's rt/lowstate and rt/lowcmd (a Go2: 0)"
        ),
        LaunchArgument(
            "remote_max_velocity",
            ",".join(f"{v:.1f}" for v in DEFAULT_MAX_VELOCITY),
            "unitree only: base velocity at full stick of the Go2's remote, 'vx,vy,yaw' in m/s, m/s, "
            "rad/s (the runtime still clamps /cmd_vel to the policy's trained ranges)",
        ),
        LaunchArgument(
            "controller",
            "forward_position_controller",
            "ros2_control only: the forward_command_controller (position interface) taking the commands",
        ),
        LaunchArgument(
            "controller_joints",
            "",
            "ros2_control only: that controller's `joints`, in its order, comma-separated; '' = the "
            "profile's joint order",
        ),
        LaunchArgument(
            "lockstep",
            "false",
            "sim and mujoco only: publish /clock and advance only when the graph answers; "
            "every node then uses sim time",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "model",
            "",
            "mujoco only: another robot model than the profile's, a URDF/MJCF path or "
            "example-robot-data:go2 (an independently written Go2); '' = the profile's",
        ),
        LaunchArgument(
            "reality",
            "",
            "a robot of a reality set (config/reality/NAME.yaml) on the set's engine "
            "(hardware:=mujoco for the shipped sets): the set's model under physical conditions "
            "drawn with its hidden seed, which no parameter, log or message shows; record sysid "
            "bags, latency logs and failures on it as on a robot",
        ),
        LaunchArgument("reality_robot", "0", "with reality: which robot of the set (0, 1, 2, ...)"),
        LaunchArgument("seed", "0", "sim and mujoco only: seed for terrain and sensor noise"),
        LaunchArgument(
            "conditions", "{}", "sim and mujoco only: physical conditions as YAML, e.g. '{ground_friction: 0.5}'"
        ),
        LaunchArgument(
            "suspended",
            "auto",
            "sim and mujoco only: hold a floating-base robot's trunk in the air, feet clear of "
            "the ground, as a gantry holds a real quadruped for joint checks; auto = "
            "when pose_commander moves the joints (demo without a policy), which would "
            "topple a standing quadruped",
            ("auto", "true", "false"),
        ),
        LaunchArgument(
            "safety_config",
            "",
            "safety checks and joystick mapping: a name under config/safety/ or a path; '' = the robot's name",
        ),
        LaunchArgument(
            "autoengage",
            "false",
            "the supervisor engages by itself once the robot stands and a policy has "
            "streamed for 1 s (sim and demos; on a robot an operator calls ~/engage)",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "demo",
            "false",
            "with a policy: add demo_script (scripted /cmd_vel or /goal_pose and a "
            "report); without: add pose_commander, which drives the joints through a hold-then-move "
            "script and reports tracking",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "policy",
            "",
            "ONNX policy file (sim2real export) for policy_runtime; '' = no policy. "
            "Hot-swap later with: sim2real policy swap FILE",
        ),
        LaunchArgument(
            "failure_collector",
            "true",
            "buffer the robot's topics and write a bundle on every failure (sim2real failures list)",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "failures_dir", "", "folder for failure bundles; '' = output_dir of config/failures/default.yaml"
        ),
        LaunchArgument(
            "record",
            "",
            "record the robot's topics (sensors, commands, supervisor status, /cmd_vel) into this "
            "new rosbag2 directory while the graph runs (bag_recorder); '' = no recording. Robot "
            "data for sim2real train --robot-buffer",
        ),
        LaunchArgument(
            "estimator",
            "auto",
            "run state_estimator (/state_estimate, divergence to the supervisor); "
            "auto = whenever a policy runs (nothing else reads it, and on 2 cores its "
            "500 Hz filter starved the real-time sim of the scripted joint demo)",
            ("auto", "true", "false"),
        ),
        LaunchArgument(
            "latency_compensation",
            "false",
            "policy_runtime predicts the state forward by the measured latency before each observation",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "latency_log",
            "",
            "policy_runtime appends every latency it measures to this file (JSON "
            "lines) for `sim2real dr from-latency`; '' = none",
        ),
        LaunchArgument(
            "policy_dirs",
            "",
            "more folders policy_runtime may hot-swap policies from, comma-separated "
            "(the shipped policies/ always is; the starting policy file itself is "
            "allowed, never its whole folder)",
        ),
        LaunchArgument(
            "realtime",
            "false",
            "run the control chain with SCHED_FIFO priorities, hardware (sim, driver "
            "bridge) 80 > safety_supervisor 70 > policy_runtime 60 > state_estimator 50, "
            "and its memory locked; monitoring and demo nodes stay at normal priority. "
            "Needs root, or CAP_SYS_NICE or an rtprio limit (priorities) and "
            "CAP_IPC_LOCK or an unlimited memlock limit (locking): a node that cannot "
            "get it says so at start, with the fix, and runs on (docs/realtime.md)",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "realtime_cpus",
            "",
            "with realtime: CPUs the control chain is pinned to, comma-separated "
            "(e.g. 1 or 2,3); the other nodes then run on the remaining CPUs; '' = no "
            "pinning",
        ),
        LaunchArgument(
            "composed",
            "false",
            "run the control chain (safety_supervisor, state_estimator, policy_runtime) in one "
            "process on one executor (control_chain): less CPU on a busy robot computer; the "
            "driver's command timeout then stands in for a supervisor outliving a crashed runtime "
            "(docs/running.md)",
            BOOL_CHOICES,
        ),
        LaunchArgument(
            "trusted_keys",
            "",
            "folder of trusted ed25519 public keys (*.pub, `sim2real policy keygen`): "
            "policy_runtime then runs only policies signed by one of them, at start and "
            "at every swap; '' = unsigned policies run",
        ),
    )
}


# composed:=true: these nodes share one process (nodes/control_chain.py), under this name.
COMPOSED_PROCESS = "control_chain"
COMPOSABLE = ("safety_supervisor", "state_estimator", "policy_runtime")


class PlanError(InputError):
    """A launch argument that cannot make a plan; the message names it and the fix."""


@dataclass(frozen=True)
class NodeSpec:
    """One node of the plan, in the terms both launch_ros and `sim2real up` use."""

    executable: str
    name: str
    role: str  # hardware | safety | estimation | control | monitoring | demo
    parameters: dict[str, Any] = field(default_factory=dict)
    remappings: tuple[tuple[str, str], ...] = ()
    # Extra environment of the node's process (the real-time request, launch_env.REALTIME_ENV).
    environment: dict[str, str] = field(default_factory=dict)
    # The process it runs in when several nodes share one (composed:=true); '' = its own.
    process: str = ""


@dataclass(frozen=True)
class ProcessSpec:
    """One OS process of the plan: a node alone, or the control chain's nodes together."""

    name: str  # the node's name, or the shared process's (control_chain)
    members: tuple[NodeSpec, ...]

    @property
    def composed(self) -> bool:
        return bool(self.members[0].process)

    @property
    def executable(self) -> str:
        return self.name if self.composed else self.members[0].executable

    @property
    def role(self) -> str:
        """The role whose scheduling the process takes: of a shared one, its most urgent member's."""
        return max((m.role for m in self.members), key=lambda role: ROLE_PRIORITY.get(role, 0))

    @property
    def environment(self) -> dict[str, str]:
        return next(m.environment for m in self.members if m.role == self.role)

    @property
    def arguments(self) -> tuple[str, ...]:
        """Arguments before ``--ros-args``: a shared process's member names."""
        return tuple(m.name for m in self.members) if self.composed else ()

    @property
    def remappings(self) -> tuple[tuple[str, str], ...]:
        """A node alone's remappings as they are; a shared process's each scoped to its member
        (``node:from`` -> ``to``), or it would apply to every node of the process."""
        scope = (lambda m: f"{m.name}:") if self.composed else (lambda m: "")
        return tuple((f"{scope(m)}{source}", target) for m in self.members for source, target in m.remappings)

    def parameters_document(self) -> dict[str, Any]:
        """The ROS 2 params file's content: for a node alone under ``/**`` (its name comes from the
        remap), for a shared process keyed by each member's own name."""
        if not self.composed:
            return {"/**": {"ros__parameters": self.members[0].parameters}}
        return {f"/{m.name}": {"ros__parameters": m.parameters} for m in self.members}


@dataclass(frozen=True)
class BringupPlan:
    robot: str
    hardware: str
    use_sim_time: bool
    nodes: tuple[NodeSpec, ...]
    realtime: bool = False
    realtime_cpus: tuple[int, ...] = ()
    # What the user must check before running this graph on a robot: said at start-up by
    # `sim2real up` and the launch file, not refused (the plan may well be right).
    cautions: tuple[str, ...] = ()

    def processes(self) -> tuple[ProcessSpec, ...]:
        """The plan's OS processes in start order: each node alone, except the members of a shared
        process, which start together where the first of them stands."""
        processes: list[ProcessSpec] = []
        for spec in self.nodes:
            if not spec.process:
                processes.append(ProcessSpec(spec.name, (spec,)))
            elif not any(p.name == spec.process for p in processes):
                members = tuple(n for n in self.nodes if n.process == spec.process)
                processes.append(ProcessSpec(spec.process, members))
        return tuple(processes)

    def process_of(self, node: str) -> str:
        """The name of the process node ``node`` runs in (its own name unless composed)."""
        return self.node(node).process or node

    def node(self, name: str) -> NodeSpec:
        for spec in self.nodes:
            if spec.name == name:
                return spec
        raise KeyError(f"no node {name!r} in the plan; nodes: {[n.name for n in self.nodes]}")

    @property
    def known_conditions(self) -> bool:
        """Whether the robot's physical conditions are known: a simulated robot's are its
        ``conditions``, unless it is a reality set's robot (hidden, as a real robot's)."""
        sim = next((n for n in self.nodes if n.name == "sim_robot"), None)
        return sim is not None and not sim.parameters.get("reality")


# Which simulated robot runs (hardware:=mujoco): another model, or a robot of a reality set.
# Every command that starts a simulated robot takes them (`up`, `sysid record`).
SIMULATED_ROBOT_ARGUMENTS = ("model", "reality", "reality_robot")


def add_simulated_robot_options(parser) -> None:
    """``--model``, ``--reality``, ``--reality-robot`` on an argparse parser, described as the
    launch arguments are."""
    for name in SIMULATED_ROBOT_ARGUMENTS:
        arg = LAUNCH_ARGUMENTS[name]
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            default=arg.default,
            type=int if name == "reality_robot" else str,
            help=f"{arg.description} (launch: {name}:=)",
        )


def parse_arguments(values: Mapping[str, Any]) -> dict[str, Any]:
    """Launch arguments (strings from `ros2 launch`, or Python values) -> typed values."""
    unknown = sorted(set(values) - set(LAUNCH_ARGUMENTS))
    if unknown:
        raise PlanError(f"unknown launch arguments {unknown}; known: {sorted(LAUNCH_ARGUMENTS)}")
    merged = {name: values.get(name, arg.default) for name, arg in LAUNCH_ARGUMENTS.items()}
    typed: dict[str, Any] = {}
    for name, value in merged.items():
        arg = LAUNCH_ARGUMENTS[name]
        if arg.choices == BOOL_CHOICES:
            typed[name] = parse_bool(name, value)
        elif name in ("seed", "reality_robot"):
            try:
                typed[name] = int(value)
            except (TypeError, ValueError):
                raise PlanError(f"launch argument {name}:={value!r} must be an integer") from None
        else:
            typed[name] = str(value)
            if arg.choices and {"true", "false"} <= set(arg.choices):  # a tri-state: True/False from Python too
                typed[name] = typed[name].strip().lower()
            if arg.choices and typed[name] not in arg.choices:
                raise PlanError(f"launch argument {name}:={value!r} is not one of {list(arg.choices)}")
    return typed


def parse_bool(name: str, value: Any) -> bool:
    """A boolean launch argument: true/false (any case) or 1/0, from `ros2 launch` or Python."""
    text = str(value).strip().lower()
    if text not in ("true", "false", "1", "0"):
        raise PlanError(f"launch argument {name}:={value!r} must be true or false")
    return text in ("true", "1")


def make_plan(**arguments: Any) -> BringupPlan:
    """The nodes for these launch arguments (see LAUNCH_ARGUMENTS for names and defaults)."""
    args = parse_arguments(arguments)
    profile = load_profile(args["robot"])  # fail here, before any process starts
    robot = str(profile.source) if "/" in args["robot"] or args["robot"].endswith(".yaml") else profile.name
    sim = args["hardware"] in SIMULATED_HARDWARE
    use_sim_time = sim and args["lockstep"]
    _check_combinations(args, sim)
    nodes = _hardware_nodes(args, profile, robot, sim)
    # The supervisor is the only publisher of /joint_commands, in sim as on hardware.
    nodes.append(
        NodeSpec(
            "safety_supervisor",
            "safety_supervisor",
            "safety",
            {
                "robot": robot,
                "engage_on_start": args["autoengage"],
                "safety_config": args["safety_config"],
                "simulated": sim,
                # A simulated gantry: the stand carries no weight, so no feed-forward for it.
                "suspended": sim and _suspended(args, profile),
                # The stand-up waits until this node reads /joint_commands ('' with
                # hardware:=topic: an outside driver, any reader counts).
                "driver": next((node.name for node in nodes if node.role == "hardware"), ""),
            },
        )
    )
    if args["estimator"] == "true" or (args["estimator"] == "auto" and args["policy"]):
        nodes.append(NodeSpec("state_estimator", "state_estimator", "estimation", {"robot": robot}))
    nodes.extend(_policy_nodes(args, robot))
    if args["failure_collector"]:
        # Same parameters in sim and on hardware: it asks sim_robot for its conditions itself.
        nodes.append(
            NodeSpec(
                "failure_collector",
                "failure_collector",
                "monitoring",
                {
                    "robot": robot,
                    "output_dir": str(Path(args["failures_dir"]).expanduser().absolute())
                    if args["failures_dir"]
                    else "",
                },
            )
        )
    if args["record"]:
        if Path(args["record"]).expanduser().exists():
            raise PlanError(
                f"launch argument record:={args['record']!r}: it exists already, and a bag is never "
                "overwritten. Fix: name a new directory (e.g. bags/run_2)"
            )
        bag = str(Path(args["record"]).expanduser().absolute())
        nodes.append(NodeSpec("bag_recorder", "bag_recorder", "monitoring", {"robot": robot, "bag": bag}))
    realtime_cpus = _realtime_cpus(args)
    nodes = [
        NodeSpec(
            n.executable,
            n.name,
            n.role,
            {**n.parameters, "use_sim_time": use_sim_time},
            n.remappings,
            node_environment(n.role, args["realtime"], realtime_cpus),
            COMPOSED_PROCESS if args["composed"] and n.name in COMPOSABLE else "",
        )
        for n in nodes
    ]
    return BringupPlan(
        robot=robot,
        hardware=args["hardware"],
        use_sim_time=use_sim_time,
        nodes=tuple(nodes),
        realtime=args["realtime"],
        realtime_cpus=realtime_cpus,
        cautions=_cautions(args),
    )


def _cautions(args: dict[str, Any]) -> tuple[str, ...]:
    if args["composed"] and args["hardware"] == "topic":
        return (
            "composed:=true with hardware:=topic: when the control chain's one process dies, only your "
            "driver's command timeout stops the robot (the supervisor dies with the chain). Check that "
            "it damps when /joint_commands goes quiet (sim_robot and unitree_bridge do, after the "
            "profile's command_timeout), or leave composed:= out",
        )
    return ()


def _check_combinations(args: dict[str, Any], sim: bool) -> None:
    """Arguments that cannot go together, refused before any node is planned."""
    if args["lockstep"] and not sim:
        raise PlanError("lockstep:=true needs hardware:=sim or mujoco (real hardware keeps its own time)")
    if args["lockstep"] and args["realtime"]:
        raise PlanError(
            "realtime:=true is for a graph in real time: in lockstep the chain runs as fast as it "
            "can, and at real-time priority it would starve every other process. Leave one out"
        )
    if args["composed"] and args["hardware"] == "ros2_control":
        raise PlanError(
            "composed:=true relies on the driver's command timeout to damp the robot when the chain's "
            "one process dies, and a ros2_control forward_command_controller holds its last target "
            "instead. Leave composed:= out with hardware:=ros2_control"
        )
    if args["model"] and args["hardware"] != "mujoco":
        raise PlanError(
            f"launch argument model:={args['model']!r} is for hardware:=mujoco (PyBullet and real robots "
            "have the profile's model)"
        )
    if args["reality"]:
        _check_reality(args)
    elif args["reality_robot"] != 0:
        raise PlanError("launch argument reality_robot is for a reality set: give reality:=NAME too")
    if args["suspended"] == "true" and not sim:
        raise PlanError(
            "suspended:=true needs hardware:=sim or mujoco: hang the real robot on its gantry or stand yourself"
        )


def _check_reality(args: dict[str, Any]) -> None:
    """A reality set's robot: the set decides the model and the conditions, the hardware its engine."""
    from sim2real.evaluate.reality import conditions_given, load_reality

    # What the set is, not its robots: the seed stays with the sim_robot that draws them.
    reality = load_reality(args["reality"], secret=False)  # a RealityError names what is wrong
    if SIMULATED_HARDWARE.get(args["hardware"]) != reality.engine:
        wanted = next(h for h, engine in SIMULATED_HARDWARE.items() if engine == reality.engine)
        raise PlanError(
            f"reality set {reality.name!r} runs on {reality.engine}: launch it with hardware:={wanted}, "
            f"not hardware:={args['hardware']}"
        )
    if reality.robot != load_profile(args["robot"]).name:
        raise PlanError(
            f"reality set {reality.name!r} is a {reality.robot!r}, not a {args['robot']!r}: "
            f"launch it with robot:={reality.robot}"
        )
    if args["model"] or conditions_given(args["conditions"]):
        raise PlanError(
            "a reality set brings its own robot model and physical conditions: leave model:= and "
            "conditions:= out (that is the point: nobody picks a reality's conditions)"
        )
    if args["reality_robot"] < 0:
        raise PlanError(f"launch argument reality_robot:={args['reality_robot']} must be 0 or more")


def _hardware_nodes(args: dict[str, Any], profile: RobotProfile, robot: str, sim: bool) -> list[NodeSpec]:
    """The hardware part: a bridge, the simulated robot, or nothing (hardware:=topic: the
    robot's driver runs already); each refuses the arguments of the others."""
    nodes: list[NodeSpec] = []
    if args["hardware"] == "ros2_control":
        nodes.append(_ros2_control_bridge(args, profile, robot))
    elif args["controller"] != LAUNCH_ARGUMENTS["controller"].default or args["controller_joints"]:
        raise PlanError("launch arguments controller and controller_joints are for hardware:=ros2_control")
    if args["hardware"] == "unitree":
        nodes.append(_unitree_bridge(args, profile, robot))
    elif (
        args["network_interface"]
        or args["unitree_domain"] != LAUNCH_ARGUMENTS["unitree_domain"].default
        or _remote_max_velocity(args["remote_max_velocity"]) != DEFAULT_MAX_VELOCITY
    ):
        raise PlanError(
            "launch arguments network_interface, unitree_domain and remote_max_velocity are for hardware:=unitree"
        )
    if sim:
        try:  # here, before any process starts: a node that dies of it leaves the demo waiting
            PhysicalConditions.from_yaml(args["conditions"], f"launch argument conditions:={args['conditions']!r}")
        except ValueError as exc:
            raise PlanError(str(exc)) from None
        nodes.append(
            NodeSpec(
                "sim_robot",
                "sim_robot",
                "hardware",
                {
                    "robot": robot,
                    "lockstep": args["lockstep"],
                    "seed": args["seed"],
                    "conditions": args["conditions"],
                    "suspended": _suspended(args, profile),
                    "engine": SIMULATED_HARDWARE[args["hardware"]],
                    **({"model": args["model"]} if args["model"] else {}),
                    **({"reality": args["reality"], "reality_robot": args["reality_robot"]} if args["reality"] else {}),
                },
            )
        )
    return nodes


def _ros2_control_bridge(args: dict[str, Any], profile: RobotProfile, robot: str) -> NodeSpec:
    if not args["controller"].strip("/"):
        raise PlanError(
            "launch argument controller:='' names no controller: give the forward_command_controller "
            "taking the commands (e.g. forward_position_controller)"
        )
    controller_joints = parse_joint_list(args["controller_joints"])
    try:
        ControllerJointOrder(profile.joint_names, controller_joints)
    except ControllerJointsError as exc:
        raise PlanError(f"launch argument controller_joints: {exc}") from None
    return NodeSpec(
        "ros2_control_bridge",
        "ros2_control_bridge",
        "hardware",
        {
            "robot": robot,
            "controller": args["controller"],
            # An empty list has no parameter type in ROS 2: leave the node's default (profile order).
            **({"controller_joints": controller_joints} if controller_joints else {}),
        },
    )


def _unitree_bridge(args: dict[str, Any], profile: RobotProfile, robot: str) -> NodeSpec:
    if profile.unitree is None:
        raise PlanError(
            f"hardware:=unitree needs a robot profile with a unitree: section (motor indices, head "
            f"bytes); {profile.name!r} has none: use robot:=go2"
        )
    try:
        domain = int(args["unitree_domain"])
    except ValueError:
        domain = -1
    if not 0 <= domain <= 232:
        raise PlanError(
            f"launch argument unitree_domain:={args['unitree_domain']!r} must be a DDS domain id 0..232 (a Go2: 0)"
        )
    return NodeSpec(
        "unitree_bridge",
        "unitree_bridge",
        "hardware",
        {
            "robot": robot,
            "network_interface": args["network_interface"],
            "unitree_domain": domain,
            "safety_config": args["safety_config"],
            "remote_max_velocity": list(_remote_max_velocity(args["remote_max_velocity"])),
        },
    )


def _policy_nodes(args: dict[str, Any], robot: str) -> list[NodeSpec]:
    """policy_runtime with a policy (the arguments that set it up refused without one), and the
    demo's operator: demo_script with a policy, pose_commander as the stand-in for one."""
    nodes: list[NodeSpec] = []
    if args["policy"]:
        policy = Path(args["policy"]).expanduser()
        if not policy.is_file():
            raise PlanError(f"launch argument policy:={args['policy']!r}: no such file")
        # Absolute: the node's working directory need not be the caller's.
        runtime = {"robot": robot, "policy_path": str(policy.absolute())}
        if args["latency_compensation"]:
            runtime["latency_compensation"] = True
        if args["latency_log"]:
            runtime["latency_log"] = str(Path(args["latency_log"]).expanduser().absolute())
        if args["trusted_keys"]:
            runtime["trusted_keys"] = str(Path(args["trusted_keys"]).expanduser().absolute())
        extra_dirs = [Path(d.strip()).expanduser().absolute() for d in args["policy_dirs"].split(",") if d.strip()]
        if extra_dirs:
            runtime["policy_dirs"] = [str(share_dir() / "policies"), *map(str, extra_dirs)]
        nodes.append(NodeSpec("policy_runtime", "policy_runtime", "control", runtime))
    else:
        defaults = parse_arguments({})
        unused = [
            name
            for name in ("latency_compensation", "latency_log", "policy_dirs", "trusted_keys")
            if args[name] != defaults[name]
        ]
        if unused:
            raise PlanError(
                f"launch arguments {unused} set policy_runtime up, which runs only with a policy: add policy:=FILE"
            )
    if args["demo"] and args["policy"]:
        # The operator of the main job: scripted /cmd_vel or /goal_pose, and a report.
        nodes.append(NodeSpec("demo_script", "demo_script", "demo", {"robot": robot}))
    elif _runs_pose_commander(args):
        # No policy yet: a scripted stand-in for one; its commands go through the supervisor too.
        nodes.append(NodeSpec("pose_commander", "pose_commander", "demo", {"robot": robot}))
    return nodes


def node_environment(role: str, realtime: bool, realtime_cpus: tuple[int, ...]) -> dict[str, str]:
    """The real-time request of a node with this role: the control chain gets its SCHED_FIFO
    priority (realtime.ROLE_PRIORITY), locked memory and the chain's CPUs; every other node
    stays at normal priority, on the CPUs the chain leaves free (if it leaves any)."""
    if not realtime:
        return {}
    if role in ROLE_PRIORITY:
        return {
            REALTIME_ENV: RealtimeRequest(ROLE_PRIORITY[role], realtime_cpus, lock_memory=True).encode(),
            **CHAIN_ENVIRONMENT,
        }
    rest = tuple(cpu for cpu in available_cpus() if cpu not in realtime_cpus) if realtime_cpus else ()
    return {REALTIME_ENV: RealtimeRequest(0, rest).encode()} if rest else {}


def _realtime_cpus(args: Mapping[str, Any]) -> tuple[int, ...]:
    text = args["realtime_cpus"].strip()
    if not text:
        return ()
    if not args["realtime"]:
        raise PlanError(
            f"launch argument realtime_cpus:={text!r} pins the real-time control chain: add "
            "realtime:=true (sim2real: --realtime)"
        )
    try:
        cpus = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise PlanError(
            f"launch argument realtime_cpus:={text!r} must be CPU numbers, comma-separated (e.g. 1 or 2,3)"
        ) from None
    missing = [cpu for cpu in cpus if cpu not in available_cpus()]
    if missing:
        raise PlanError(
            f"launch argument realtime_cpus:={text!r}: no CPU {missing} here; this computer offers {available_cpus()}"
        )
    return cpus


def _runs_pose_commander(args: Mapping[str, Any]) -> bool:
    """A demo without a policy: pose_commander swings every joint in its place."""
    return bool(args["demo"]) and not args["policy"]


def _suspended(args: Mapping[str, Any], profile: RobotProfile) -> bool:
    if args["suspended"] == "auto":
        return not profile.fixed_base and _runs_pose_commander(args)
    if args["suspended"] == "true":
        require_suspendable(profile)
    return args["suspended"] == "true"


def require_suspendable(profile: RobotProfile) -> None:
    """PlanError for suspended:=true on a robot that cannot hang on a stand."""
    try:
        profile.check_suspendable()
    except ValueError as exc:
        raise PlanError(f"suspended:=true: {exc}. Leave suspended out (or at auto)") from None


def _remote_max_velocity(text: str) -> tuple[float, float, float]:
    try:
        return max_velocity_from(text, "launch argument remote_max_velocity")
    except ValueError as exc:
        raise PlanError(str(exc)) from None
