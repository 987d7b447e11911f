"""The node plan: one source for the launch file and `sim2real up`."""

import ast
import configparser
import json
from pathlib import Path

import pytest

from sim2real.core.config_files import ConfigError
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import ProfileError, load_profile
from sim2real.graph.plan import LAUNCH_ARGUMENTS, PlanError, make_plan, parse_arguments

ROOT = Path(__file__).resolve().parents[2]


def test_default_plan_runs_the_sim_robot_under_the_supervisor_for_go2_in_real_time():
    plan = make_plan()
    assert [n.name for n in plan.nodes] == ["sim_robot", "safety_supervisor", "failure_collector"]
    assert plan.node("safety_supervisor").parameters["engage_on_start"] is False  # an operator engages
    sim = plan.node("sim_robot")
    assert sim.role == "hardware"
    assert sim.parameters["robot"] == "go2" and sim.parameters["lockstep"] is False
    assert sim.parameters["use_sim_time"] is False


def test_launch_strings_are_typed_like_python_values():
    from_launch = make_plan(robot="panda", hardware="sim", lockstep="true", seed="7", demo="true")
    from_python = make_plan(robot="panda", lockstep=True, seed=7, demo=True)
    assert from_launch == from_python
    assert from_launch.use_sim_time
    assert all(n.parameters["use_sim_time"] for n in from_launch.nodes)
    assert [n.name for n in from_launch.nodes] == [
        "sim_robot",
        "safety_supervisor",
        "pose_commander",
        "failure_collector",
    ]
    # The scripted commander stands in for a policy: it never reaches hardware directly.
    assert from_launch.node("pose_commander").remappings == ()  # it publishes /policy/joint_commands itself


def rest(plan):
    """The plan's nodes but the hardware part, less the supervisor's `simulated`, `driver` and
    `suspended` (which describe the hardware part)."""
    return [
        (n.name, {k: v for k, v in n.parameters.items() if k not in ("simulated", "driver", "suspended")})
        for n in plan.nodes
        if n.role != "hardware"
    ]


def test_hardware_topic_changes_only_the_hardware_part():
    sim = make_plan(hardware="sim", demo=True)
    real = make_plan(hardware="topic", demo=True)

    assert rest(sim) == rest(real)
    assert [n.role for n in real.nodes] == ["safety", "demo", "monitoring"]
    # On a real robot the deadman and the hardware minimum of the safety config apply.
    assert sim.node("safety_supervisor").parameters["simulated"] is True
    assert real.node("safety_supervisor").parameters["simulated"] is False
    # The joint demo hangs the simulated Go2 on a gantry: its stand carries no weight.
    assert sim.node("safety_supervisor").parameters["suspended"] is True
    assert real.node("safety_supervisor").parameters["suspended"] is False


@pytest.mark.parametrize(
    "arguments, words",
    [
        ({"hardware": "gazebo"}, "not one of ['sim', 'mujoco', 'topic', 'ros2_control', 'unitree']"),
        ({"robot": "panda", "hardware": "unitree"}, "'panda' has none: use robot:=go2"),
        ({"hardware": "unitree", "unitree_domain": "300"}, "unitree_domain:='300' must be a DDS domain id"),
        ({"network_interface": "eth0"}, "network_interface, unitree_domain and remote_max_velocity are for hardware"),
        ({"remote_max_velocity": "0.5,0.5,0.5"}, "remote_max_velocity are for hardware:=unitree"),
        ({"hardware": "unitree", "remote_max_velocity": "0.5,0.5"}, "give three speeds >= 0, vx,vy,yaw"),
        ({"hardware": "unitree", "remote_max_velocity": "fast"}, "remote_max_velocity:='fast'"),
        ({"hardware": "unitree", "remote_max_velocity": "1,-1,1"}, "give three speeds >= 0"),
        (
            {"robot": "panda", "hardware": "ros2_control", "controller_joints": "panda_joint1,panda_joint2"},
            "missing profile joints ['panda_joint3'",
        ),
        ({"lockstep": "maybe"}, "must be true or false"),
        ({"robot": "panda", "hardware": "ros2_control", "controller": ""}, "controller:='' names no controller"),
        ({"seed": "x"}, "must be an integer"),
        ({"robto": "go2"}, "unknown launch arguments ['robto']"),
        ({"hardware": "topic", "lockstep": "true"}, "needs hardware:=sim"),
        ({"conditions": "{ground_friction: -3}"}, "condition 'ground_friction': -3 is out of range"),
        ({"conditions": "{grund_friction: 0.5}"}, "has unknown names ['grund_friction']"),
        ({"conditions": "{ground_friction:"}, "is not valid YAML"),
        ({"suspended": "yes"}, "is not one of ['auto', 'true', 'false']"),
        ({"hardware": "topic", "suspended": "true"}, "suspended:=true needs hardware:=sim"),
        ({"robot": "panda", "suspended": "true"}, "robot 'panda' has a fixed base"),
    ],
)
def test_bad_arguments_name_the_argument(arguments, words):
    with pytest.raises(PlanError) as info:
        make_plan(**arguments)
    assert words in str(info.value)


