"""The evaluation suite: scenario files, and the metrics on scripted policies built to pass
and to fail, with the deployed stack (runtime, supervisor, estimator) around the world."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim2real.cli.main import main
from sim2real.core import supervisor as supervisor_module
from sim2real.core.paths import share_dir
from sim2real.core.robot_profile import load_profile
from sim2real.evaluate.evaluate import EvaluationError
from sim2real.evaluate.suite import SuiteError, evaluate_suite, load_suite
from tests.policy_models import write_target_policy

GO2 = load_profile("go2")
PANDA = load_profile("panda")


def test_the_shipped_suite_covers_the_command_space():
    suite = load_suite("go2_walk")
    commands = {s.name: s.command for s in suite.scenarios}
    assert commands["stand_still"] == (0.0, 0.0, 0.0)
    assert {commands[n][0] for n in ("forward_0.3", "forward_0.5", "forward_0.8", "backward_0.3")} == {
        0.3,
        0.5,
        0.8,
        -0.3,
    }
    assert {commands["left_0.3"][1], commands["right_0.3"][1]} == {0.3, -0.3}
    assert {commands[n][2] for n in ("turn_left_0.4", "turn_right_0.4", "turn_left_0.6", "turn_right_0.6")} == {
        0.4,
        -0.4,
        0.6,
        -0.6,
    }
    assert commands["forward_and_turn"][0] > 0 and commands["forward_and_turn"][2] != 0
    pushed = next(s for s in suite.scenarios if s.name == "pushed_while_walking")
    assert pushed.command[0] > 0 and len(pushed.pushes) == 3
    assert suite.targets["takeover_height"] == 0.18 and suite.targets["estimator_rmse"] == 0.05


@pytest.mark.parametrize(
    "text, words",
    [
        ("robot: go2\nscenarios: []\n", "scenarios: no scenarios"),
        ("robot: go2\nspeed: 1\nscenarios: [{name: a, command: [0, 0, 0]}]\n", "speed: unknown key"),
        ("robot: go2\nscenarios: [{name: a, command: [0, 0]}]\n", "scenarios[0].command: expected [vx, vy, yaw_rate]"),
        ("robot: go2\nscenarios: [{name: a, command: [0, 0, 0]}, {name: a, command: [1, 0, 0]}]\n", "names repeat"),
        ("robot: go2\ntargets: {speed: 1}\nscenarios: [{name: a, command: [0, 0, 0]}]\n", "unknown targets ['speed']"),
        (
            "robot: go2\nscenarios: [{name: a, command: [0, 0, 0], pushes: [{at: 1, force: 60}]}]\n",
            "pushes[0]: expected {at: s, force: [fx, fy, fz], duration: s}",
        ),
    ],
)
def test_a_bad_suite_names_the_field_and_the_fix(tmp_path, text, words):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SuiteError, match="Fix:") as caught:
        load_suite(path)
    assert words in str(caught.value)


@pytest.mark.parametrize("engine", ["pybullet", "mujoco"])
def test_a_policy_that_holds_its_stand_passes_standing_and_fails_walking(holding_policy, short_suite, engine):
    report = evaluate_suite(holding_policy, short_suite, ["nominal"], engine=engine, workers=0)
    results = {r.scenario: r for r in report.results}
    stand, walk = results["stand_still"], results["forward_0.3"]
    assert stand.passed, stand.failed_targets
    assert stand.fell == 0 and stand.mean("feet_down") == 1.0 and stand.mean("drift") < 0.05
    assert stand.mean("takeover_height") > 0.2 and stand.mean("estimator_rmse") < 0.05
    assert stand.mean("saturation") == 0.0
    assert not walk.passed and abs(walk.mean("vx")) < 0.05
    assert any(f.startswith("velocity_error 0.") and f.endswith("> 0.1") for f in walk.failed_targets)


def test_a_shove_that_moves_a_standing_robot_is_seen_as_drift(holding_policy, short_suite):
    report = evaluate_suite(holding_policy, short_suite, ["nominal"], workers=0, scenarios=["shoved"])
    (shoved,) = report.results
    assert shoved.mean("drift") > 0.05
    assert any(f.startswith("drift") for f in shoved.failed_targets)


def test_a_policy_that_folds_its_legs_fails_by_its_fall(tmp_path, short_suite):
    folded = GO2.default_positions.copy()
    for name in GO2.joint_names:
        if name.endswith("thigh_joint"):
            folded[GO2.joint_names.index(name)] = 2.0
        elif name.endswith("calf_joint"):
            folded[GO2.joint_names.index(name)] = -2.6
    tipping = write_target_policy(tmp_path / "fold.onnx", GO2, folded)
    report = evaluate_suite(tipping, short_suite, ["nominal"], workers=0, scenarios=["stand_still"])
    (result,) = report.results
    assert result.fell == 1.0 and result.failed_targets[0] == "fell in 1/1"
    assert "fall" in result.episodes[0].reason or "supervisor" in result.episodes[0].reason


def test_world_sets_draw_the_same_robot_for_every_scenario_of_an_episode(holding_policy, short_suite):
    report = evaluate_suite(
        holding_policy,
        short_suite,
        ["go2_takeover_stress", "go2_reference"],
        episodes=1,
        workers=2,
        scenarios=["stand_still", "forward_0.3"],
    )
    by_world = {}
    for result in report.results:
        by_world.setdefault(result.world, []).append(result.episodes[0].conditions)
    assert by_world["go2_takeover_stress"][0] == {"mass_scale": 1.2, "motor_strength": 0.85, "latency": 0.02}
    first, second = by_world["go2_reference"]
    assert first == second and 0.0 <= first["terrain_roughness"] <= 0.15


def test_a_robot_that_cannot_reach_its_stand_fails_by_the_refused_engage(holding_policy, short_suite, monkeypatch):
    """A stand further from the stand pose than the supervisor's tolerance: the engage is refused,
    as an operator's would be, and the suite reports the refusal. (With the stand's gravity
    feed-forward, a robot either stands within 0.7 rad or collapses on the way; the nominal
    robot's 0.09 rad is made too far here by a tighter tolerance.)"""
    monkeypatch.setattr(supervisor_module, "ENGAGE_STAND_TOLERANCE", 0.01)
    report = evaluate_suite(holding_policy, short_suite, ["nominal"], workers=0, scenarios=["stand_still"])
    (result,) = report.results
    assert not result.episodes[0].engaged and "refused the engage" in result.episodes[0].reason
    assert result.failed_targets[0].startswith("engage refused in 1/1 (")


