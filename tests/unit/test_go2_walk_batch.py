"""The batched Go2 walk worker (``ProcessVecEnv(batched=True)``) against envs stepped one at a
time: the same physics bit for bit, the same rewards, observations and episodes."""

from __future__ import annotations

from functools import partial

import numpy as np
import pybullet as pb
import pytest
import yaml

from sim2real.core.config_files import config_path
from sim2real.core.robot_profile import load_profile
from sim2real.sim.randomization import Randomization
from sim2real.train.envs.go2_walk import Go2WalkEnv
from sim2real.train.envs.go2_walk_batch import BatchRefused, Go2WalkBatch
from sim2real.train.prior import load_prior
from sim2real.train.tasks import load_task_config, make_env
from sim2real.train.train_config import load_train_config
from sim2real.train.vec_env import BatchedEnvSlice, EnvSlice, ProcessVecEnv

SEEDS = [11, 12, 13, 14]


def every_term_config() -> dict:
    """The shipped recipe's task config with every reward term weighted (termination too),
    targets clipped to the joint limits, short episodes and commands drawn again every 0.5 s,
    so a few hundred steps end episodes both ways and resample commands mid-episode."""
    config = load_train_config("go2", "walk")["task_config"]
    weights = config.setdefault("rewards", {}).setdefault("weights", {})
    for name in Go2WalkEnv.REWARD_TERMS:
        weights[name] = weights.get(name) or -0.1
    config["commands"]["resample_interval"] = 0.5
    config["action"] = {"clip_to_joint_limits": True}
    return {**config, "episode_length": 2.0}


def clockless_env(randomization=None) -> Go2WalkEnv:
    """No gait clock (no gait section; nothing observes or rewards one), every step's reward
    summed unclipped."""
    overrides = every_term_config()
    overrides["rewards"]["only_positive"] = False
    overrides["rewards"]["weights"].update(gait_contact=0.0, feet_clearance=0.0)
    config = load_task_config("go2", "walk", overrides)
    config["observation"] = [term for term in config["observation"] if term["name"] != "gait_clock"]
    del config["gait"]
    return Go2WalkEnv(load_profile("go2"), config, randomization=randomization)


def reference_with_frequent_pushes() -> Randomization:
    """The reference draw, pushed every 0.1-0.4 s (its own 5-10 s would not push a short episode)."""
    data = yaml.safe_load(config_path("randomization", "go2_reference").read_text())
    data["pushes"]["interval"] = [0.1, 0.4]
    return Randomization.from_dict(data)


def joint_positions(world) -> np.ndarray:
    states = pb.getJointStates(world._robot, world._joint_ids, physicsClientId=world._client)
    return np.array([s[0] for s in states])


def compare_slices(randomization, steps: int, action_std: float, make=None, between=None) -> dict[str, int]:
    """Steps a one-at-a-time slice and a batched one with the same seeds and actions; asserts
    they agree at every step and returns how many episodes ended by fall and by time-out.
    ``between(step, envs)`` is called on both slices' envs before each step."""
    make = partial(make_env, "go2", "walk", config=every_term_config()) if make is None else make
    fns = [partial(make, randomization=randomization) for _ in SEEDS]
    single, batched = EnvSlice(fns, privileged=True), BatchedEnvSlice(fns, privileged=True)
    assert batched.batch is not None
    try:
        for envs in (single, batched):
            for env in envs.envs:
                env.set_difficulty(1.0)  # rough ground, the widest commands
        obs_single, privileged_single = single.reset(SEEDS)
        obs_batched, privileged_batched = batched.reset(SEEDS)
        np.testing.assert_array_equal(obs_single, obs_batched)
        np.testing.assert_array_equal(privileged_single, privileged_batched)
        rng = np.random.default_rng(5)
        ends = {"fell": 0, "time_out": 0}
        for step in range(steps):
            actions = rng.normal(0.0, action_std, (len(SEEDS), 12)).astype(np.float32)
            if between is not None:
                between(step, single.envs)
                between(step, batched.envs)
            a, b = single.step(actions), batched.step(actions)
            for i, (env, world) in enumerate(zip(single.envs, batched.batch._worlds)):
                # The physics: bit for bit.
                assert np.array_equal(joint_positions(env.world), joint_positions(world)), (step, i)
            np.testing.assert_allclose(b[0], a[0], rtol=0, atol=1e-6, err_msg=f"observations, step {step}")
            np.testing.assert_allclose(b[1], a[1], rtol=0, atol=1e-6, err_msg=f"rewards, step {step}")
            np.testing.assert_array_equal(b[2], a[2])
            np.testing.assert_array_equal(b[3], a[3])
            np.testing.assert_allclose(b[5], a[5], rtol=0, atol=1e-6, err_msg=f"privileged, step {step}")
            assert [i for i, _ in a[4]] == [i for i, _ in b[4]], step
            for (_, x), (_, y) in zip(a[4], b[4]):
                assert set(x) == set(y) and set(x["reward_terms"]) == set(y["reward_terms"])
                for key in ("return", "velocity_error", "yaw_rate_error"):
                    assert y[key] == pytest.approx(x[key], abs=1e-9, nan_ok=True), key
                for key in ("length", "success", "fell"):
                    assert y[key] == x[key], key
                for name, value in x["reward_terms"].items():
                    assert y["reward_terms"][name] == pytest.approx(value, abs=1e-9), name
                ends["fell" if x["fell"] else "time_out"] += 1
        return ends
    finally:
        single.close()
        batched.close()