def test_unknown_robot_lists_the_profiles():
    with pytest.raises(ProfileError, match="go2"):
        make_plan(robot="spot")


def test_parse_arguments_fills_defaults():
    assert parse_arguments({}) == {
        "robot": "go2",
        "hardware": "sim",
        "lockstep": False,
        "seed": 0,
        "conditions": "{}",
        "suspended": "auto",
        "safety_config": "",
        "autoengage": False,
        "demo": False,
        "policy": "",
        "controller": "forward_position_controller",
        "controller_joints": "",
        "failure_collector": True,
        "failures_dir": "",
        "record": "",
        "estimator": "auto",
        "latency_compensation": False,
        "latency_log": "",
        "policy_dirs": "",
        "trusted_keys": "",
        "network_interface": "",
        "unitree_domain": "0",
        "remote_max_velocity": "1.0,0.5,1.0",
        "model": "",
        "reality": "",
        "reality_robot": 0,
        "realtime": False,
        "realtime_cpus": "",
        "composed": False,
    }


def test_a_policy_adds_the_runtime_as_the_control_node_with_an_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    monkeypatch.chdir(tmp_path)
    plan = make_plan(robot="go2", policy="walk.onnx", lockstep="true")
    assert [n.name for n in plan.nodes] == [
        "sim_robot",
        "safety_supervisor",
        "state_estimator",
        "policy_runtime",
        "failure_collector",
    ]
    runtime = plan.node("policy_runtime")
    assert runtime.executable == "policy_runtime" and runtime.role == "control"
    assert runtime.parameters == {"robot": "go2", "policy_path": str(tmp_path / "walk.onnx"), "use_sim_time": True}
    assert runtime.remappings == ()  # it publishes /policy/joint_commands itself, never /joint_commands
    real = make_plan(hardware="topic", policy=str(tmp_path / "walk.onnx"))
    assert [n.role for n in real.nodes] == ["safety", "estimation", "control", "monitoring"]


def test_failure_collector_runs_by_default_and_can_be_left_out(tmp_path):
    plan = make_plan(failures_dir=str(tmp_path / "bundles"))
    collector = plan.node("failure_collector")
    assert collector.role == "monitoring"
    assert collector.parameters == {"robot": "go2", "output_dir": str(tmp_path / "bundles"), "use_sim_time": False}
    assert "failure_collector" not in [n.name for n in make_plan(failure_collector="false").nodes]


def test_record_adds_the_bag_recorder_at_normal_priority(tmp_path):
    assert "bag_recorder" not in [n.name for n in make_plan().nodes]
    plan = make_plan(record=str(tmp_path / "bags" / "run_1"), realtime="true")
    recorder = plan.node("bag_recorder")
    assert recorder.role == "monitoring"
    assert recorder.parameters == {"robot": "go2", "bag": str(tmp_path / "bags" / "run_1"), "use_sim_time": False}
    assert recorder.environment == plan.node("failure_collector").environment
    with pytest.raises(PlanError, match="record:=.*exists already.*Fix: name a new directory"):
        make_plan(record=str(tmp_path))


