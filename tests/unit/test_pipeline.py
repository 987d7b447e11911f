"""`sim2real pipeline`: adapting the randomization to failures, and refusing a candidate that
does not pass validation (it never reaches the push)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from sim2real.cli.main import main
from sim2real.cli.pipeline import adapt_randomization, fine_tune_rate
from sim2real.core.failure_bundle import list_bundles
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from sim2real.sim.randomization import load_randomization
from sim2real.train.checkpoint import load_checkpoint
from sim2real.train.policy_warm_start import policy_iteration
from sim2real.train.train_config import load_train_config, override_config
from tests.policy_models import metadata, write_policy, write_target_policy
from tests.unit.failure_bundles import write_arm_bundle

PANDA = load_profile("panda")
SHIPPED = share_dir() / "policies" / "panda_reach.onnx"


def test_adapt_widens_what_the_failures_fall_outside_of_and_adds_what_was_not_randomized(tmp_path):
    write_arm_bundle(tmp_path, "a", PANDA, SHIPPED, conditions={"latency": 0.03, "joint_friction": 0.2})
    write_arm_bundle(tmp_path, "b", PANDA, SHIPPED, conditions={"mass_scale": 1.3, "ground_friction": 0.4})
    base = load_randomization("panda_reference")
    adapted, changes = adapt_randomization(base, list_bundles(tmp_path), margin=0.1)
    by_name = {c.name: c for c in changes}
    assert set(by_name) == {"latency", "mass_scale", "ground_friction"}  # joint_friction 0.2 is covered
    low, high = adapted.ranges()["latency"]
    assert low == 0.0 and high >= 0.03
    assert adapted.ranges()["mass_scale"][1] >= 1.3
    assert by_name["ground_friction"].before is None  # not randomized for the arm before
    assert adapted.ranges()["ground_friction"][0] <= 0.4 <= adapted.ranges()["ground_friction"][1]
    assert adapted.ranges()["joint_friction"] == base.ranges()["joint_friction"]
    assert adapted.name == "panda_reference+failures"
    same, none = adapt_randomization(base, [], margin=0.1)
    assert none == [] and same.ranges() == base.ranges()


def test_a_candidate_that_fails_the_replays_is_refused_and_never_pushed(tmp_path, capsys):
    failures = tmp_path / "failures"
    write_arm_bundle(failures, "20261130T000000.000Z_supervisor_damping", PANDA, SHIPPED)
    current = write_target_policy(tmp_path / "robot" / "hold.onnx", PANDA, PANDA.default_positions)
    out = tmp_path / "pipe"
    # A candidate whose output is NaN fails the replay (the supervisor holds); holding does not.
    candidate = write_policy(tmp_path / "candidate" / "nan.onnx", metadata(PANDA), np.nan)
    args = [
        "pipeline",
        "validate",
        "--robot",
        "panda",
        "--policy",
        str(current),
        "--failures",
        str(failures),
        "--out",
        str(out),
        "--candidate",
        str(candidate),
        "--episodes",
        "1",
        "--eval-workers",
        "0",
        "--randomization",
        "panda_reference",
    ]
    assert main(args) == 1
    printed = capsys.readouterr().out
    assert "current fails 0, candidate fails 1" in printed and "validation REFUSED" in printed
    assert "nominal" in printed and "SR cur" in printed
    result = json.loads((out / "validation.json").read_text())
    assert not result["passed"] and result["replay"]["candidate"]["failed"] == 1
    push = [
        "pipeline",
        "push",
        "--robot",
        "panda",
        "--policy",
        str(current),
        "--failures",
        str(failures),
        "--out",
        str(out),
        "--candidate",
        str(candidate),
        "--node",
        "/no_such_runtime",
        "--timeout",
        "1",
    ]
    assert main(push) == 1
    assert "[push] refused" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "robot").iterdir()) == ["hold.onnx"]  # nothing copied


def test_push_refuses_a_candidate_that_was_never_validated(tmp_path, capsys):
    current = write_target_policy(tmp_path / "hold.onnx", PANDA, PANDA.default_positions)
    assert (
        main(
            [
                "pipeline",
                "push",
                "--robot",
                "panda",
                "--policy",
                str(current),
                "--out",
                str(tmp_path / "p"),
                "--candidate",
                str(current),
                "--failures",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "an unvalidated policy is never pushed" in capsys.readouterr().err


def test_dry_run_writes_nothing(tmp_path, capsys):
    failures = tmp_path / "failures"
    write_arm_bundle(failures, "x", PANDA, SHIPPED, conditions={"latency": 0.03})
    out = tmp_path / "pipe"
    assert (
        main(
            [
                "pipeline",
                "run",
                "--robot",
                "panda",
                "--policy",
                str(SHIPPED),
                "--failures",
                str(failures),
                "--out",
                str(out),
                "--checkpoint",
                "none.pt",
                "--dry-run",
            ]
        )
        == 0
    )
    printed = capsys.readouterr()
    # The shipped policy's stored ranges (ADR moved them) widened to 0.03 s plus a 10 % margin.
    assert re.search(r"latency: \[0, [0-9.]+\] -> \[0, 0.033\]", printed.out), printed.out
    assert "dry run: would write" in printed.out
    # Validation runs on nominal worlds and on the policy's own DR, and the dry run says both.
    assert "50 episodes on ['nominal', '" in printed.out and "(the DR stored in panda_reach.onnx" in printed.out
    assert "[push] dry run" in printed.out
    assert not out.exists()


@pytest.mark.slow
def test_the_pipeline_runs_end_to_end_on_a_tiny_budget(tmp_path, capsys):
    """Train 2 iterations, export as the 'current' policy, then adapt -> retrain 2 more ->
    validate; the push goes to a runtime that is not there, so the run ends without a swap."""
    failures = tmp_path / "failures"
    write_arm_bundle(failures, "x", PANDA, SHIPPED, conditions={"latency": 0.03})
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--robot",
                "panda",
                "--task",
                "reach",
                "--out",
                str(run),
                "--iterations",
                "2",
                "--num-envs",
                "2",
                "--workers",
                "1",
                "--no-progress",
            ]
        )
        == 0
    )
    assert main(["export", str(run / "model_2.pt"), "-o", str(tmp_path / "current.onnx")]) == 0
    out = tmp_path / "pipe"
    code = main(
        [
            "pipeline",
            "run",
            "--robot",
            "panda",
            "--policy",
            str(tmp_path / "current.onnx"),
            "--failures",
            str(failures),
            "--out",
            str(out),
            "--checkpoint",
            str(run / "model_2.pt"),
            "--iterations",
            "2",
            "--num-envs",
            "2",
            "--workers",
            "1",
            "--episodes",
            "2",
            "--eval-workers",
            "0",
            "--no-progress",
            "--node",
            "/no_such_runtime",
            "--timeout",
            "1",
        ]
    )
    printed = capsys.readouterr().out
    state = json.loads((out / "pipeline.json").read_text())
    assert (out / "randomization.yaml").is_file() and (out / "train" / "model_4.pt").is_file()
    assert load_randomization(out / "randomization.yaml").ranges()["latency"][1] >= 0.03
    assert "[validate]" in printed and "SR cand" in printed
    assert code == 1 and not state.get("pushed")  # refused by validation, or no runtime answered


def test_a_fine_tune_of_a_linear_recipe_goes_on_flat_at_its_final_rate():
    assert fine_tune_rate({"schedule": "fixed", "learning_rate": 3e-4}, 900) == {}
    assert fine_tune_rate({"schedule": "linear", "learning_rate": 3e-4, "learning_rate_final": 3e-5}, 900) == {
        "ppo.learning_rate": 3e-5
    }
    # A recipe whose line ended at an iteration of its own run (here 2400, before the
    # fine-tune's start): the fine-tune's flat line ends with the fine-tune, else it is refused.
    recipe = override_config(
        load_train_config("go2", "walk", "config/experiments/go2_walk/onehour.yaml"),
        {"ppo.learning_rate_final_iteration": 2400},
    )
    overrides = fine_tune_rate(recipe["ppo"], 3300 + 200)
    assert overrides == {"ppo.learning_rate": 5e-5, "ppo.learning_rate_final_iteration": 3500}
    tuned = override_config(recipe, {"iterations": 3500, **overrides})
    assert tuned["ppo"]["learning_rate"] == tuned["ppo"]["learning_rate_final"] == 5e-5


@pytest.mark.slow
def test_retrain_without_a_checkpoint_fine_tunes_the_policy_file_itself(tmp_path, capsys):
    out = tmp_path / "pipe"
    common = [
        "pipeline",
        "retrain",
        "--robot",
        "panda",
        "--policy",
        str(SHIPPED),
        "--out",
        str(out),
        "--adapted",
        "config/randomization/panda_reference.yaml",
        "--iterations",
        "3",
        "--critic-warmup",
        "2",
        "--num-envs",
        "2",
        "--workers",
        "1",
        "--no-progress",
    ]
    assert main([*common, "--dry-run"]) == 0
    assert "a new critic trained alone for 2 iterations, action noise 0.3" in capsys.readouterr().out
    assert not out.exists()
    assert main(common) == 0
    shipped = load_policy(SHIPPED)
    start = policy_iteration(shipped.metadata)  # the shipped file's checkpoint: iterations count on from it
    assert start > 0
    tuned = load_checkpoint(out / "train" / f"model_{start + 3}.pt")
    assert tuned["warm_start"] == {"from": str(SHIPPED), "iteration": start, "policy_sha256": shipped.sha256}
    assert tuned["training_config"]["critic_warmup"]["iterations"] == 2
    assert tuned["training_config"]["seed"] == shipped.metadata.training_config["seed"]  # the file's own recipe
    # The shipped recipe decays its rate; the fine-tune goes on at the rate it ended at.
    recipe = shipped.metadata.training_config["ppo"]
    assert recipe["schedule"] == "linear"
    assert tuned["optimizer_state_dict"]["param_groups"][0]["lr"] == pytest.approx(recipe["learning_rate_final"])
    assert json.loads((out / "pipeline.json").read_text())["candidate"] == str(out / "candidate.onnx")


def test_the_policy_tick_latency_raises_the_latency_range_and_never_lowers_it(tmp_path):
    """A bundle's tick latency p99 is part of the robot's latency, a lower bound: inside or below
    the trained range it changes nothing; above it, only the top moves."""
    base = load_randomization("panda_reference").with_ranges({"latency": (0.013, 0.023)})  # measured, say
    low, high = base.ranges()["latency"]
    for name, tick_ms in (("below", 0.5), ("inside", 1e3 * (low + high) / 2), ("above", 1e3 * high + 10.0)):
        folder = tmp_path / name
        write_arm_bundle(folder, "a", PANDA, SHIPPED)
        info_path = next(folder.glob("*/failure.json"))
        info = json.loads(info_path.read_text())
        info["policy_runtime"] = {"policy_runtime: policy": {"tick_latency_p99_ms": f"{tick_ms:.3f}"}}
        info_path.write_text(json.dumps(info))
        adapted, changes = adapt_randomization(base, list_bundles(folder), margin=0.1)
        if name != "above":
            assert changes == [] and adapted.ranges()["latency"] == (low, high), name
        else:
            (change,) = changes
            assert change.name == "latency" and "tick latency" in change.why
            new_low, new_high = adapted.ranges()["latency"]
            assert new_low == low and new_high >= tick_ms / 1e3


def test_a_later_stage_replays_the_failures_its_adapt_stage_read(tmp_path, capsys):
    """`pipeline validate` without --failures takes the folder `pipeline adapt --failures F`
    recorded in --out, not the collector's default folder with other robots' bundles."""
    failures = tmp_path / "failures"
    write_arm_bundle(failures, "20261130T000000.000Z_supervisor_damping", PANDA, SHIPPED)
    out = tmp_path / "pipe"
    common = ["--robot", "panda", "--policy", str(SHIPPED), "--out", str(out)]
    assert main(["pipeline", "adapt", *common, "--failures", str(failures)]) == 0
    assert json.loads((out / "pipeline.json").read_text())["failures"] == str(failures.resolve())
    validate = ["--candidate", str(SHIPPED), "--episodes", "1", "--eval-workers", "0"]
    main(["pipeline", "validate", *common, *validate])  # the shipped policy against itself
    assert "1 failure(s) x 1 replay(s)" in capsys.readouterr().out
    assert json.loads((out / "validation.json").read_text())["replay"]["current"]["replays"] == 1
    # adapt itself, run again without --failures, reads the collector's folder, not the last one.
    main(["pipeline", "adapt", *common, "--dry-run"])
    assert f"in {failures.resolve()}" not in capsys.readouterr().out


def test_a_bundle_of_a_process_death_alone_is_not_a_failure_to_adapt_to(tmp_path):
    """A stale_command bundle (the supervisor's process died) says nothing of the robot: adapt
    leaves it out, unless another trigger joined it."""
    from sim2real.cli.pipeline import _robot_bundles

    for name, kinds in (("died", ["stale_command"]), ("fell_then_died", ["fall", "stale_command"]), ("tripped", None)):
        write_arm_bundle(tmp_path, name, PANDA, SHIPPED, conditions={"latency": 0.03})
        if kinds is not None:
            info_path = next(p for p in tmp_path.glob("*/failure.json") if name in p.parent.name)
            info = json.loads(info_path.read_text())
            info["triggers"] = [{"kind": kind, "reason": "test"} for kind in kinds]
            info_path.write_text(json.dumps(info))
    kept = sorted(b.name for b in _robot_bundles(tmp_path, "panda"))
    assert len(kept) == 2 and not any("died" in name and "fell" not in name for name in kept), kept
