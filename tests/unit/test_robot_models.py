"""Other robot models for the MuJoCo world: an independently written Go2, files, and refusals."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest

from sim2real.core.robot_profile import load_profile
from sim2real.evaluate.evaluate import EvaluationError, evaluate_policy
from sim2real.graph.plan import PlanError, make_plan
from sim2real.sim.engines import make_world
from sim2real.sim.mujoco_world import MujocoWorld
from sim2real.sim.robot_models import ModelError, resolve_model

GO2 = load_profile("go2")
INDEPENDENT = "example-robot-data:go2"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_packaged_go2_is_written_with_absolute_meshes_and_no_visuals(tmp_path):
    path = resolve_model(INDEPENDENT)
    assert path.parent == tmp_path / "cache" / "sim2real" / "models"
    root = ET.parse(path).getroot()
    assert not list(root.iter("visual"))
    meshes = [mesh.get("filename") for mesh in root.iter("mesh")]
    assert meshes and all(m.startswith("/") and m.endswith(".stl") for m in meshes)
    assert resolve_model(INDEPENDENT) == path  # cached: the same file, not rewritten


def test_the_independent_go2_is_another_robot_that_stands_on_the_profiles_gains():
    ours = MujocoWorld(GO2)
    theirs = MujocoWorld(GO2, model=INDEPENDENT)
    assert theirs.model_spec == INDEPENDENT and ours.model_spec == "profile"
    # Rotor bodies and another trunk: a heavier robot than the profile's URDF (15.02 kg).
    assert theirs.total_mass() == pytest.approx(16.085, abs=0.01)
    assert theirs.collision_sphere_radius(theirs.link_ids["FL_foot"]) == 0.0  # mesh feet, not spheres
    theirs.reset()
    theirs.step(1500)
    assert 0.22 < theirs.base_pose()[0][2] < 0.32 and theirs.foot_contacts().all()


def test_a_model_is_for_mujoco_only_and_a_bad_name_says_what_exists():
    with pytest.raises(ValueError, match="is for the mujoco engine"):
        make_world("pybullet", GO2, model=INDEPENDENT)
    with pytest.raises(
        ModelError, match="unknown model 'example-robot-data:spot'; packaged models: example-robot-data:go2"
    ):
        resolve_model("example-robot-data:spot")
    with pytest.raises(ModelError, match="no such file"):
        resolve_model("nowhere/go2.xml")
    with pytest.raises(EvaluationError, match="--engine/--model: .*for the mujoco engine"):
        evaluate_policy("policies/go2_walk.onnx", ["nominal"], episodes=1, model=INDEPENDENT, progress=False)


def test_the_model_reaches_sim_robot_only_on_hardware_mujoco():
    plan = make_plan(hardware="mujoco", model=INDEPENDENT)
    assert plan.node("sim_robot").parameters["model"] == INDEPENDENT
    assert "model" not in make_plan(hardware="mujoco").node("sim_robot").parameters
    with pytest.raises(PlanError, match="model:='example-robot-data:go2' is for hardware:=mujoco"):
        make_plan(hardware="sim", model=INDEPENDENT)


def test_a_profile_can_name_its_mujoco_model(tmp_path):
    text = GO2.source.read_text().replace("name: go2 ", "mujoco_model: example-robot-data:go2\nname: go2 ", 1)
    (tmp_path / "go2_independent.yaml").write_text(text.replace("urdf: urdf/go2.urdf", f"urdf: {GO2.urdf}"))
    profile = load_profile(tmp_path / "go2_independent.yaml")
    assert profile.mujoco_model == INDEPENDENT
    assert MujocoWorld(profile).total_mass() == pytest.approx(16.085, abs=0.01)
    assert np.isclose(make_world("pybullet", profile).total_mass(), 15.018, atol=1e-3)
