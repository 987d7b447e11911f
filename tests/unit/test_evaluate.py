"""Evaluation: SR, returns, worst-5 %, domain gap on policies whose outcome is known exactly."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from sim2real.cli.main import main
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.evaluate.evaluate import EvaluationError, evaluate_policy, plot_returns, resolve_worlds
from sim2real.train.checkpoint import load_checkpoint
from sim2real.train.export import export_policy
from sim2real.train.runner import Trainer
from sim2real.train.train_config import load_train_config
from tests.unit.toy_env import TOY_TRAIN_CONFIG, make_toy_task, set_constant_actor, write_toy_randomization

# The toy moves x by 0.1 * gain * a per step for 20 steps towards the goal 1.0. The constant
# action 0.5 ends exactly on the goal when gain = 1 (success), at 0.5..0.6 when gain is
# 0.5..0.6 (failure). Return per step: -|1 - x| - 0.01 * a^2.
NOMINAL_RETURN = -sum(abs(1.0 - 0.05 * k) + 0.01 * 0.25 for k in range(1, 21))


def _constant_policy(folder, value: float, config_text: str):
    config_path = folder / "toy_reach.yaml"
    config_path.write_text(config_text)
    config = load_train_config("toy", "reach", config_path)
    checkpoint_path = Trainer(config, folder / "run", make_env=make_toy_task, progress=False).run().checkpoint
    constant = folder / "constant.pt"
    torch.save(set_constant_actor(load_checkpoint(checkpoint_path), value), constant)
    return export_policy(constant, folder / "constant.onnx").path


@pytest.fixture(scope="module")
def toy_policy(tmp_path_factory):
    folder = tmp_path_factory.mktemp("toy_eval")
    trained_on = write_toy_randomization(folder / "trained_on.yaml", 0.9, 1.1)
    return _constant_policy(folder, 0.5, TOY_TRAIN_CONFIG + f"randomization: {trained_on}\n")


@pytest.fixture
def weak_motors(tmp_path):
    return write_toy_randomization(tmp_path / "weak_motors.yaml", 0.5, 0.6)


def test_success_rate_returns_and_gap_are_exact_on_a_known_policy(toy_policy, weak_motors):
    report = evaluate_policy(
        toy_policy, ["nominal", weak_motors], episodes=10, seed=3, workers=0, make_env=make_toy_task, progress=False
    )
    nominal, weak = report.worlds
    assert (nominal.name, weak.name) == ("nominal", "weak_motors") and weak.randomization == "weak_motors"
    assert nominal.success_rate == 1.0 and weak.success_rate == 0.0
    assert nominal.mean_return == pytest.approx(NOMINAL_RETURN, abs=1e-4)
    assert nominal.worst5_return == pytest.approx(NOMINAL_RETURN, abs=1e-4) and nominal.std_return < 1e-6
    assert nominal.metrics["final_error"] == pytest.approx(0.0, abs=1e-4)
    assert weak.metrics["final_error"] == pytest.approx(1 - 0.55, abs=0.05)  # 1 - gain, gain U(0.5, 0.6)
    assert weak.mean_return < nominal.mean_return
    (gap,) = report.gaps
    assert (gap.a, gap.b) == ("nominal", "weak_motors")
    assert gap.delta == pytest.approx(weak.mean_return - nominal.mean_return)
    assert gap.gap_ratio_percent == pytest.approx(abs(gap.delta) / abs(nominal.mean_return) * 100)
    assert sorted(weak.returns)[0] == pytest.approx(weak.worst5_return)  # ceil(0.05 * 10) = 1 episode
    assert "GapRatio" in report.table() and "100.0%" in report.table()


def test_dr_world_is_the_policys_training_randomization_and_runs_are_reproducible(toy_policy):
    # Trained on gain U(0.9, 1.1): success iff |1 - gain| < 0.05, about half of the episodes.
    in_process = evaluate_policy(
        toy_policy, ["dr"], episodes=20, seed=7, workers=0, make_env=make_toy_task, progress=False
    )
    in_workers = evaluate_policy(
        toy_policy, ["dr"], episodes=20, seed=7, workers=2, make_env=make_toy_task, progress=False
    )
    (dr,) = in_process.worlds
    assert 0.0 < dr.success_rate < 1.0 and dr.randomization == "trained_on"
    assert in_workers.worlds[0].returns == dr.returns  # episode k always starts from seed + k
    other_seed = evaluate_policy(
        toy_policy, ["dr"], episodes=20, seed=8, workers=0, make_env=make_toy_task, progress=False
    )
    assert other_seed.worlds[0].returns != dr.returns


def test_each_episode_reports_its_conditions_and_the_table_says_which_condition_fails(toy_policy, tmp_path):
    # Gain U(0.9, 1.0): the constant action ends at x = gain, a success iff gain > 0.95.
    sagging = write_toy_randomization(tmp_path / "sagging.yaml", 0.9, 1.0)
    report = evaluate_policy(
        toy_policy, [sagging], episodes=20, seed=0, workers=2, make_env=make_toy_task, progress=False
    )
    (world,) = report.worlds
    details = world.episode_details
    assert [d["seed"] for d in details] == list(range(20))
    gains = np.array([d["conditions"]["motor_strength"] for d in details])
    assert np.all((gains >= 0.9) & (gains <= 1.0))
    assert [bool(d["success"]) for d in details] == list(np.abs(1.0 - gains) < 0.05)
    (effect,) = world.condition_effects
    median = np.median(gains)
    succeeded = np.array([bool(d["success"]) for d in details])
    assert effect.name == "motor_strength" and effect.median == pytest.approx(median)
    assert effect.success_at_or_below == pytest.approx(succeeded[gains <= median].mean())
    assert effect.success_above == pytest.approx(succeeded[gains > median].mean())
    assert effect.success_above > effect.success_at_or_below
    assert "where sagging fails" in report.table() and "motor_strength" in report.table()
    data = json.loads(report.to_json())["worlds"][0]
    assert data["episode_details"][3]["conditions"]["motor_strength"] == pytest.approx(gains[3])
    assert data["condition_effects"][0]["name"] == "motor_strength"


def test_worst_five_percent_is_the_mean_of_the_lowest_returns(toy_policy):
    report = evaluate_policy(toy_policy, ["dr"], episodes=40, seed=0, workers=0, make_env=make_toy_task, progress=False)
    returns = sorted(report.worlds[0].returns)
    assert report.worlds[0].worst5_return == pytest.approx(np.mean(returns[:2]))  # ceil(0.05 * 40) = 2


def test_json_and_plot(toy_policy, weak_motors, tmp_path):
    report = evaluate_policy(
        toy_policy, ["nominal", weak_motors], episodes=4, workers=0, make_env=make_toy_task, progress=False
    )
    data = json.loads(report.to_json())
    assert [w["name"] for w in data["worlds"]] == ["nominal", "weak_motors"]
    assert data["worlds"][0]["success_rate"] == 1.0 and len(data["worlds"][1]["returns"]) == 4
    assert data["gaps"][0]["a"] == "nominal" and data["sha256"] == load_policy(toy_policy).sha256
    png = plot_returns(report, tmp_path / "returns.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_world_set_errors(toy_policy):
    policy = load_policy(toy_policy)
    policy.metadata = dataclasses.replace(policy.metadata, randomization=None)
    with pytest.raises(EvaluationError, match="trained without randomization"):
        resolve_worlds(["dr"], policy)
    names = [w.name for w in resolve_worlds(["nominal", "nominal"], policy)]
    assert names == ["nominal", "nominal#2"]
    with pytest.raises(EvaluationError, match="--episodes must be >= 1"):
        evaluate_policy(policy, ["nominal"], episodes=0, make_env=make_toy_task, progress=False)
    with pytest.raises(EvaluationError, match=r"--difficulty must be in \[0, 1\].*got 3"):
        evaluate_policy(policy, ["nominal"], episodes=1, difficulty=3.0, make_env=make_toy_task, progress=False)


def tiny_panda_checkpoint(tmp_path) -> dict:
    """A Panda reach checkpoint after one tiny PPO iteration (its actor is then made constant)."""
    config = tmp_path / "panda.yaml"
    config.write_text(
        "iterations: 1\nnum_envs: 2\nworkers: 1\nnum_steps_per_env: 4\nrandomization: null\n"
        "adr: {enabled: false}\nppo: {num_mini_batches: 2}\n"
        "policy: {actor_hidden_dims: [8], critic_hidden_dims: [8]}\n"
    )
    trained = Trainer(load_train_config("panda", "reach", config), tmp_path / "run", progress=False).run()
    return load_checkpoint(trained.checkpoint)


def test_cli_eval_on_panda_reach_with_a_constant_policy(tmp_path, capsys, monkeypatch):
    """Action 0 holds the default pose. At difficulty 0 the goal is the end effector's
    default position (success), at difficulty 1 a point of the workspace box (failure)."""
    constant = tmp_path / "constant.pt"
    torch.save(set_constant_actor(tiny_panda_checkpoint(tmp_path), 0.0), constant)
    policy = export_policy(constant, tmp_path / "hold.onnx").path
    capsys.readouterr()

    monkeypatch.chdir(tmp_path)  # the default plot goes to ./runs/eval/
    assert (
        main(
            [
                "eval",
                str(policy),
                "--worlds",
                "nominal",
                "--episodes",
                "2",
                "--difficulty",
                "0",
                "--workers",
                "1",
                "--json",
                "--no-progress",
            ]
        )
        == 0
    )
    easy = json.loads(capsys.readouterr().out)
    assert easy["plot"] == "runs/eval/hold_returns.png" and (tmp_path / easy["plot"]).is_file()
    assert easy["robot"] == "panda" and easy["worlds"][0]["success_rate"] == 1.0
    assert easy["worlds"][0]["metrics"]["distance"] < 0.02

    plot = tmp_path / "hard.png"
    assert (
        main(
            [
                "eval",
                str(policy),
                "--worlds",
                "nominal",
                "--episodes",
                "2",
                "--workers",
                "1",
                "--no-progress",
                "--plot",
                str(plot),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "nominal    0.0%" in out and plot.is_file()
    assert main(["eval", str(policy), "--worlds", "dr", "--episodes", "1", "--no-plot"]) == 2
    assert "trained without randomization" in capsys.readouterr().err
    assert not math.isnan(easy["worlds"][0]["mean_return"])


def test_a_policy_with_non_finite_output_fails_its_episodes_instead_of_crashing(tmp_path):
    """The pipeline validates candidates with eval: a broken one must be scored, not crash it."""
    from sim2real.core.robot_profile import load_profile
    from tests.policy_models import metadata, write_policy

    broken = write_policy(tmp_path / "nan.onnx", metadata(load_profile("panda")), np.nan)
    report = evaluate_policy(broken, ["nominal"], episodes=2, workers=0, difficulty=0.0, progress=False)
    assert report.worlds[0].success_rate == 0.0


def test_select_exports_the_checkpoint_that_evaluates_best_not_the_last(tmp_path, capsys):
    """At difficulty 0 the goal is where the hand starts: holding still (action 0) succeeds,
    flinging every joint to its target bound fails. The later checkpoint flings."""
    from sim2real.cli.main import main

    checkpoint = tiny_panda_checkpoint(tmp_path)
    run = tmp_path / "selection"
    run.mkdir()
    torch.save(set_constant_actor(dict(checkpoint), 0.0), run / "model_10.pt")
    torch.save(set_constant_actor(dict(checkpoint), 3.0), run / "model_20.pt")
    capsys.readouterr()
    assert (
        main(
            [
                "select",
                str(run),
                "--worlds",
                "nominal",
                "--episodes",
                "2",
                "--difficulty",
                "0",
                "--workers",
                "0",
                "--no-progress",
                "--json",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    result = json.loads(out[out.index("{") :])
    assert result["selected"] == str(run / "model_10.pt") and Path(result["output"]) == run / "policy.onnx"
    rates = {c["iteration"]: c["worlds"]["nominal"]["success_rate"] for c in result["candidates"]}
    assert rates == {10: 1.0, 20: 0.0}
    assert load_policy(run / "policy.onnx").metadata.checkpoint.startswith(str(run / "model_10.pt"))
    assert main(["select", str(tmp_path / "empty_run")]) == 2
    assert "holds no model_<iteration>.pt" in capsys.readouterr().err


@pytest.mark.slow
def test_the_shipped_policies_run_on_the_second_engine_and_the_report_names_it(capsys):
    """sim2sim: the same episodes on MuJoCo, through the same command (about 10 s)."""
    assert (
        main(
            [
                "eval",
                str(share_dir() / "policies" / "go2_walk.onnx"),
                "--engine",
                "mujoco",
                "--worlds",
                "nominal",
                "--episodes",
                "2",
                "--workers",
                "0",
                "--json",
                "--no-plot",
                "--no-progress",
            ]
        )
        == 0
    )
    walk = json.loads(capsys.readouterr().out)
    assert walk["engine"] == "mujoco"
    assert walk["worlds"][0]["success_rate"] == 1.0 and walk["worlds"][0]["metrics"]["fell"] == 0.0
    reach = evaluate_policy(
        share_dir() / "policies" / "panda_reach.onnx",
        ["nominal"],
        episodes=3,
        workers=0,
        progress=False,
        engine="mujoco",
    )
    assert reach.engine == "mujoco" and "engine mujoco" in reach.table()
    assert reach.worlds[0].success_rate >= 2 / 3


def test_an_unknown_engine_is_refused_before_any_episode(toy_policy):
    with pytest.raises(EvaluationError, match="--engine/--model: unknown physics engine 'isaac'"):
        evaluate_policy(toy_policy, ["nominal"], episodes=1, workers=0, progress=False, engine="isaac")