def test_bad_policy_argument_fails_before_any_process_starts():
    with pytest.raises(PlanError, match="policy:='/no/such/policy.onnx': no such file"):
        make_plan(policy="/no/such/policy.onnx")


def test_demo_with_a_policy_is_driven_by_the_demo_script(tmp_path):
    (tmp_path / "walk.onnx").write_bytes(b"")
    plan = make_plan(policy=str(tmp_path / "walk.onnx"), demo=True, autoengage=True)
    assert [n.name for n in plan.nodes] == [
        "sim_robot",
        "safety_supervisor",
        "state_estimator",
        "policy_runtime",
        "demo_script",
        "failure_collector",
    ]
    assert plan.node("demo_script").remappings == ()  # it speaks /cmd_vel, never joint commands


def test_launch_file_renders_the_plan_with_stable_launch_ros_api_only():
    """launch_ros has no PyPI wheel, so `ros2 launch` itself cannot run here: check that the
    launch file delegates to make_plan and uses only APIs present on Humble, Jazzy and Kilted."""
    source = (ROOT / "launch" / "bringup.launch.py").read_text()
    tree = ast.parse(source)
    imported = {
        (node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert imported == {
        ("launch", "LaunchDescription"),
        ("launch.actions", "DeclareLaunchArgument"),
        ("launch.actions", "OpaqueFunction"),
        ("launch.actions", "RegisterEventHandler"),
        ("launch.actions", "LogInfo"),  # the plan's cautions
        ("launch.event_handlers", "OnShutdown"),  # removes the composed chain's params file
        ("pathlib", "Path"),
        ("launch.substitutions", "LaunchConfiguration"),
        ("launch_ros.actions", "Node"),
        ("sim2real.graph.plan", "LAUNCH_ARGUMENTS"),
        ("sim2real.graph.plan", "make_plan"),
    }
    functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    node_calls = [
        node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Node"
    ]
    assert len(node_calls) == 2  # a node alone, and the composed control chain
    assert "OnShutdown(on_shutdown=" in source and "unlink(missing_ok=True)" in source
    assert "plan.processes()" in source  # what `sim2real up` starts, process by process
    # additional_env: ExecuteProcess's, which launch_ros.actions.Node passes on (Humble onwards).
    assert {kw.arg for call in node_calls for kw in call.keywords} <= {
        "package",
        "executable",
        "name",
        "parameters",
        "remappings",
        "output",
        "arguments",
        "namespace",
        "additional_env",
    }


def test_every_planned_executable_is_installed_by_setup_py():
    setup_source = (ROOT / "setup.py").read_text()
    executables = ast.literal_eval(setup_source.split("NODE_EXECUTABLES = ", 1)[1].split("\n}\n", 1)[0] + "\n}")
    plans = (make_plan(demo=True), make_plan(policy=__file__), make_plan(policy=__file__, composed=True))
    planned = {p.executable for plan in plans for p in plan.processes()} | {n.executable for n in plans[1].nodes}
    assert "control_chain" in planned
    assert planned <= set(executables)
    for name, target in executables.items():
        module = target.split(":")[0]
        assert module == f"sim2real.nodes.{name}", "sim2real up runs nodes as python -m sim2real.nodes.<executable>"
        assert (ROOT / "src" / Path(*module.split("."))).with_suffix(".py").is_file()


def test_setup_cfg_sends_executables_to_lib_for_ros2_run():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert config["install"]["install_scripts"] == "$base/lib/sim2real"
    assert config["develop"]["script_dir"] == "$base/lib/sim2real"


def test_launch_arguments_documented():
    assert all(arg.description for arg in LAUNCH_ARGUMENTS.values())
    assert (share_dir() / "launch" / "bringup.launch.py").is_file()


def test_ros2_control_swaps_only_the_hardware_part_for_the_bridge():
    joints = ",".join(reversed(load_profile("panda").joint_names))
    sim = make_plan(robot="panda", hardware="sim", demo=True)
    arm = make_plan(
        robot="panda", hardware="ros2_control", demo=True, controller="arm_controller", controller_joints=f"[{joints}]"
    )
    assert rest(sim) == rest(arm)
    bridge = arm.node("ros2_control_bridge")
    assert bridge.role == "hardware"
    assert bridge.parameters["controller"] == "arm_controller"
    assert bridge.parameters["controller_joints"] == joints.split(",")
    # No joints given: the node's default (the profile's order), not an untyped empty list.
    assert (
        "controller_joints"
        not in make_plan(robot="panda", hardware="ros2_control").node("ros2_control_bridge").parameters
    )


def test_runtime_arguments_reach_policy_runtime_and_need_a_policy(tmp_path, monkeypatch):
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    monkeypatch.chdir(tmp_path)
    runtime = (
        make_plan(
            policy="walk.onnx", latency_log="lat.jsonl", policy_dirs="runs/a, runs/b", latency_compensation="true"
        )
        .node("policy_runtime")
        .parameters
    )
    assert runtime["latency_log"] == str(tmp_path / "lat.jsonl")
    assert runtime["latency_compensation"] is True
    # The shipped folder stays allowed: the node's default, which the list replaces.
    assert runtime["policy_dirs"] == [str(share_dir() / "policies"), str(tmp_path / "runs/a"), str(tmp_path / "runs/b")]
    with pytest.raises(PlanError, match=r"\['latency_log'\] set policy_runtime up.*add policy:=FILE"):
        make_plan(latency_log="lat.jsonl")


def test_sim2real_up_takes_every_launch_argument(tmp_path, capsys):
    """One source: each launch argument is an option of `sim2real up` and reaches the same plan."""
    import json

    from sim2real.cli.main import build_parser, main

    options = {
        o
        for action in build_parser()._subparsers._group_actions[0].choices["up"]._actions
        for o in action.option_strings
    }
    for arg in LAUNCH_ARGUMENTS.values():
        flag = arg.name.replace("_", "-")
        assert {f"--{flag}", f"--no-{flag}"} & options, f"sim2real up has no option for {arg.name}:="
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    joints = ",".join(load_profile("panda").joint_names)
    assert (
        main(
            [
                "up",
                "--robot",
                "panda",
                "--hardware",
                "ros2_control",
                "--controller",
                "arm_controller",
                "--controller-joints",
                joints,
                "--no-failure-collector",
                "--estimator",
                "false",
                "--policy",
                str(tmp_path / "walk.onnx"),
                "--latency-log",
                str(tmp_path / "lat.jsonl"),
                "--print-plan",
            ]
        )
        == 0
    )
    plan = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in plan["nodes"]}
    assert set(nodes) == {"ros2_control_bridge", "safety_supervisor", "policy_runtime"}
    assert nodes["ros2_control_bridge"]["parameters"]["controller"] == "arm_controller"
    assert nodes["policy_runtime"]["parameters"]["latency_log"] == str(tmp_path / "lat.jsonl")


def test_a_quadruped_hangs_in_the_air_for_the_joint_script_and_stands_otherwise(tmp_path):
    """The joint script swings every joint at once: a standing quadruped falls over under it,
    so pose_commander's robot is suspended unless told otherwise (a gantry, in sim)."""
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    suspended = lambda **kw: make_plan(**kw).node("sim_robot").parameters["suspended"]  # noqa: E731
    assert suspended(robot="go2", demo=True) is True
    assert suspended(robot="go2", demo=True, suspended="false") is False
    assert suspended(robot="go2", demo=True, policy=str(tmp_path / "walk.onnx")) is False
    assert suspended(robot="go2") is False
    assert suspended(robot="go2", suspended="true") is True
    assert suspended(robot="panda", demo=True) is False  # bolted down already


def test_the_estimator_runs_with_a_policy_unless_told_otherwise(tmp_path):
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    policy = str(tmp_path / "walk.onnx")
    names = lambda **kw: [n.name for n in make_plan(**kw).nodes]  # noqa: E731
    assert "state_estimator" in names(policy=policy)
    assert "state_estimator" not in names(policy=policy, estimator="false")
    assert "state_estimator" not in names()  # nothing reads it without a policy
    assert "state_estimator" in names(estimator="true")


def test_hardware_unitree_runs_the_bridge_in_place_of_the_sim_and_the_supervisor_as_on_hardware():
    plan = make_plan(robot="go2", hardware="unitree", network_interface="eth0")
    bridge = plan.node("unitree_bridge")
    assert bridge.role == "hardware"
    assert bridge.parameters["network_interface"] == "eth0" and bridge.parameters["unitree_domain"] == 0
    assert bridge.parameters["remote_max_velocity"] == [1.0, 0.5, 1.0]
    slow = make_plan(robot="go2", hardware="unitree", remote_max_velocity="0.6,0.3,0.8").node("unitree_bridge")
    assert slow.parameters["remote_max_velocity"] == [0.6, 0.3, 0.8]
    assert "unitree_bridge" not in [n.name for n in make_plan(robot="go2", remote_max_velocity="1,0.5,1").nodes]
    assert "sim_robot" not in [n.name for n in plan.nodes]
    assert plan.node("safety_supervisor").parameters["simulated"] is False


def test_hardware_mujoco_is_the_sim_robot_on_the_second_engine_and_nothing_else_changes():
    pybullet = make_plan(hardware="sim", lockstep=True, demo=True)
    mujoco = make_plan(hardware="mujoco", lockstep=True, demo=True)
    assert rest(pybullet) == rest(mujoco)
    assert mujoco.use_sim_time and mujoco.node("safety_supervisor").parameters["simulated"] is True
    assert mujoco.node("sim_robot").parameters == {**pybullet.node("sim_robot").parameters, "engine": "mujoco"}
    assert pybullet.node("sim_robot").parameters["engine"] == "pybullet"
    with pytest.raises(PlanError, match="lockstep:=true needs hardware:=sim or mujoco"):
        make_plan(hardware="topic", lockstep=True)


@pytest.mark.parametrize(
    ("arguments", "driver"),
    [
        ({"hardware": "sim"}, "sim_robot"),
        ({"hardware": "unitree", "network_interface": "eth0"}, "unitree_bridge"),
        ({"robot": "panda", "hardware": "ros2_control"}, "ros2_control_bridge"),
        ({"hardware": "topic"}, ""),  # an outside driver: any reader of /joint_commands counts
    ],
)
def test_the_supervisor_is_told_which_node_drives_the_robot(arguments, driver):
    assert make_plan(**arguments).node("safety_supervisor").parameters["driver"] == driver


def test_a_reality_robot_runs_on_its_sets_engine_with_its_model_and_hidden_conditions():
    plan = make_plan(hardware="mujoco", reality="go2_independent", reality_robot=2, lockstep=True)
    parameters = plan.node("sim_robot").parameters
    assert (parameters["reality"], parameters["reality_robot"], parameters["conditions"]) == (
        "go2_independent",
        2,
        "{}",
    )
    assert "model" not in parameters  # the set brings it; the node loads it
    assert "reality" not in make_plan(hardware="mujoco").node("sim_robot").parameters


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        ({"hardware": "sim"}, "runs on mujoco: launch it with hardware:=mujoco"),
        ({"hardware": "mujoco", "model": "example-robot-data:go2"}, "leave model:= and conditions:= out"),
        ({"hardware": "mujoco", "conditions": "{latency: 0.01}"}, "leave model:= and conditions:= out"),
        ({"hardware": "mujoco", "reality_robot": "-1"}, "reality_robot:=-1 must be 0 or more"),
        ({"hardware": "mujoco", "reality_robot": "two"}, "reality_robot:='two' must be an integer"),
        ({"hardware": "mujoco", "robot": "panda"}, "is a 'go2', not a 'panda'"),
    ],
)
def test_a_reality_robot_refuses_what_would_pick_its_conditions(arguments, words):
    with pytest.raises(PlanError, match=words):
        make_plan(reality="go2_independent", **arguments)


