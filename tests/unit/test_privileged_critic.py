"""Asymmetric actor-critic, critic warm-up, and fine-tuning from a deployed policy file.

The critic may see simulator truth (``critic_observation: privileged``) while the actor,
and so the deployed observation contract, stays as it was; a run can start from a shipped
``.onnx`` (its actor exactly, a fresh critic trained alone first)."""

from __future__ import annotations

from functools import partial

import numpy as np
import onnx
import pytest
import torch

from sim2real.core.policy_file import load_policy
from sim2real.train.checkpoint import CheckpointError, load_checkpoint, save_checkpoint, warm_start
from sim2real.train.export import export_policy
from sim2real.train.policy_warm_start import actor_from_policy_file, warm_start_from_policy
from sim2real.train.runner import Trainer
from sim2real.train.train_config import TrainConfigError, load_train_config, override_config, rsl_rl_config
from sim2real.train.vec_env import ProcessVecEnv
from tests.unit.toy_env import TOY_TRAIN_CONFIG, make_toy, make_toy_task, write_toy_randomization


@pytest.fixture
def toy_config(tmp_path):
    randomization = write_toy_randomization(tmp_path / "toy_dr.yaml", 0.5, 1.5)
    path = tmp_path / "toy_reach.yaml"
    path.write_text(TOY_TRAIN_CONFIG + f"randomization: {randomization}\n")
    return load_train_config("toy", "reach", path)


@pytest.fixture
def toy_policy(toy_config, tmp_path):
    """A 3-iteration toy run exported to a policy file."""
    checkpoint = Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    return export_policy(checkpoint, tmp_path / "toy.onnx").path


def _actions(path, obs):
    return load_policy(path).act(obs)


