"""docs/policy_format.md is enough to run a policy file: a runtime written from it alone
(independent_policy_reader.py, no sim2real import) reproduces the project's runtime, on the
shipped policies driving a simulated robot."""

from __future__ import annotations

import numpy as np
import pytest

from sim2real.core.kinematics import Kinematics
from sim2real.core.observation import RobotSignals
from sim2real.core.paths import share_dir
from sim2real.core.policy_file import load_policy
from sim2real.core.policy_slot import RunningPolicy
from sim2real.core.robot_profile import load_profile
from sim2real.core.trained_ranges import TrainedRanges
from sim2real.sim.world import SimWorld
from tests.policy_models import metadata, write_policy
from tests.unit.independent_policy_reader import IndependentPolicy

TOLERANCE = 1e-6


def recording_runtime(path):
    """The project's runtime for ``path``, with every observation it feeds the network kept."""
    policy = load_policy(path)
    seen = []
    act = policy.act

    def act_and_keep(observation):
        seen.append(np.array(observation, dtype=np.float32))
        return act(observation)

    policy.act = act_and_keep
    return RunningPolicy(policy), seen


def compare(path, profile, commands, goals=None, ticks=150):
    runtime, seen = recording_runtime(path)
    reader = IndependentPolicy(path)
    kinematics = Kinematics(profile) if profile.end_effector_link else None
    world = SimWorld(profile, seed=1)
    worst_obs = worst_target = 0.0
    for tick in range(ticks):
        state = world.joint_state()
        signals = {"joint_position": state.position, "joint_velocity": state.velocity}
        if not profile.fixed_base:
            imu = world.imu()
            signals.update(
                base_orientation=imu.orientation,
                base_angular_velocity=imu.angular_velocity,
                velocity_command=commands[tick * len(commands) // ticks],
            )
        if kinematics is not None:
            signals.update(
                end_effector_position=kinematics.end_effector_position(state.position),
                goal_position=goals[tick * len(goals) // ticks],
            )
        _, targets = runtime.step(RobotSignals(**signals))
        observation, independent_targets = reader.step(signals)
        worst_obs = max(worst_obs, float(np.abs(observation - seen[-1]).max()))
        worst_target = max(worst_target, float(np.abs(independent_targets - targets).max()))
        world.command(targets)
        world.step(round(profile.policy_period / profile.physics_period))
    return worst_obs, worst_target


def test_the_walking_policy_runs_the_same_from_the_page_alone():
    go2 = load_profile("go2")
    commands = [
        (0.05, 0.03, 0.0),  # inside the dead zone: a stand
        (0.5, 0.0, 0.0),
        (2.0, 0.8, 1.5),  # beyond the trained ranges: clamped
        (0.0, 0.0, -0.3),
    ]
    worst_obs, worst_target = compare(share_dir() / "policies" / "go2_walk.onnx", go2, commands)
    assert worst_obs <= TOLERANCE and worst_target <= TOLERANCE, (worst_obs, worst_target)


def test_the_reaching_policy_runs_the_same_from_the_page_alone():
    panda = load_profile("panda")
    goals = [(0.5, 0.1, 0.4), (1.5, -0.9, 1.4)]  # the second outside the trained goal box
    worst_obs, worst_target = compare(share_dir() / "policies" / "panda_reach.onnx", panda, None, goals=goals)
    assert worst_obs <= TOLERANCE and worst_target <= TOLERANCE, (worst_obs, worst_target)


def test_a_step_with_a_non_finite_output_is_not_fed_back(tmp_path):
    panda = load_profile("panda")
    path = write_policy(tmp_path / "nan.onnx", metadata(panda), np.nan)
    runtime, seen = recording_runtime(path)
    reader = IndependentPolicy(path)
    signals = {
        "joint_position": panda.default_positions,
        "joint_velocity": np.zeros(7),
        "end_effector_position": np.zeros(3),
        "goal_position": np.array([0.5, 0.0, 0.4]),
    }
    for _ in range(3):
        runtime.step(RobotSignals(**signals))
        observation, targets = reader.step(signals)
        assert np.array_equal(observation, seen[-1]) and np.all(np.isnan(targets))
    assert np.all(reader.last_action == 0.0)


@pytest.mark.parametrize(
    "command, expected",
    [
        ((0.05, 0.05, 0.2), (0.0, 0.0, 0.2)),  # |(vx, vy)| 0.07 < 0.1: a stand, the turn kept
        ((0.1, 0.0, 0.0), (0.1, 0.0, 0.0)),  # at the threshold: walked, as in training
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0)),
    ],
)
def test_the_runtime_applies_the_trained_dead_zone_without_calling_it_a_clamp(command, expected):
    ranges = TrainedRanges.of({"commands": {"standing_below": 0.1}})
    clamped, note = ranges.clamp(RobotSignals(velocity_command=np.array(command)))
    assert tuple(clamped.velocity_command) == pytest.approx(expected) and note == ""


def test_an_export_records_the_actuator_world_and_robot_model_and_they_round_trip():
    import dataclasses
    import hashlib

    from sim2real.core.policy_file import PolicyMetadata
    from sim2real.train.checkpoint import describe_env, trained_robot
    from sim2real.train.tasks import make_env

    go2 = load_profile("go2")
    trained = trained_robot(go2, 0.005, "pybullet")
    assert trained["actuator"]["pd_rate_hz"] == pytest.approx(200.0)
    assert trained["actuator"]["effort_limits"] == go2.effort_limits.tolist()
    assert trained["actuator"]["gravity_compensation"] is False
    assert trained_robot(load_profile("panda"), 0.002, "pybullet")["actuator"]["gravity_compensation"] is True
    assert trained["world"] == {
        "engine": "pybullet",
        "physics_period": 0.005,
        "gravity": 9.81,
        "ground_friction": 0.8,
        "spawn_height": go2.spawn_height,
    }
    assert trained["robot_model"] == {"urdf": "go2.urdf", "sha256": hashlib.sha256(go2.urdf.read_bytes()).hexdigest()}
    assert trained_robot(object(), 0.005, "pybullet") == {}  # no URDF-backed profile: nothing claimed
    # What a training run records in its checkpoint, from the env it trains:
    env = make_env("go2", "walk")
    assert describe_env(env)["trained_robot"] == trained_robot(go2, env.physics_period, "pybullet")
    meta = dataclasses.replace(metadata(go2), difficulty=0.75, **trained)
    again = PolicyMetadata.from_props(meta.to_props())
    assert (again.actuator, again.world, again.robot_model, again.difficulty) == (
        meta.actuator,
        meta.world,
        meta.robot_model,
        0.75,
    )
    older = {
        k: v
        for k, v in meta.to_props().items()
        if k.split(".", 1)[1] not in ("actuator", "world", "difficulty", "robot_model")
    }
    assert PolicyMetadata.from_props(older).actuator is None
