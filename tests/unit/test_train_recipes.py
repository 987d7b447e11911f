"""One recipe per shipped policy: `sim2real train --robot R --task T` runs the recipe that made
policies/R_T.onnx, and a variant extends a recipe instead of copying it."""

import re
from pathlib import Path

import pytest

from sim2real.core.policy_file import load_policy
from sim2real.train.train_config import TrainConfigError, load_train_config, override_config


@pytest.mark.parametrize("robot, task", [("go2", "walk"), ("panda", "reach")])
def test_the_default_config_is_the_recipe_of_the_shipped_policy(robot, task):
    shipped = load_policy(f"policies/{robot}_{task}.onnx").metadata.training_config
    # The file records its config as resolved then; keys added since take their defaults.
    assert load_train_config(robot, task) == override_config(shipped, {})


def test_only_shipped_recipes_sit_in_config_train():
    recipes = sorted(p.stem for p in Path("config/train").glob("*.yaml"))
    assert recipes == sorted(p.stem for p in Path("policies").glob("*.onnx"))


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_a_variant_extends_a_recipe_and_gives_only_what_differs(tmp_path):
    variant = write(
        tmp_path / "variant.yaml",
        "extends: go2_walk\nseed: 7\nppo: {entropy_coef: 0.001}\n"
        "task_config: {rewards: {weights: {feet_clearance: -10.0}}}\n",
    )
    base, config = load_train_config("go2", "walk"), load_train_config(None, None, variant)
    assert config["seed"] == 7 and config["ppo"]["entropy_coef"] == 0.001
    assert config["ppo"]["learning_rate_final"] == base["ppo"]["learning_rate_final"]  # merged, not replaced
    weights = config["task_config"]["rewards"]["weights"]
    assert weights["feet_clearance"] == -10.0 and weights["base_height"] == -200.0  # free-form sections merge too
    assert {k: v for k, v in config.items() if k not in ("seed", "ppo", "task_config")} == {
        k: v for k, v in base.items() if k not in ("seed", "ppo", "task_config")
    }


def test_a_section_of_another_kind_replaces_the_parents(tmp_path):
    variant = write(tmp_path / "linear.yaml", "extends: go2_walk\ncurriculum: {kind: linear, d_min: 0.2}\n")
    assert load_train_config(None, None, variant)["curriculum"] == {"kind": "linear", "d_min": 0.2}


def test_extends_chains_through_relative_paths(tmp_path):
    write(tmp_path / "middle.yaml", f"extends: {Path('config/train/go2_walk.yaml').resolve()}\nseed: 3\n")
    (tmp_path / "leaf").mkdir()
    leaf = write(tmp_path / "leaf" / "leaf.yaml", "extends: ../middle.yaml\niterations: 10\n")
    config = load_train_config("go2", "walk", leaf)
    assert (config["seed"], config["iterations"]) == (3, 10)


@pytest.mark.parametrize(
    "text, words",
    [
        ("extends: no_such_recipe\n", "extends: .*no_such_recipe.yaml not found. Fix: name a file in config/train"),
        ("extends: [go2_walk]\n", "extends: expected a file, got \\['go2_walk'\\]"),
        ("extends: cycle.yaml\n", "extends: a cycle"),
    ],
)
def test_a_bad_extends_names_the_file_and_the_fix(tmp_path, text, words):
    bad = write(tmp_path / "cycle.yaml", text)
    with pytest.raises(TrainConfigError, match=words):
        load_train_config("go2", "walk", bad)


def test_a_wrong_field_is_reported_in_the_file_that_has_it(tmp_path):
    parent = write(tmp_path / "parent.yaml", "extends: go2_walk\nppo: {learning_rat: 1.0e-4}\n")
    child = write(tmp_path / "child.yaml", "extends: parent.yaml\nseed: 1\n")
    with pytest.raises(TrainConfigError, match=re.escape(f"{parent}: ppo.learning_rat: unknown field")):
        load_train_config(None, None, child)
