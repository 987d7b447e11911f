"""`sim2real policy info`: a policy file identified from its own metadata."""

import json

from sim2real.cli.main import main
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.robot_profile import load_profile
from tests.policy_models import write_target_policy

GO2_POLICY = share_dir() / "policies" / "go2_walk.onnx"
GO2 = load_profile("go2")


def test_info_prints_the_contract_and_the_provenance_of_the_shipped_go2_policy(capsys):
    assert main(["policy", "info", str(GO2_POLICY)]) == 0
    text = capsys.readouterr().out
    meta = load_policy(GO2_POLICY).metadata
    assert "go2 walk; exported" in text and meta.checkpoint in text
    assert f"source commit {meta.source_commit[:12]}" in text
    assert "control period 0.02 s (50 Hz)" in text
    for joint in load_profile("go2").joint_names:
        assert joint in text
    assert f"observation: {meta.observation_size} values" in text and "gait_clock" in text
    assert "trained under randomization go2_reference:" in text
    assert "ground_friction          uniform(0.3, 1.2)" in text
    assert "motor_strength           normal(mean 1, std 0.08)" in text
    assert (
        "commands (vx, vy, yaw rate): vx [-0.5, 1], vy [-0.3, 0.3], yaw_rate [-0.8, 0.8]; |(vx, vy)| under "
        "0.1 m/s is a stand" in text
    )
    assert "trained with: pd_torque at 200 Hz on pybullet, ground friction 0.8, spawn 0.33 m, difficulty 1" in text
    assert f"robot model: go2.urdf sha256 {meta.robot_model['sha256'][:16]}" in text


def test_info_json_matches_the_metadata(capsys):
    assert main(["policy", "info", str(GO2_POLICY), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    policy = load_policy(GO2_POLICY)
    assert info["sha256"] == policy.sha256 and info["robot"] == "go2"
    assert [j["name"] for j in info["joints"]] == list(policy.metadata.joint_names)
    assert [j["kp"] for j in info["joints"]] == policy.metadata.kp.tolist()
    assert sum(t["size"] for t in info["observation"]) == info["observation_size"] == policy.metadata.observation_size
    assert info["randomization"] == policy.metadata.randomization
    assert info["commands"] == {
        "order": ["vx", "vy", "yaw_rate"],
        "standing_below": 0.1,
        "ranges": policy.metadata.task_config["commands"]["ranges_hardest"],
    }
    assert info["actuator"] == policy.metadata.actuator and info["actuator"]["pd_rate_hz"] == 200.0
    assert info["robot_model"] == policy.metadata.robot_model and info["robot_model"]["urdf"] == "go2.urdf"


def test_info_on_a_file_that_is_not_a_policy_says_so(tmp_path, capsys):
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(GO2_POLICY.read_bytes()[:1000])
    assert main(["policy", "info", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err


def test_info_on_a_file_without_its_actuator_model_says_it_was_not_recorded(tmp_path, capsys):
    """Files exported before the metadata carried the actuator model and nominal world."""
    older = write_target_policy(tmp_path / "older.onnx", GO2, GO2.default_positions)
    assert load_policy(older).metadata.actuator is None
    assert main(["policy", "info", str(older)]) == 0
    assert "actuator model and nominal world: not recorded" in capsys.readouterr().out
