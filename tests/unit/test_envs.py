"""Training environments: gymnasium contract, reproducibility, task behaviour (no ROS)."""

from __future__ import annotations

import math
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from sim2real.core.observation import ObservationSpec
from sim2real.sim.randomization import Randomization, load_randomization
from sim2real.sim.world import TERRAIN_CELL
from sim2real.train.tasks import TASKS, TaskConfigError, load_task_config, make_env

CASES = [("go2", "walk", "go2_reference"), ("panda", "reach", "panda_reference")]


def go2_with_frequent_pushes() -> Randomization:
    """go2_reference, but pushing every 0.2-0.4 s so that short rollouts see pushes."""
    data = load_randomization("go2_reference").to_dict()
    data["pushes"] = {"interval": [0.2, 0.4], "force": [80.0, 120.0], "duration": 0.1}
    return Randomization.from_dict(data)


def run(env, actions, seed):
    """Observations, rewards and flags of one seeded rollout."""
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        trace += [obs, np.array([reward, terminated, truncated])]
        if terminated or truncated:
            break
    return trace


def rollout_to_end(env, action):
    while True:
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated or truncated:
            return info


@pytest.mark.parametrize("robot,task,randomization", CASES)
def test_gymnasium_env_checker(robot, task, randomization):
    env = make_env(robot, task, seed=0, randomization=randomization)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unbounded observation / non-unit action box advice
        check_env(env, skip_render_check=True)
    env.close()


@pytest.mark.parametrize("robot,task,randomization", [("go2", "walk", go2_with_frequent_pushes()), CASES[1]])
def test_same_seed_same_rollout_under_randomization(robot, task, randomization):
    """Terrain, friction, noise, latency and pushes all follow from the reset seed."""
    env = make_env(robot, task, randomization=randomization)
    actions = np.random.default_rng(5).uniform(-1, 1, (60, env.action_space.shape[0]))
    first = run(env, actions, seed=11)
    second = run(env, actions, seed=11)  # after the first rollout dirtied the world
    other_env = run(make_env(robot, task, randomization=randomization), actions, seed=11)
    for a, b, c in zip(first, second, other_env, strict=True):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
    different = run(env, actions, seed=12)
    assert not np.array_equal(first[-2], different[-2])


def test_make_env_seed_drives_the_first_reset():
    a, b = make_env("panda", "reach", seed=4), make_env("panda", "reach", seed=4)
    np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    assert not np.array_equal(a.reset()[0], make_env("panda", "reach", seed=5).reset()[0])


@pytest.mark.parametrize("robot,task,randomization", CASES)
def test_reward_terms_sum_to_reward(robot, task, randomization):
    env = make_env(robot, task, seed=3, randomization=randomization)
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(40):
        _, reward, terminated, truncated, info = env.step(rng.uniform(-1, 1, env.action_space.shape))
        terms = info["reward_terms"]
        assert terms and math.isclose(sum(terms.values()), reward, rel_tol=1e-9, abs_tol=1e-12)
        if terminated or truncated:
            env.reset()


@pytest.mark.parametrize("robot,task,randomization", CASES)
def test_attributes_the_runner_and_exporter_read(robot, task, randomization):
    env = make_env(robot, task, randomization=randomization)
    config = load_task_config(robot, task)
    assert env.profile.name == robot and env.task_name == task
    assert env.observation_spec == ObservationSpec.from_config(config["observation"], env.profile.num_joints)
    assert env.observation_space.shape == (env.observation_spec.size,)
    assert env.action_scale == config["action"]["scale"] and env.action_clip == config["action"]["clip"]
    np.testing.assert_array_equal(env.action_offset, env.profile.default_positions)
    assert env.policy_period == env.profile.policy_period
    assert env.max_episode_steps == round(config["episode_length"] / env.policy_period)
    assert env.randomization.name == randomization
    import json

    assert json.loads(json.dumps(env.task_config)) == env.task_config


def test_action_maps_to_clipped_position_targets_and_last_action():
    env = make_env("go2", "walk", seed=0)
    env.reset()
    action = np.zeros(12)
    action[0], action[1] = 2.0, 500.0  # the second is beyond the clip
    obs, *_ = env.step(action)
    np.testing.assert_allclose(env._target[:2], env.action_offset[:2] + 0.25 * np.array([2.0, 100.0]))
    last = obs[env.observation_spec.slices()["last_action"]]
    np.testing.assert_allclose(last[:2], [2.0, 100.0])
    with pytest.raises(ValueError, match="12 values"):
        env.step(np.zeros(7))
    with pytest.raises(ValueError, match="non-finite"):
        env.step(np.full(12, np.nan))