def test_a_reality_robot_needs_a_known_set_and_its_number_needs_the_set():
    with pytest.raises(ConfigError, match="no_such_set"):
        make_plan(hardware="mujoco", reality="no_such_set")
    with pytest.raises(PlanError, match="reality_robot is for a reality set: give reality:=NAME"):
        make_plan(hardware="mujoco", reality_robot=3)


POLICY = str(ROOT / "policies" / "go2_walk.onnx")


def test_composed_puts_the_control_chain_in_one_process_and_leaves_the_rest_alone():
    separate = make_plan(robot="go2", policy=POLICY, demo=True)
    composed = make_plan(robot="go2", policy=POLICY, demo=True, composed="true")
    # The same nodes with the same parameters: only where they run differs.
    assert [(n.name, n.parameters) for n in composed.nodes] == [(n.name, n.parameters) for n in separate.nodes]
    assert [p.name for p in separate.processes()] == [n.name for n in separate.nodes]
    assert [(p.name, [m.name for m in p.members]) for p in composed.processes()] == [
        ("sim_robot", ["sim_robot"]),
        ("control_chain", ["safety_supervisor", "state_estimator", "policy_runtime"]),
        ("demo_script", ["demo_script"]),
        ("failure_collector", ["failure_collector"]),
    ]
    chain = composed.processes()[1]
    assert chain.composed and chain.executable == "control_chain"
    assert chain.arguments == ("safety_supervisor", "state_estimator", "policy_runtime")
    assert composed.process_of("policy_runtime") == "control_chain" and composed.process_of("sim_robot") == "sim_robot"
    # Each member's parameters under its own name; a node alone under /** (renamed by its remap).
    document = chain.parameters_document()
    assert set(document) == {"/safety_supervisor", "/state_estimator", "/policy_runtime"}
    assert document["/policy_runtime"]["ros__parameters"] == composed.node("policy_runtime").parameters
    alone = composed.processes()[0]
    assert alone.parameters_document() == {"/**": {"ros__parameters": composed.node("sim_robot").parameters}}