def test_the_stress_robot_stands_close_enough_to_engage(holding_policy, short_suite):
    """20 % heavier, motors 15 % weaker, 20 ms late: without the stand's feed-forward it sags
    0.76 rad at a rear calf, past the engage tolerance; with it, 0.58 rad, within it."""
    report = evaluate_suite(holding_policy, short_suite, ["go2_takeover_stress"], workers=0, scenarios=["stand_still"])
    (result,) = report.results
    assert result.episodes[0].engaged, result.episodes[0].reason


def test_the_suite_refuses_another_robots_policy_and_unknown_scenarios(tmp_path, short_suite, holding_policy):
    arm = write_target_policy(tmp_path / "arm.onnx", PANDA, PANDA.default_positions)
    with pytest.raises(EvaluationError, match="suite 'go2_short' is for robot 'go2'.*drives 'panda'"):
        evaluate_suite(arm, short_suite, ["nominal"], workers=0)
    with pytest.raises(EvaluationError, match=r"no scenario \['moonwalk'\]"):
        evaluate_suite(holding_policy, short_suite, ["nominal"], workers=0, scenarios=["moonwalk"])


def test_cli_prints_one_table_writes_json_and_plot_and_can_require_a_pass(
    holding_policy, short_suite, tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    assert (
        main(
            [
                "eval",
                str(holding_policy),
                "--suite",
                str(short_suite),
                "--scenarios",
                "stand_still",
                "forward_0.3",
                "--workers",
                "0",
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "suite go2_short on pybullet" in out and "1/2 scenario runs pass" in out
    assert "FAIL: velocity_error" in out
    written = tmp_path / "runs" / "eval" / "hold_go2_short_pybullet.json"
    data = json.loads(written.read_text())
    assert [r["passed"] for r in data["results"]] == [True, False]
    assert (tmp_path / data["plot"]).is_file()
    assert (
        main(
            [
                "eval",
                str(holding_policy),
                "--suite",
                str(short_suite),
                "--scenarios",
                "forward_0.3",
                "--workers",
                "0",
                "--no-progress",
                "--no-plot",
                "--require-pass",
            ]
        )
        == 1
    )
    capsys.readouterr()
    assert main(["eval", str(holding_policy), "--require-pass", "--no-progress"]) == 2
    assert "--scenarios, --require-pass and --ablate belong to a suite" in capsys.readouterr().err


def test_the_shipped_suite_file_is_where_eval_looks_for_it():
    assert (share_dir() / "config" / "eval" / "go2_walk.yaml").is_file()
    assert load_suite("go2_walk").source.endswith("go2_walk.yaml")
    assert np.isfinite([s.duration for s in load_suite("go2_walk").scenarios]).all()


def test_a_reality_set_says_where_it_ran_and_the_report_carries_the_targets(holding_policy, short_suite):
    report = evaluate_suite(
        holding_policy, short_suite, ["reality:go2_independent"], workers=0, scenarios=["stand_still"]
    )
    assert report.elsewhere == {"reality:go2_independent": "mujoco with model example-robot-data:go2"}
    assert "reality:go2_independent ran on mujoco with model example-robot-data:go2" in report.table()
    assert report.results[0].episodes[0].conditions == {}
    assert report.targets["estimator_rmse"] == 0.05 and np.isfinite(report.results[0].mean("height"))