def test_action_targets_map_a_batch_of_actions_as_a_step_maps_one():
    # benchmarks/train_throughput.py drives its floor robots through this mapping, one row each.
    env = make_env("panda", "reach", seed=0)
    env.reset()
    actions = np.random.default_rng(0).normal(0.0, 3.0, (4, 7))
    targets = env.action_targets(actions)
    for action, target in zip(actions, targets):
        env.step(action)
        np.testing.assert_array_equal(env._target, target)
    assert np.any(np.abs(actions) > env.action_clip)  # the draw reaches past the clip
    assert np.all(targets >= env._lower) and np.all(targets <= env._upper)  # the Panda clips to its limits


def test_time_limit_truncates_with_episode_info():
    env = make_env("panda", "reach", seed=0, config={"episode_length": 0.1})
    env.reset()
    for step in range(1, 6):
        _, _, terminated, truncated, info = env.step(np.zeros(7))
        assert not terminated and truncated == (step == 5)
    assert info["episode"]["length"] == 5 and set(info["episode"]) >= {"return", "success", "distance"}
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(7))


# --------------------------------------------------------------------- go2 walk
def test_go2_stands_in_the_default_pose_for_two_seconds():
    env = make_env("go2", "walk", seed=0)
    obs, _ = env.reset()
    gravity = env.observation_spec.slices()["projected_gravity"]
    for _ in range(int(2.0 / env.policy_period)):
        obs, _, terminated, truncated, _ = env.step(np.zeros(12))
        assert not terminated and not truncated
    np.testing.assert_allclose(obs[gravity], [0, 0, -1], atol=0.02)
    assert env._base_height > 0.2


def test_go2_dropped_upside_down_terminates():
    env = make_env("go2", "walk", seed=0)
    env.reset()
    env.world.reset(base_position=(0, 0, 0.5), base_orientation=(1.0, 0.0, 0.0, 0.0))
    for _ in range(50):
        _, _, terminated, truncated, info = env.step(np.zeros(12))
        if terminated:
            break
    assert terminated and not truncated
    assert info["episode"]["fell"] and not info["episode"]["success"]


def vertex_under_base(env) -> tuple[int, int]:
    """(row, column) of the height-field vertex nearest the base, from the world's own layout."""
    rows, cols = env.world.terrain_heights.shape
    x, y = env.world.base_pose()[0][:2]
    return int(round(y / TERRAIN_CELL + (rows - 1) / 2)), int(round(x / TERRAIN_CELL + (cols - 1) / 2))


@pytest.mark.parametrize("patch,points", [(0.4, 5), (0.0, 1)])
def test_go2_base_height_is_measured_over_the_ground_patch_under_it(patch, points):
    rough = Randomization.from_dict({"name": "rough", "parameters": {"terrain_roughness": {"constant": 0.15}}})
    env = make_env(
        "go2",
        "walk",
        seed=0,
        randomization=rough,
        config={"terrain_roughness_scale": 1.0, "termination": {"ground_patch": patch}},
    )
    env.reset(seed=4)
    env.step(np.zeros(12))
    heights = env.world.terrain_heights
    iy, ix = vertex_under_base(env)
    half = points // 2
    ground = heights[iy - half : iy + half + 1, ix - half : ix + half + 1].mean()
    assert env._base_height == pytest.approx(env.world.base_pose()[0][2] - ground, abs=1e-9)


@pytest.mark.parametrize("patch,fall", [(0.4, False), (0.0, True)])
def test_go2_upright_over_one_bump_is_not_a_fall(patch, fall):
    """An upright robot whose base passes over one tall vertex has not fallen: only a
    patch-wide rise of the ground (or a real drop of the base) ends the episode. Measured
    over the one vertex (ground_patch 0, the old criterion) it counted as a fall."""
    rough = Randomization.from_dict({"name": "rough", "parameters": {"terrain_roughness": {"constant": 0.15}}})
    env = make_env(
        "go2",
        "walk",
        seed=0,
        randomization=rough,
        config={"terrain_roughness_scale": 1.0, "termination": {"ground_patch": patch}},
    )
    env.reset(seed=4)
    iy, ix = vertex_under_base(env)
    # One vertex 5 cm under the base. terrain_heights is a copy: edit the samples the env reads
    # (the physics keeps its own; only the measurement is under test).
    env.world._ground.heights[iy, ix] = env.world.base_pose()[0][2] - 0.05
    env._start_episode(env.np_random, {})  # re-derive the ground from the edited heights
    env._read_state()
    assert (env._base_height < env._min_height) == fall
    assert env._check_fall() == fall