def test_a_composed_chain_takes_its_most_urgent_members_real_time_scheduling():
    from sim2real.core.launch_env import REALTIME_ENV
    from sim2real.core.realtime import ROLE_PRIORITY, RealtimeRequest

    plan = make_plan(robot="go2", policy=POLICY, composed=True, realtime=True)
    chain = next(p for p in plan.processes() if p.composed)
    assert chain.role == "safety"
    request = RealtimeRequest.decode(chain.environment[REALTIME_ENV])
    assert request.priority == ROLE_PRIORITY["safety"] > ROLE_PRIORITY["control"]


def test_the_composed_process_runs_without_a_rename_and_with_its_members_named():
    from sim2real.graph.processes import process_command

    plan = make_plan(robot="go2", policy=POLICY, composed=True)
    chain, sim = next(p for p in plan.processes() if p.composed), plan.processes()[0]
    command = process_command(chain, Path("chain.yaml"))
    assert command[1:] == [
        "-m",
        "sim2real.nodes.control_chain",
        "safety_supervisor",
        "state_estimator",
        "policy_runtime",
        "--ros-args",
        "--params-file",
        "chain.yaml",
    ]
    assert "__node:=sim_robot" in process_command(sim, Path("sim.yaml"))


def test_composed_without_a_policy_composes_the_supervisor_alone():
    plan = make_plan(robot="go2", composed=True)
    assert [(p.name, [m.name for m in p.members]) for p in plan.processes()] == [
        ("sim_robot", ["sim_robot"]),
        ("control_chain", ["safety_supervisor"]),
        ("failure_collector", ["failure_collector"]),
    ]


