"""The sysid recording plan: bringup's hardware + supervisor part, plus sysid_logger; the launch
file and `sim2real sysid record` render it."""

import ast
from pathlib import Path

import pytest

from sim2real.cli.main import build_parser
from sim2real.graph.plan import PlanError, make_plan
from sim2real.graph.sysid_recording import SYSID_ARGUMENTS, make_sysid_plan, sysid_plan_from_args

ROOT = Path(__file__).resolve().parents[2]


def test_sim_plan_is_bringups_hardware_part_plus_the_logger(tmp_path):
    plan = make_sysid_plan(
        robot="panda",
        hardware="sim",
        lockstep="true",
        bag=str(tmp_path / "b"),
        conditions="{latency: 0.01}",
        duration="12",
        kind="chirp",
    )
    bringup = make_plan(
        robot="panda",
        hardware="sim",
        lockstep=True,
        conditions="{latency: 0.01}",
        estimator=False,
        failure_collector=False,
    )
    assert [n.name for n in plan.nodes] == [n.name for n in bringup.nodes] + ["sysid_logger"]
    assert plan.node("sim_robot") == bringup.node("sim_robot")
    logger = plan.node("sysid_logger").parameters
    assert logger["use_sim_time"] is True and logger["duration"] == 12.0 and logger["kind"] == "chirp"
    assert logger["bag"] == str((tmp_path / "b").absolute()) and logger["conditions"] == "{latency: 0.01}"


def test_topic_hardware_runs_no_simulator(tmp_path):
    plan = make_sysid_plan(robot="panda", hardware="topic", bag=str(tmp_path / "b"))
    assert [n.name for n in plan.nodes] == ["safety_supervisor", "sysid_logger"]
    assert plan.node("sysid_logger").parameters["conditions"] == ""


def test_a_go2_is_recorded_through_its_own_interface_and_an_arm_through_ros2_control(tmp_path):
    """`sysid record --hardware unitree|ros2_control`: the bridge of bringup's plan, given the
    command's interface, domain and controller, in place of a driver."""
    go2 = build_parser().parse_args(
        [
            "sysid",
            "record",
            "--robot",
            "go2",
            "--hardware",
            "unitree",
            "--network-interface",
            "eth1",
            "--unitree-domain",
            "3",
            "--suspended",
            "-o",
            str(tmp_path / "go2"),
        ]
    )
    plan = sysid_plan_from_args(go2)
    assert [n.name for n in plan.nodes] == ["unitree_bridge", "safety_supervisor", "sysid_logger"]
    assert plan.node("unitree_bridge").parameters["network_interface"] == "eth1"
    assert plan.node("unitree_bridge").parameters["unitree_domain"] == 3
    assert plan.node("sysid_logger").parameters["hardware"] == "unitree"
    assert plan.node("sysid_logger").parameters["suspended"] is True
    arm = build_parser().parse_args(
        [
            "sysid",
            "record",
            "--robot",
            "panda",
            "--hardware",
            "ros2_control",
            "--controller",
            "my_forward_controller",
            "-o",
            str(tmp_path / "panda"),
        ]
    )
    plan = sysid_plan_from_args(arm)
    assert [n.name for n in plan.nodes] == ["ros2_control_bridge", "safety_supervisor", "sysid_logger"]
    assert plan.node("ros2_control_bridge").parameters["controller"] == "my_forward_controller"
    # the Go2's interface means nothing to an arm's recording
    wrong = build_parser().parse_args(
        [
            "sysid",
            "record",
            "--robot",
            "panda",
            "--hardware",
            "topic",
            "--network-interface",
            "eth0",
            "-o",
            str(tmp_path / "x"),
        ]
    )
    with pytest.raises(PlanError, match="network_interface"):
        sysid_plan_from_args(wrong)
    # nor a controller to a Go2's
    wrong = build_parser().parse_args(
        [
            "sysid",
            "record",
            "--robot",
            "go2",
            "--hardware",
            "unitree",
            "--controller",
            "my_forward_controller",
            "-o",
            str(tmp_path / "y"),
        ]
    )
    with pytest.raises(PlanError, match="controller"):
        sysid_plan_from_args(wrong)