def test_episode_conditions_are_the_drawn_parameters_as_applied():
    env = make_env("go2", "walk", seed=0, randomization="go2_reference")
    env.set_difficulty(0.5)
    env.reset(seed=3)
    applied = env.world.conditions
    assert set(env.episode_conditions) == set(load_randomization("go2_reference").parameters)
    for name, value in env.episode_conditions.items():
        assert value == getattr(applied, name), name  # terrain: after the task's difficulty scaling
    assert 0.0 < env.episode_conditions["terrain_roughness"] <= 0.15 * 0.5 * 0.33
    nominal = make_env("go2", "walk", seed=0)
    nominal.reset(seed=3)
    assert nominal.episode_conditions == {}


@pytest.mark.parametrize("robot, task", [("go2", "walk"), ("panda", "reach")])
def test_privileged_observation_is_the_true_state_and_the_applied_conditions(robot, task):
    env = make_env(robot, task, seed=0, randomization=f"{robot}_reference")
    env.reset(seed=5)
    rng = np.random.default_rng(5)  # seeded and small: the robot must still be up after 10 steps
    for _ in range(10):
        _, _, terminated, _, _ = env.step(rng.uniform(-0.5, 0.5, env.action_space.shape))
        assert not terminated
    values = dict(zip(env.privileged_names(), env.privileged_observation()))
    assert len(values) == len(env.privileged_observation())
    applied = env.world.conditions
    for name in ("ground_friction", "mass_scale", "motor_strength", "latency", "terrain_roughness"):
        assert values[name] == pytest.approx(getattr(applied, name), rel=1e-6), name
    nominal_voltage = env.profile.battery_nominal_voltage
    expected = 1.0 if applied.battery_voltage is None else min(1.0, applied.battery_voltage / nominal_voltage)
    assert values["torque_limit_scale"] == pytest.approx(expected, rel=1e-6)
    if robot == "go2":  # the truth the blind actor has to infer
        velocity, _ = env.world.base_velocity()
        _, orientation = env.world.base_pose()
        from sim2real.core.rotations import quat_to_matrix

        body = quat_to_matrix(orientation).T @ np.asarray(velocity)
        assert [values[f"base_lin_vel_{a}"] for a in "xyz"] == pytest.approx(body, abs=1e-5)
        assert values["base_height"] == pytest.approx(env._base_height, abs=1e-5)
        assert {values[f"{foot}_contact"] for foot in env.profile.foot_links} <= {0.0, 1.0}


def test_go2_pushes_move_the_base():
    def velocities(pushes):
        randomization = Randomization.from_dict({"name": "pushes", "parameters": {}, "pushes": pushes})
        env = make_env("go2", "walk", seed=0, randomization=randomization)
        env.reset()
        trace = []
        for _ in range(30):
            env.step(np.zeros(12))
            trace.append(env.world.base_velocity()[0][:2])
        return np.array(trace)

    calm = velocities(None)
    pushed = velocities({"interval": [0.1, 0.2], "force": [100.0, 100.0], "duration": 0.1})
    # 100 N for 0.1 s on ~15 kg: ~0.67 m/s if nothing held it; friction absorbs part.
    assert np.linalg.norm(pushed - calm, axis=1).max() > 0.3


def test_go2_difficulty_widens_commands_and_roughens_terrain():
    env = make_env("go2", "walk", seed=0, randomization="go2_reference")
    rng = np.random.default_rng(0)
    env.set_difficulty(0.0)
    easy = np.array([env.sample_command(rng) for _ in range(400)])
    env.reset(seed=1)
    assert env.world.conditions.terrain_roughness == 0.0
    env.set_difficulty(1.0)
    hard = np.array([env.sample_command(rng) for _ in range(400)])
    np.testing.assert_allclose(env.command_ranges(), [[-1.0, 1.0], [-0.5, 0.5], [-1.0, 1.0]])
    assert easy[:, 0].min() >= 0.0 and hard[:, 0].min() < -0.5 and hard[:, 0].max() > 0.5
    assert np.abs(hard[:, 1]).max() > 0.3 >= np.abs(easy[:, 1]).max()
    assert np.abs(hard[:, 2]).max() > 0.6 >= np.abs(easy[:, 2]).max()
    env.reset(seed=1)
    assert 0.0 < env.world.conditions.terrain_roughness <= 0.15 * 0.33 + 1e-9
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        env.set_difficulty(1.5)