def test_composed_is_refused_where_no_driver_timeout_stands_behind_it():
    joints = ",".join(load_profile("panda").joint_names)
    with pytest.raises(PlanError, match="composed:=true relies on the driver's command timeout"):
        make_plan(robot="panda", hardware="ros2_control", controller_joints=f"[{joints}]", composed=True)


def test_composed_on_an_outside_driver_is_planned_with_a_caution_sim2real_up_prints(capsys):
    """hardware:=topic is the user's own driver: whether it damps on a silent /joint_commands,
    which is all that stands behind a dead chain, is theirs to check, so the plan says so."""
    from sim2real.cli.main import main

    assert make_plan(robot="go2", hardware="topic").cautions == ()
    assert make_plan(robot="go2", hardware="sim", composed=True).cautions == ()
    (caution,) = make_plan(robot="go2", hardware="topic", composed=True).cautions
    assert "driver's command timeout" in caution and "leave composed:= out" in caution
    assert main(["up", "--robot", "go2", "--hardware", "topic", "--composed", "--print-plan"]) == 0
    out, err = capsys.readouterr()
    assert f"warning: {caution}" in err
    assert json.loads(out)["cautions"] == [caution]


def test_a_demo_waits_for_the_bundle_of_a_loss_only_where_one_is_written():
    """`sim2real up --demo` keeps the graph up after a lost process for the failure collector's
    bundle, and only then: a dead supervisor or composed chain is written up on the silence of
    /joint_commands in real time, never in lockstep (the sim's clock stops with it)."""
    from sim2real.cli.main import _loss_is_written_up

    policy = str(share_dir() / "policies" / "go2_walk.onnx")
    for composed in (False, True):
        live = make_plan(robot="go2", policy=policy, demo=True, composed=composed)
        lockstep = make_plan(robot="go2", policy=policy, demo=True, composed=composed, lockstep=True)
        commands = live.process_of("safety_supervisor")
        assert _loss_is_written_up(live, commands, -9, {})
        assert not _loss_is_written_up(lockstep, commands, -9, {})
        if not composed:  # a silent policy trips the supervisor's wall-clock watchdog, in lockstep too
            assert _loss_is_written_up(lockstep, "policy_runtime", 1, {})
        assert not _loss_is_written_up(live, commands, 2, {})  # refused its configuration: nothing ran
        assert not _loss_is_written_up(live, "failure_collector", 1, {})
        assert not _loss_is_written_up(live, commands, -9, {"failure_collector": 1})


