"""Reality sets: robots drawn from a secret seed that no training or fitting code can read."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.evaluate.evaluate import EvaluationError, evaluate_policy, resolve_worlds
from sim2real.evaluate.reality import RealityError, load_reality

SRC = Path(__file__).resolve().parents[2] / "src" / "sim2real"
GO2_POLICY = share_dir() / "policies" / "go2_walk.onnx"
# Code that trains, identifies, randomizes or simulates: it must not be able to make the draws.
BLIND = [
    *(SRC / "train").rglob("*.py"),
    *(SRC / "sysid").rglob("*.py"),
    *(SRC / "sim").rglob("*.py"),
    *(SRC / "core").rglob("*.py"),
    SRC / "cli" / "pipeline.py",
    SRC / "cli" / "sysid.py",
    SRC / "graph" / "sysid_recording.py",
]


def test_no_training_or_fitting_code_imports_the_reality_sets_or_names_their_seeds():
    offenders = []
    for path in BLIND:
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any("reality" in name for name in names):
                offenders.append(f"{path.relative_to(SRC)}: imports {names}")
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and (node.value.endswith(".seed") or "reality/" in node.value or node.value in ("reality", "reality:"))
            ):
                offenders.append(f"{path.relative_to(SRC)}: names {node.value!r}")
    assert BLIND and not offenders


def test_the_draws_follow_the_secret_and_the_episode_and_nothing_else(tmp_path):
    reality = load_reality("go2_independent")
    assert (reality.robot, reality.engine, reality.model) == ("go2", "mujoco", "example-robot-data:go2")
    draws = [reality.conditions.sample(np.random.default_rng(k)) for k in range(3)]
    assert draws[0] == reality.conditions.sample(np.random.default_rng(0))  # episode 0 is always the same robot
    assert draws[0] != draws[1]
    copy = tmp_path / "go2_independent.yaml"
    shutil.copy(share_dir() / "config" / "reality" / "go2_independent.yaml", copy)
    copy.with_suffix(".seed").write_text("12345\n")
    other = load_reality(copy)
    assert other.conditions.sample(np.random.default_rng(0)) != draws[0]  # another secret, other robots
    # The same distribution, used as a plain randomization (what training could do with it),
    # does not give the reality's robots either.
    assert reality.conditions.distribution.sample(np.random.default_rng(0)) != draws[0]
    assert "12345" not in repr(other.conditions) and "secret" not in str(other.conditions.to_dict())


def test_a_reality_set_without_its_seed_or_for_another_robot_is_refused(tmp_path):
    copy = tmp_path / "lost.yaml"
    shutil.copy(share_dir() / "config" / "reality" / "go2_independent.yaml", copy)
    with pytest.raises(RealityError, match="no secret seed in .*lost.seed. Fix: write one integer"):
        load_reality(copy)
    from sim2real.core.robot_profile import load_profile
    from tests.policy_models import write_target_policy

    panda = load_profile("panda")
    arm = load_policy(write_target_policy(tmp_path / "arm.onnx", panda, panda.default_positions))
    with pytest.raises(EvaluationError, match="reality set 'go2_independent' is a 'go2'"):
        resolve_worlds(["reality:go2_independent"], arm)


def test_eval_runs_the_reality_on_its_own_engine_and_model_beside_the_sim_and_hides_the_draws():
    report = evaluate_policy(GO2_POLICY, ["nominal", "reality:go2_independent"], episodes=1, workers=0, progress=False)
    sim, reality = report.worlds
    assert sim.engine is None and (reality.engine, reality.model) == ("mujoco", "example-robot-data:go2")
    assert reality.episode_details[0]["conditions"] == {} and not reality.condition_effects
    assert report.gaps[0].b == "reality:go2_independent"
    assert "reality:go2_independent ran on mujoco with model example-robot-data:go2" in report.table()


def test_a_reality_robot_is_the_same_robot_each_time_and_states_only_the_published_noise():
    from sim2real.evaluate.reality import load_reality_robot as reality_robot
    from sim2real.sim.conditions import PhysicalConditions

    first, again, other = (reality_robot("go2_independent", k, "go2") for k in (0, 0, 1))
    assert (first.engine, first.model) == ("mujoco", "example-robot-data:go2")
    assert first.conditions == again.conditions and first.conditions != other.conditions
    assert first.conditions != PhysicalConditions() and "conditions" not in repr(first)
    # The stated noise is the set's published mean (uniform [0.01, 0.06] -> 0.035), for every robot.
    assert first.stated == other.stated and first.stated.gyro_noise == pytest.approx(0.035)
    assert first.stated.ground_friction == PhysicalConditions().ground_friction  # nothing else stated
    with pytest.raises(RealityError, match="a 'go2' set, asked for a 'panda'"):
        reality_robot("go2_independent", 0, "panda")
    with pytest.raises(ValueError, match="brings its own physical conditions"):
        reality_robot("go2_independent", 0, "go2", "{latency: 0.02}")
    assert reality_robot("go2_independent", 0, "go2", "{ }").conditions == first.conditions


def test_no_robot_measured_through_the_graph_is_one_an_evaluation_scores():
    from sim2real.evaluate.reality import load_reality_robot

    for name in ("go2_independent", "go2_worn"):
        reality = load_reality(name)
        graph = [load_reality_robot(name, k, "go2").conditions for k in range(5)]
        # The suite draws episode k with default_rng(seed + k), seeds from 0.
        scored = [reality.conditions.sample(np.random.default_rng(k)) for k in range(200)]
        assert not any(vars(robot) == {**vars(robot), **episode} for robot in graph for episode in scored)
        assert len({robot.mass_scale for robot in graph}) == 5


def test_a_set_read_without_its_seed_says_what_it_is_and_draws_nothing():
    reality = load_reality("go2_worn", secret=False)
    assert (reality.robot, reality.engine, reality.model) == ("go2", "mujoco", "example-robot-data:go2")
    with pytest.raises(RealityError, match="read without its secret"):
        reality.conditions.sample(np.random.default_rng(0))


@pytest.mark.parametrize("path", sorted((share_dir() / "config" / "reality").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_reality_set_loads_with_its_seed_and_draws_inside_its_ranges(path):
    reality = load_reality(path.stem)
    assert reality.name == path.stem and path.with_suffix(".seed").is_file()
    ranges = reality.conditions.distribution.ranges()
    for k in range(5):
        drawn = reality.conditions.sample(np.random.default_rng(k))
        assert all(ranges[name][0] <= value <= ranges[name][1] for name, value in drawn.items())