def test_a_quadruped_on_a_stand_hangs_in_sim_and_the_bag_says_so(tmp_path):
    sim = make_sysid_plan(robot="go2", bag=str(tmp_path / "a"), suspended="true")
    assert sim.node("sim_robot").parameters["suspended"] is True
    assert sim.node("sysid_logger").parameters["suspended"] is True
    # On hardware the robot already hangs on its stand: only the bag records it.
    real = make_sysid_plan(robot="go2", hardware="topic", bag=str(tmp_path / "b"), suspended="true")
    assert real.node("sysid_logger").parameters["suspended"] is True
    standing = make_sysid_plan(robot="go2", bag=str(tmp_path / "c"))
    assert standing.node("sim_robot").parameters["suspended"] is False
    assert standing.node("sysid_logger").parameters["suspended"] is False
    for hardware in ("sim", "topic"):
        with pytest.raises(PlanError, match="has a fixed base"):
            make_sysid_plan(robot="panda", hardware=hardware, bag=str(tmp_path / "d"), suspended="true")


def test_bad_arguments(tmp_path):
    with pytest.raises(PlanError, match="bag:=DIR is required"):
        make_sysid_plan(robot="panda")
    tmp_path.joinpath("old").mkdir()
    with pytest.raises(PlanError, match="exists already"):
        make_sysid_plan(robot="panda", bag=str(tmp_path / "old"))
    with pytest.raises(PlanError, match="unknown sysid launch arguments"):
        make_sysid_plan(robot="panda", bag=str(tmp_path / "n"), policy="x.onnx")
    with pytest.raises(PlanError, match="numbers expected"):
        make_sysid_plan(robot="panda", bag=str(tmp_path / "n"), duration="long")
    # the excitation as the logger would build it, refused before any process starts
    with pytest.raises(PlanError, match=r"sysid excitation: duration 4 s must exceed twice the ramp"):
        make_sysid_plan(robot="go2", bag=str(tmp_path / "n"), duration="4")
    with pytest.raises(PlanError, match=r"sysid excitation: joints \['elbow'\] are not joints"):
        make_sysid_plan(robot="panda", bag=str(tmp_path / "n"), joints="elbow")
    with pytest.raises(PlanError, match="f_min < f_max"):
        make_sysid_plan(robot="panda", bag=str(tmp_path / "n"), f_min="2.0", f_max="1.0")


def test_launch_file_renders_the_plan_and_declares_every_argument():
    tree = ast.parse((ROOT / "launch" / "sysid_record.launch.py").read_text())
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("sim2real.graph.sysid_recording", "make_sysid_plan") in imported
    assert ("sim2real.graph.sysid_recording", "SYSID_ARGUMENTS") in imported
    assert all(arg.description for arg in SYSID_ARGUMENTS.values())


@pytest.mark.parametrize(
    "command", [["sysid", "fit"], ["sysid", "record"], ["sysid", "simulate"], ["dr", "from-sysid"]]
)
def test_every_command_has_help_with_an_example(command, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args([*command, "--help"])
    text = capsys.readouterr().out
    assert "example" in text and "sim2real " + command[0] in text


def test_a_reality_robot_is_recorded_like_a_real_one_its_conditions_unknown_to_the_bag(tmp_path):
    from sim2real.cli.main import build_parser

    argv = ["sysid", "record", "--robot", "go2", "--hardware", "mujoco", "--suspended", "-o", str(tmp_path / "r")]
    args = build_parser().parse_args([*argv, "--reality", "go2_independent", "--reality-robot", "2"])
    plan = sysid_plan_from_args(args)
    assert plan.node("sim_robot").parameters["reality_robot"] == 2 and not plan.known_conditions
    assert plan.node("sysid_logger").parameters["conditions"] == ""  # as on hardware: the fit must find them
    sim = sysid_plan_from_args(build_parser().parse_args([*argv, "--conditions", "{latency: 0.01}"]))
    assert sim.known_conditions and sim.node("sysid_logger").parameters["conditions"] == "{latency: 0.01}"
    model = sysid_plan_from_args(build_parser().parse_args([*argv, "--model", "example-robot-data:go2"]))
    assert model.node("sim_robot").parameters["model"] == "example-robot-data:go2"