def test_the_launch_file_removes_the_composed_chains_parameters_file_at_shutdown(monkeypatch, tmp_path):
    """launch and launch_ros have no wheel: stand-ins that keep what the launch file hands them
    (the real classes' keyword arguments) let it render a composed plan; the shutdown handler it
    registers removes the chain's parameters file, which held every member's parameters."""
    import importlib.util
    import sys
    import types

    import yaml

    class Recorded:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    names = {
        "launch": ["LaunchDescription"],
        "launch.actions": ["DeclareLaunchArgument", "LogInfo", "OpaqueFunction", "RegisterEventHandler"],
        "launch.event_handlers": ["OnShutdown"],
        "launch.substitutions": ["LaunchConfiguration"],
        "launch_ros": [],
        "launch_ros.actions": ["Node"],
    }
    for module, classes in names.items():
        stand_in = types.ModuleType(module)
        for name in classes:
            setattr(stand_in, name, type(name, (Recorded,), {}))
        monkeypatch.setitem(sys.modules, module, stand_in)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    spec = importlib.util.spec_from_file_location("bringup_launch", ROOT / "launch" / "bringup.launch.py")
    launch_file = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch_file)

    plan = make_plan(
        robot="go2", hardware="topic", composed=True, policy=str(share_dir() / "policies" / "go2_walk.onnx")
    )
    (chain,) = [p for p in plan.processes() if p.composed]
    node, handler = launch_file._process(chain)
    (params,) = node.kwargs["parameters"]
    assert Path(params).parent == tmp_path
    assert set(yaml.safe_load(Path(params).read_text())) == {f"/{m.name}" for m in chain.members}
    (on_shutdown,) = handler.args
    on_shutdown.kwargs["on_shutdown"](None, None)
    assert not Path(params).exists()
    (alone,) = launch_file._process(next(p for p in plan.processes() if not p.composed))
    assert "parameters" in alone.kwargs  # a node alone: launch_ros writes its own parameters file