def test_the_critic_reads_the_privileged_group_and_the_actor_does_not(toy_config, tmp_path):
    assert rsl_rl_config(toy_config)["obs_groups"] == {"actor": ["policy"], "critic": ["policy"]}
    config = override_config(toy_config, {"critic_observation": "privileged"})
    assert rsl_rl_config(config)["obs_groups"] == {"actor": ["policy"], "critic": ["policy", "privileged"]}
    checkpoint = load_checkpoint(
        Trainer(config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    assert checkpoint["actor_state_dict"]["mlp.0.weight"].shape[1] == 2  # x, goal - x
    assert checkpoint["critic_state_dict"]["mlp.0.weight"].shape[1] == 3  # + motor_strength
    policy = export_policy(tmp_path / "run" / "model_3.pt", tmp_path / "policy.onnx").policy
    assert policy.metadata.observation_size == 2  # the deployed contract is the actor's alone


def test_the_vector_env_gathers_privileged_observations_aligned_with_auto_reset():
    fns = [partial(make_toy, max_episode_steps=3, randomization=_wide()) for _ in range(3)]
    with ProcessVecEnv(fns, workers=2, privileged=True) as vec:
        assert vec.privileged_size == 1
        vec.reset(seed=0)
        gains = vec.run(_gain, [()] * 3)
        assert np.allclose(vec.privileged_obs[:, 0], gains)
        for _ in range(3):  # the third step ends every episode: the privileged values are the next episode's
            out = vec.step(np.zeros((3, 1), np.float32))
        assert out.dones.all() and out.privileged is vec.privileged_obs
        assert np.allclose(out.privileged[:, 0], vec.run(_gain, [()] * 3)) and not np.allclose(
            out.privileged[:, 0], gains
        )
    with ProcessVecEnv(fns[:1], workers=1) as plain:
        plain.reset(seed=0)
        assert plain.privileged_obs is None and plain.step(np.zeros((1, 1), np.float32)).privileged is None


def _wide():
    from tests.unit.toy_env import toy_randomization

    return toy_randomization(0.5, 1.5)


def _gain(env):
    return env.gain


def test_a_policy_file_warm_start_keeps_the_actor_exactly_through_the_critic_warm_up(toy_config, toy_policy, tmp_path):
    config = override_config(
        toy_config,
        {
            "iterations": 7,
            "critic_observation": "privileged",
            "critic_warmup.iterations": 2,
            "critic_warmup.learning_rate": 1e-2,
            "policy.init_noise_std": 0.3,
        },
    )
    warm = warm_start_from_policy(toy_policy, config)
    assert warm["iteration"] == 3 and warm["critic_state_dict"] is None and warm["optimizer_state_dict"] is None
    assert warm["warm_start"]["policy_sha256"] == load_policy(toy_policy).sha256
    path = save_checkpoint(tmp_path / "ft" / "warm_start.pt", warm)
    Trainer(config, tmp_path / "ft", resume=path, make_env=make_toy_task, progress=False).run()

    obs = np.random.default_rng(0).uniform(-1.5, 1.5, (200, 2)).astype(np.float32)
    after_warm_up = export_policy(tmp_path / "ft" / "model_5.pt", tmp_path / "ft5.onnx").path
    assert np.array_equal(_actions(after_warm_up, obs), _actions(toy_policy, obs))  # frozen, normalizer too
    tuned = load_checkpoint(tmp_path / "ft" / "model_7.pt")
    assert not np.allclose(
        _actions(export_policy(tmp_path / "ft" / "model_7.pt", tmp_path / "ft7.onnx").path, obs),
        _actions(toy_policy, obs),
    )  # then PPO moves it
    assert tuned["optimizer_state_dict"]["param_groups"][0]["lr"] == toy_config["ppo"]["learning_rate"]
    assert tuned["warm_start"]["iteration"] == 3
    assert load_checkpoint(tmp_path / "ft" / "model_4.pt")["optimizer_state_dict"]["param_groups"][0]["lr"] == 1e-2
    # The action noise starts at the config's value (a policy file does not carry it).
    warm_std = load_checkpoint(tmp_path / "ft" / "model_5.pt")["actor_state_dict"]["distribution.std_param"]
    assert torch.allclose(warm_std, torch.full_like(warm_std, 0.3))


def test_the_actor_read_from_a_policy_file_is_the_checkpoint_actor(toy_policy, tmp_path):
    state, facts = actor_from_policy_file(toy_policy)
    checkpoint = load_checkpoint(tmp_path / "run" / "model_3.pt")
    assert facts == {"hidden_dims": [16, 16], "activation": "elu", "observation_size": 2, "num_actions": 1}
    for name, tensor in state.items():
        assert torch.allclose(tensor, checkpoint["actor_state_dict"][name].float(), atol=1e-6), name


def test_a_policy_file_warm_start_refuses_what_it_cannot_continue(toy_config, toy_policy, tmp_path):
    other_sizes = override_config(toy_config, {"policy.actor_hidden_dims": [32]})
    with pytest.raises(
        CheckpointError,
        match=r"its actor is \[16, 16\] elu and the config asks \[32\].*"
        r"Fix: set policy.actor_hidden_dims: \[16, 16\]",
    ):
        warm_start_from_policy(toy_policy, other_sizes)
    panda = load_train_config("panda", "reach")
    with pytest.raises(CheckpointError, match="it is a toy reach policy and the config trains panda reach"):
        warm_start_from_policy(toy_policy, panda)
    # A graph that is not the exporter's: the normalizer stripped off the front.
    model = onnx.load(str(toy_policy))
    del model.graph.node[0:2]
    model.graph.node[0].input[0] = "obs"
    stripped = tmp_path / "stripped.onnx"
    onnx.save(model, str(stripped))
    with pytest.raises(CheckpointError, match=r"does not start with the observation normalizer.*Fix: .*checkpoint"):
        actor_from_policy_file(stripped)


def test_a_checkpoint_warm_start_into_another_critic_input_keeps_only_the_actor(toy_config, tmp_path):
    first = load_checkpoint(
        Trainer(toy_config, tmp_path / "run", make_env=make_toy_task, progress=False).run().checkpoint
    )
    privileged = override_config(toy_config, {"iterations": 5, "critic_observation": "privileged"})
    warm = warm_start(first, privileged)
    assert warm["critic_state_dict"] is None and warm["optimizer_state_dict"] is None
    assert warm_start(first, override_config(toy_config, {"iterations": 5}))["critic_state_dict"] is not None
    path = save_checkpoint(tmp_path / "ft" / "warm_start.pt", warm)
    tuned = load_checkpoint(
        Trainer(privileged, tmp_path / "ft", resume=path, make_env=make_toy_task, progress=False).run().checkpoint
    )
    assert tuned["critic_state_dict"]["mlp.0.weight"].shape[1] == 3


def test_config_checks_the_critic_settings_and_fills_them_into_older_configs(toy_config):
    with pytest.raises(TrainConfigError, match=r"critic_observation: unknown value 'truth'.*Fix: use policy"):
        override_config(toy_config, {"critic_observation": "truth"})
    with pytest.raises(TrainConfigError, match=r"critic_warmup.iterations: expected an integer >= 0"):
        override_config(toy_config, {"critic_warmup.iterations": -1})
    older = {key: value for key, value in toy_config.items() if key not in ("critic_observation", "critic_warmup")}
    resumed = override_config(older, {"iterations": 9})
    assert resumed["critic_observation"] == "policy" and resumed["critic_warmup"]["iterations"] == 0