def test_go2_standing_share_draws_the_zero_command_that_often():
    env = make_env("go2", "walk", seed=0, config={"commands": {"standing_share": 0.25}})
    rng = np.random.default_rng(0)
    draws = np.array([env.sample_command(rng) for _ in range(2000)])
    standing = np.all(draws == 0.0, axis=1).mean()
    assert standing == pytest.approx(0.25, abs=0.03)  # binomial sd ~0.01
    with pytest.raises(ValueError, match="standing_share"):
        make_env("go2", "walk", seed=0, config={"commands": {"standing_share": 1.5}})


def test_go2_without_a_standing_share_the_command_stream_is_unchanged():
    # A recipe that does not ask for stand draws reproduces its seed's earlier command stream.
    env = make_env("go2", "walk", seed=0)
    rng, reference = np.random.default_rng(3), np.random.default_rng(3)
    ranges = env.command_ranges()
    for _ in range(50):
        expected = reference.uniform(ranges[:, 0], ranges[:, 1])
        if math.hypot(expected[0], expected[1]) < 0.1:
            expected[:2] = 0.0
        np.testing.assert_array_equal(env.sample_command(rng), expected)


@pytest.mark.parametrize("command,penalized", [([0.0, 0.0, 0.0], True), ([0.0, 0.0, 0.5], False)])
def test_go2_stand_still_penalizes_only_the_zero_command_not_turning_on_the_spot(command, penalized):
    env = make_env(
        "go2", "walk", seed=0, config={"eval_command": command, "rewards": {"weights": {"stand_still": -1.0}}}
    )
    env.reset(seed=0)
    action = np.full(12, 0.4)  # away from the default pose
    for _ in range(10):
        _, _, _, _, info = env.step(action)
    assert (info["reward_terms"]["stand_still"] < -1e-3) == penalized


def test_go2_fixed_eval_command_is_observed_and_kept():
    env = make_env(
        "go2", "walk", seed=0, config={"eval_command": [0.5, 0.0, 0.0], "commands": {"resample_interval": 0.1}}
    )
    obs, _ = env.reset()
    command = env.observation_spec.slices()["velocity_command"]
    np.testing.assert_allclose(obs[command], [0.5, 0.0, 0.0])
    for _ in range(10):
        obs, *_ = env.step(np.zeros(12))
    np.testing.assert_allclose(obs[command], [0.5, 0.0, 0.0])
    env.set_fixed_command(None)
    env.reset()
    for _ in range(6):
        obs, *_ = env.step(np.zeros(12))
    assert not np.allclose(obs[command], [0.5, 0.0, 0.0])  # resampled every 0.1 s


def test_go2_standing_still_under_a_walk_command_is_no_success():
    env = make_env("go2", "walk", seed=0, config={"episode_length": 3.0, "eval_command": [0.5, 0.0, 0.0]})
    env.reset()
    episode = rollout_to_end(env, np.zeros(12))["episode"]
    assert not episode["fell"] and not episode["success"]
    assert episode["velocity_error"] == pytest.approx(0.5, abs=0.05)


@pytest.mark.parametrize(
    "phase,ground,expected",
    [
        (0.75, None, 2 * 0.08**2),  # FL and RR at mid-swing, on the ground: 8 cm short each
        (0.25, None, 2 * 0.08**2),  # FR and RL at mid-swing
        (0.75, -0.05, 2 * 0.03**2),  # the ground 5 cm lower: the same feet are 5 cm up, 3 cm short
    ],
)
def test_go2_feet_clearance_penalizes_swinging_feet_short_of_the_target(phase, ground, expected):
    env = make_env(
        "go2",
        "walk",
        seed=0,
        config={"eval_command": [0.5, 0.0, 0.0], "rewards": {"weights": {"feet_clearance": -30.0}}},
    )
    env.reset(seed=0)
    for _ in range(50):  # settle on the feet
        env.step(np.zeros(12))
    if ground is not None:
        env._terrain = np.full((5, 5), ground)
    env._clock.phase = phase  # the reward is computed at the phase the action was chosen at
    _, _, _, _, info = env.step(np.zeros(12))
    error = info["reward_terms"]["feet_clearance"] / (-30.0 * env.policy_period)
    assert error == pytest.approx(expected, abs=0.002)


