"""The node plan: one source for the launch file and `sim2real up`."""
import ast
import configparser
from pathlib import Path

import pytest

from sim2real.bringup import LAUNCH_ARGUMENTS, PlanError, make_plan, parse_arguments
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import ProfileError, load_profile

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
    assert [n.name for n in from_launch.nodes] == ["sim_robot", "safety_supervisor", "pose_commander",
                                                   "failure_collector"]
    # The scripted commander stands in for a policy: it never reaches hardware directly.
    assert from_launch.node("pose_commander").remappings == (("/joint_commands", "/policy/joint_commands"),)


def test_hardware_topic_changes_only_the_hardware_part():
    sim = make_plan(hardware="sim", demo=True)
    real = make_plan(hardware="topic", demo=True)
    assert [n for n in sim.nodes if n.role != "hardware"] == [n for n in real.nodes if n.role != "hardware"]
    assert [n.role for n in real.nodes] == ["safety", "demo", "monitoring"]


@pytest.mark.parametrize("arguments, words", [
    ({"hardware": "gazebo"}, "not one of ['sim', 'topic', 'ros2_control']"),
    ({"robot": "panda", "hardware": "ros2_control", "controller_joints": "panda_joint1,panda_joint2"},
     "missing profile joints ['panda_joint3'"),
    ({"lockstep": "maybe"}, "must be true or false"),
    ({"seed": "x"}, "must be an integer"),
    ({"robto": "go2"}, "unknown launch arguments ['robto']"),
    ({"hardware": "topic", "lockstep": "true"}, "needs hardware:=sim"),
])
def test_bad_arguments_name_the_argument(arguments, words):
    with pytest.raises(PlanError) as info:
        make_plan(**arguments)
    assert words in str(info.value)


def test_unknown_robot_lists_the_profiles():
    with pytest.raises(ProfileError, match="go2"):
        make_plan(robot="spot")


def test_parse_arguments_fills_defaults():
    assert parse_arguments({}) == {"robot": "go2", "hardware": "sim", "lockstep": False, "seed": 0,
                                   "conditions": "{}", "safety_config": "", "autoengage": False,
                                   "demo": False, "policy": "", "controller": "forward_position_controller",
                                   "controller_joints": "", "failure_collector": True, "failures_dir": "",
                                   "estimator": "auto", "latency_compensation": False}


def test_a_policy_adds_the_runtime_as_the_control_node_with_an_absolute_path(tmp_path, monkeypatch):
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    monkeypatch.chdir(tmp_path)
    plan = make_plan(robot="go2", policy="walk.onnx", lockstep="true")
    assert [n.name for n in plan.nodes] == ["sim_robot", "safety_supervisor", "state_estimator", "policy_runtime",
                                            "failure_collector"]
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


def test_bad_policy_argument_fails_before_any_process_starts():
    with pytest.raises(PlanError, match="policy:='/no/such/policy.onnx': no such file"):
        make_plan(policy="/no/such/policy.onnx")


def test_demo_with_a_policy_is_driven_by_the_demo_script(tmp_path):
    (tmp_path / "walk.onnx").write_bytes(b"")
    plan = make_plan(policy=str(tmp_path / "walk.onnx"), demo=True, autoengage=True)
    assert [n.name for n in plan.nodes] == ["sim_robot", "safety_supervisor", "state_estimator", "policy_runtime",
                                            "demo_script", "failure_collector"]
    assert plan.node("demo_script").remappings == ()  # it speaks /cmd_vel, never joint commands


def test_launch_file_renders_the_plan_with_stable_launch_ros_api_only():
    """launch_ros has no PyPI wheel, so `ros2 launch` itself cannot run here: check that the
    launch file delegates to make_plan and uses only APIs present on Humble, Jazzy and Kilted."""
    source = (ROOT / "launch" / "bringup.launch.py").read_text()
    tree = ast.parse(source)
    imported = {(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == {
        ("launch", "LaunchDescription"), ("launch.actions", "DeclareLaunchArgument"),
        ("launch.actions", "OpaqueFunction"), ("launch.substitutions", "LaunchConfiguration"),
        ("launch_ros.actions", "Node"), ("sim2real.bringup", "LAUNCH_ARGUMENTS"), ("sim2real.bringup", "make_plan"),
    }
    functions = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    node_calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Node"]
    assert len(node_calls) == 1
    assert {kw.arg for kw in node_calls[0].keywords} <= {"package", "executable", "name", "parameters", "remappings",
                                                          "output", "arguments", "namespace"}


def test_every_planned_executable_is_installed_by_setup_py():
    setup_source = (ROOT / "setup.py").read_text()
    executables = ast.literal_eval(setup_source.split("NODE_EXECUTABLES = ", 1)[1].split("\n}\n", 1)[0] + "\n}")
    planned = {n.executable for plan in (make_plan(demo=True), make_plan(policy=__file__)) for n in plan.nodes}
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
    arm = make_plan(robot="panda", hardware="ros2_control", demo=True, controller="arm_controller",
                    controller_joints=f"[{joints}]")
    assert [n for n in sim.nodes if n.role != "hardware"] == [n for n in arm.nodes if n.role != "hardware"]
    bridge = arm.node("ros2_control_bridge")
    assert bridge.role == "hardware"
    assert bridge.parameters["controller"] == "arm_controller"
    assert bridge.parameters["controller_joints"] == joints.split(",")
    # No joints given: the node's default (the profile's order), not an untyped empty list.
    assert "controller_joints" not in make_plan(robot="panda", hardware="ros2_control").node(
        "ros2_control_bridge").parameters


def test_the_estimator_runs_with_a_policy_unless_told_otherwise(tmp_path):
    (tmp_path / "walk.onnx").write_bytes(b"onnx")
    policy = str(tmp_path / "walk.onnx")
    names = lambda **kw: [n.name for n in make_plan(**kw).nodes]  # noqa: E731
    assert "state_estimator" in names(policy=policy)
    assert "state_estimator" not in names(policy=policy, estimator="false")
    assert "state_estimator" not in names()  # nothing reads it without a policy
    assert "state_estimator" in names(estimator="true")