def test_a_batched_worker_steps_the_reference_draw_as_single_envs_do():
    """Rough ground, latency, joint losses, sensor noise, pushes, battery: the draws, the
    actuator's queue and the noise streams per robot, falls and time-outs auto-reset."""
    ends = compare_slices(reference_with_frequent_pushes(), steps=260, action_std=1.0)
    assert ends["fell"] > 0 and ends["time_out"] > 0, ends


def test_a_batched_worker_steps_the_nominal_world_as_single_envs_do():
    ends = compare_slices(None, steps=120, action_std=1.0)
    assert sum(ends.values()) > 0, ends


def test_a_batched_worker_without_a_gait_clock_and_with_commands_set_between_steps():
    """set_fixed_command mid-episode (through the vector env's call), then back to drawn
    commands, and the difficulty changed, on a task without a gait clock or the positive clip."""

    def between(step: int, envs: list) -> None:
        for env in envs:
            if step == 20:
                env.set_fixed_command([0.4, -0.1, 0.3])
            elif step == 60:
                env.set_fixed_command(None)
                env.set_difficulty(0.3)

    probe = clockless_env()
    assert probe._gait is None and "gait_clock" not in probe.observation_spec.names
    probe.close()
    ends = compare_slices(None, steps=140, action_std=0.3, make=clockless_env, between=between)
    assert sum(ends.values()) > 0, ends


def go2_slice(n: int = 2) -> BatchedEnvSlice:
    return BatchedEnvSlice([partial(make_env, "go2", "walk") for _ in range(n)])


ZERO_ACTIONS = np.zeros((2, 12), dtype=np.float32)


@pytest.mark.parametrize(
    "outside",
    [
        lambda env: env.step(np.zeros(12)),  # what a vector env run could do
        lambda env: env.reset(),
        lambda env: (env.step(np.zeros(12)), env.reset()),
        lambda env: env.set_engine("pybullet"),  # the world dropped
    ],
    ids=["stepped", "reset", "stepped-then-reset", "world-dropped"],
)
def test_an_env_changed_outside_the_batch_is_refused_at_the_next_step(outside):
    envs = go2_slice()
    try:
        envs.reset([0, 1])
        envs.step(ZERO_ACTIONS)
        outside(envs.envs[1])
        with pytest.raises(
            RuntimeError, match="env 1 was stepped, reset or rebuilt outside the batch.*batched_envs: false"
        ):
            envs.step(ZERO_ACTIONS)
        envs.reset([0, 1])
        envs.step(ZERO_ACTIONS)  # a reset of the batch takes the envs back
    finally:
        envs.close()


def test_a_batch_step_before_its_rows_are_pulled_is_refused():
    envs = [make_env("go2", "walk") for _ in range(2)]
    try:
        batch = Go2WalkBatch(envs)
        with pytest.raises(RuntimeError, match=r"envs \[0, 1\] have no episode in the batch"):
            batch.step(np.zeros((2, 12)))
        for i, env in enumerate(envs):
            env.reset(seed=i)
            batch.pull(i)
        batch.step(np.zeros((2, 12)))
    finally:
        for env in envs:
            env.close()