def test_go2_feet_clearance_is_off_when_told_to_stand():
    env = make_env(
        "go2",
        "walk",
        seed=0,
        config={"eval_command": [0.0, 0.0, 0.0], "rewards": {"weights": {"feet_clearance": -30.0}}},
    )
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(12))
    assert info["reward_terms"]["feet_clearance"] == 0.0


# ------------------------------------------------------------------ panda reach
def test_reach_to_a_configuration_with_known_fk_succeeds():
    env = make_env("panda", "reach", seed=0)
    q = env.profile.default_positions + np.array([0.4, -0.3, 0.2, 0.5, -0.3, 0.4, 0.2])
    env.set_fixed_goal(env.kinematics.end_effector_position(q))
    env.reset()
    action = (q - env.action_offset) / env.action_scale
    assert np.all(np.abs(action) <= env.action_clip)
    episode = rollout_to_end(env, action)["episode"]
    assert episode["success"] and episode["distance"] < 0.005


def test_reach_zero_action_does_not_reach_a_far_goal():
    env = make_env("panda", "reach", seed=0)
    env.set_fixed_goal(env.start_position + np.array([0.25, 0.2, -0.2]))
    env.reset()
    episode = rollout_to_end(env, np.zeros(7))["episode"]
    assert not episode["success"] and episode["min_distance"] > 0.2


def test_reach_difficulty_scales_goal_distance():
    env = make_env("panda", "reach", seed=0)
    rng = np.random.default_rng(0)
    distances = {}
    for d in (0.0, 0.2, 1.0):
        env.set_difficulty(d)
        goals = np.array([env.sample_goal(rng) for _ in range(300)])
        distances[d] = np.linalg.norm(goals - env.start_position, axis=1)
    assert distances[0.0].max() == 0.0
    assert distances[0.2].mean() == pytest.approx(0.2 * distances[1.0].mean(), rel=0.15)
    box = np.array(env.task_config["goal"]["box"])
    env.set_difficulty(1.0)
    goals = np.array([env.sample_goal(rng) for _ in range(300)])
    assert np.all(goals >= box[:, 0]) and np.all(goals <= box[:, 1])


def test_reach_goal_observation_is_the_goal_offset():
    env = make_env("panda", "reach", seed=0)
    obs, _ = env.reset()
    slices = env.observation_spec.slices()
    np.testing.assert_allclose(obs[slices["goal_position"]], env.goal, atol=1e-6)
    ee = env.kinematics.end_effector_position(env.world.true_joint_state().position)
    np.testing.assert_allclose(obs[slices["goal_offset"]], env.goal - ee, atol=1e-6)


# --------------------------------------------------------------- tasks registry
def test_registry_and_config_errors():
    assert set(TASKS) == {("go2", "walk"), ("panda", "reach")}
    with pytest.raises(ValueError, match="no task 'fly' for robot 'go2'"):
        make_env("go2", "fly")
    with pytest.raises(TaskConfigError, match="unknown task config key 'rewards.weights.smile'"):
        load_task_config("go2", "walk", {"rewards": {"weights": {"smile": 1.0}}})
    with pytest.raises(TaskConfigError, match="unknown task config key 'episode_len'"):
        load_task_config("panda", "reach", {"episode_len": 3})
    merged = load_task_config("go2", "walk", {"rewards": {"weights": {"orientation": -1.0}}})
    assert merged["rewards"]["weights"]["orientation"] == -1.0 and merged["rewards"]["weights"]["lin_vel_z"] == -2.0


def test_randomization_object_and_gymnasium_registration():
    env = make_env("panda", "reach", randomization=load_randomization("nominal"))
    assert env.reset(seed=0)[0].shape == (27,)
    wrapped = gymnasium.make("sim2real/Go2Walk-v0", seed=1)
    assert wrapped.reset()[0].shape == (47,)
    wrapped.close()


def test_reach_penalizes_joint_speed_above_the_soft_velocity_limit():
    """The supervisor damps the arm above 1.2x a velocity limit, so training must see the limit."""
    env = make_env("panda", "reach", seed=0)
    env.reset(seed=0)
    soft = 0.8 * env.profile.velocity_limits
    env._dq = 0.5 * soft
    assert env._reward_joint_vel_limits() == 0.0
    env._dq = soft.copy()
    env._dq[6] += 2.0
    assert abs(env._reward_joint_vel_limits() - 2.0) < 1e-9
    env.close()
