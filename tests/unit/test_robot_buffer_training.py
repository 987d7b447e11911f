"""`sim2real train --robot-buffer`: PPO on the Go2 with behaviour cloning of a recorded robot run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from sim2real.train.export import build_actor
from sim2real.train.robot_data import rebuild_samples
from sim2real.train.runner import Trainer, summary
from sim2real.train.train_config import TrainConfigError, load_train_config
from tests.unit.test_robot_data import record_runtime


@pytest.fixture(scope="module")
def robot_run(tmp_path_factory):
    bag = tmp_path_factory.mktemp("buffer") / "walk"
    policy, _, _ = record_runtime(bag, seconds=3.0)
    return bag, policy


def _train(tmp_path, bag, beta: float):
    overrides = {
        "iterations": 3,
        "num_envs": 2,
        "workers": 1,
        "num_steps_per_env": 8,
        "behaviour_cloning.buffer": str(bag),
        "behaviour_cloning.beta": beta,
        "behaviour_cloning.batch_size": 128,
        "critic_warmup.iterations": 1,  # the first iteration trains the critic alone: no cloning yet
        "ppo.learning_rate": 3e-3,
    }
    config = load_train_config("go2", "walk", overrides=overrides)
    result = Trainer(config, tmp_path / f"beta_{beta}", progress=False).run()
    assert _scalars(tmp_path / f"beta_{beta}")["behaviour_cloning/weight"] == [0.0, beta, beta]
    checkpoint = torch.load(result.checkpoint, weights_only=True)
    return result, checkpoint


def test_cloning_pulls_the_trained_actor_toward_the_robot_s_actions(robot_run, tmp_path):
    bag, policy = robot_run
    samples = rebuild_samples(bag, policy.metadata, recorded_policy=policy)
    errors = {}
    for beta in (0.0, 20.0):
        _, checkpoint = _train(tmp_path, bag, beta)
        actor = build_actor(checkpoint)
        with torch.no_grad():
            predicted = actor(torch.as_tensor(samples.observations))
        errors[beta] = float(np.mean((predicted.numpy() - samples.actions) ** 2))
    assert errors[20.0] < 0.5 * errors[0.0]


def test_a_missing_buffer_is_refused_before_the_run(tmp_path):
    with pytest.raises(TrainConfigError, match="behaviour_cloning.buffer.*does not exist"):
        load_train_config("go2", "walk", overrides={"behaviour_cloning.buffer": str(tmp_path / "nothing")})
    with pytest.raises(TrainConfigError, match="beta_final and beta_final_iteration go together"):
        load_train_config("go2", "walk", overrides={"behaviour_cloning.beta_final": 0.0})


def test_domain_adaptation_trains_a_classifier_beside_ppo_and_resumes_it(robot_run, tmp_path):
    bag, _ = robot_run
    overrides = {
        "iterations": 3,
        "num_envs": 2,
        "workers": 1,
        "num_steps_per_env": 8,
        "domain_adaptation.bags": [str(bag)],
        "domain_adaptation.lambda": 0.5,
        "critic_warmup.iterations": 0,
    }
    config = load_train_config("go2", "walk", overrides=overrides)
    out = tmp_path / "dann"
    result = Trainer(config, out, progress=False).run()
    assert all(row["feature_mmd"] >= 0 for row in result.history)
    checkpoint = torch.load(result.checkpoint, weights_only=True)
    assert set(checkpoint["domain_adaptation"]) == {"classifier", "optimizer"}
    scalars = _scalars(out)
    assert {"Loss/domain_adaptation", "domain_adaptation/classifier_accuracy", "domain_adaptation/feature_mmd"} <= set(
        scalars
    )
    lambdas = scalars["domain_adaptation/lambda"]
    assert lambdas[0] == 0.0 and 0.0 < lambdas[1] < lambdas[2] <= 0.5  # DANN's rise over the run
    # Resumed with the classifier's rate at 0: its weights carry over from the checkpoint unchanged.
    frozen = {**overrides, "iterations": 4, "domain_adaptation.classifier_learning_rate": 0.0}
    resumed = Trainer(
        load_train_config("go2", "walk", overrides=frozen), out, resume=result.checkpoint, progress=False
    ).run()
    assert resumed.iterations == 4
    assert "domain adaptation: feature MMD" in summary(resumed)
    after = torch.load(resumed.checkpoint, weights_only=True)["domain_adaptation"]["classifier"]
    for name, weights in checkpoint["domain_adaptation"]["classifier"].items():
        assert torch.equal(after[name], weights), name


def _scalars(run) -> dict[str, list[float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run))
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_shared_terms_name_observation_terms():
    for bad in (["nope"], [["velocity_command"]], "velocity_command"):
        with pytest.raises(TrainConfigError, match="domain_adaptation.shared_terms"):
            load_train_config("go2", "walk", overrides={"domain_adaptation.shared_terms": bad})