def test_the_process_vector_env_gives_the_same_steps_batched():
    fns = [partial(make_env, "go2", "walk", randomization="go2_reference") for _ in range(4)]
    rng = np.random.default_rng(0)
    actions = [rng.normal(0.0, 0.5, (4, 12)) for _ in range(30)]
    runs = []
    for batched in (False, True):
        with ProcessVecEnv(fns, workers=2, privileged=True, batched=batched) as vec:
            steps = [vec.reset(seed=3)]
            steps += [vec.step(a) for a in actions]
            runs.append(steps)
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    for a, b in zip(runs[0][1:], runs[1][1:]):
        np.testing.assert_allclose(b.obs, a.obs, rtol=0, atol=1e-6)
        np.testing.assert_allclose(b.rewards, a.rewards, rtol=0, atol=1e-6)
        np.testing.assert_allclose(b.privileged, a.privileged, rtol=0, atol=1e-6)


def test_a_task_that_does_not_batch_is_stepped_one_at_a_time(capfd):
    fns = [partial(make_env, "panda", "reach") for _ in range(2)]
    envs = BatchedEnvSlice(fns)
    try:
        assert envs.batch is None
        assert (
            "steps its envs one at a time: the batched task is the Go2 walk (Go2WalkEnv), not" in capfd.readouterr().err
        )
        envs.reset([0, 1])
        obs, rewards, *_ = envs.step(np.zeros((2, 7), dtype=np.float32))
        assert obs.shape[0] == 2 and rewards.shape == (2,)
    finally:
        envs.close()


def test_a_prior_set_before_the_first_step_steps_the_envs_one_at_a_time(capfd):
    fns = [partial(make_env, "go2", "walk") for _ in range(2)]
    envs = BatchedEnvSlice(fns)
    try:
        envs.reset([0, 1])
        prior = load_prior("go2_gentle")
        for env in envs.envs:
            env.set_prior(prior, 1.0)
        envs.step(np.zeros((2, 12), dtype=np.float32))
        assert envs.batch is None
        assert "one at a time: the batched task adds no reward prior's terms" in capfd.readouterr().err
    finally:
        envs.close()


def test_a_prior_set_mid_run_is_refused_by_name_and_a_reset_steps_one_at_a_time(capfd):
    envs = go2_slice()
    try:
        envs.reset([0, 1])
        envs.step(ZERO_ACTIONS)
        prior = load_prior("go2_gentle")
        for env in envs.envs:
            env.set_prior(prior, 1.0)
        with pytest.raises(BatchRefused, match="reward prior.*train with batched_envs: false.*before the first step"):
            envs.step(ZERO_ACTIONS)
        envs.reset([0, 1])  # every env starts again: one at a time from here gives the same steps
        envs.step(ZERO_ACTIONS)
        assert envs.batch is None and "one at a time" in capfd.readouterr().err
    finally:
        envs.close()


def test_a_batch_refuses_envs_it_cannot_step_and_says_why():
    go2 = make_env("go2", "walk")
    mujoco = make_env("go2", "walk", engine="mujoco")
    try:
        with pytest.raises(BatchRefused, match="not 'mujoco'"):
            Go2WalkBatch([go2, mujoco])
        with pytest.raises(BatchRefused, match="at least one env"):
            Go2WalkBatch([])
        batch = Go2WalkBatch([go2])
        with pytest.raises(ValueError, match=r"actions of envs \[0\] contain non-finite"):
            batch.step(np.full((1, 12), np.nan))
        with pytest.raises(ValueError, match=r"shape \(1, 12\)"):
            batch.step(np.zeros((2, 12)))
    finally:
        go2.close()
        mujoco.close()


def test_the_shipped_walk_recipe_trains_the_same_weights_batched(tmp_path):
    """Two PPO iterations of the shipped Go2 recipe (reference draw, privileged critic,
    curriculum), smaller: batched workers give the weights of one-at-a-time ones, bit for bit."""
    import torch

    from sim2real.train.checkpoint import load_checkpoint
    from sim2real.train.runner import Trainer

    weights = []
    for batched in (False, True):
        config = load_train_config("go2", "walk")
        config.update(num_envs=4, workers=2, num_steps_per_env=16, iterations=2, batched_envs=batched)
        result = Trainer(config, tmp_path / f"batched_{batched}", progress=False).run()
        checkpoint = load_checkpoint(result.checkpoint)
        weights.append(
            {**checkpoint["actor_state_dict"], **{f"critic.{k}": v for k, v in checkpoint["critic_state_dict"].items()}}
        )
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_quat_to_matrices_is_quat_to_matrix_row_by_row():
    from sim2real.core.rotations import quat_to_matrices, quat_to_matrix

    quaternions = np.random.default_rng(1).normal(size=(7, 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    matrices = quat_to_matrices(quaternions)
    for q, matrix in zip(quaternions, matrices):
        np.testing.assert_array_equal(matrix, quat_to_matrix(q))
