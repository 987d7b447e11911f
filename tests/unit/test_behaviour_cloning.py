"""Behaviour cloning added to PPO's loss at its optimizer: it pulls the actor toward demonstrations."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from sim2real.train.auxiliary import AuxiliaryLosses, BehaviourCloning, actor_output
from sim2real.train.robot_data import RobotSamples


def toy_actor(seed: int = 0) -> MLPModel:
    torch.manual_seed(seed)
    obs = TensorDict({"policy": torch.zeros(1, 3)}, batch_size=[1])
    return MLPModel(
        obs,
        {"actor": ["policy"]},
        "actor",
        2,
        hidden_dims=[32, 32],
        obs_normalization=True,
        distribution_cfg={"class_name": "rsl_rl.modules.distribution:GaussianDistribution", "init_std": 1.0},
    )


def demonstrations(n: int = 400, seed: int = 1) -> RobotSamples:
    """A demonstrator acting a = W x on observations x."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype(np.float32)
    w = np.array([[0.5, -1.0, 0.2], [0.0, 0.8, -0.6]], np.float32)
    return RobotSamples(x, x @ w.T)


def train(beta: float, steps: int = 300) -> float:
    """Steps of an optimizer whose own loss pulls the actions to zero (a stand-in for PPO's),
    with beta * L_BC hooked on; the actor's error to the demonstrations after them."""
    actor = toy_actor()
    optimizer = torch.optim.Adam(actor.parameters(), lr=3e-3)
    alg = SimpleNamespace(actor=actor, optimizer=optimizer)
    buffer = SimpleNamespace(samples=demonstrations())
    cloning = BehaviourCloning(buffer, batch_size=64, seed=0, weight=beta)
    hooked = AuxiliaryLosses(alg, [cloning], max_grad_norm=1.0)
    x = torch.as_tensor(buffer.samples.observations)
    for _ in range(steps):
        own = actor_output(actor, x[:64]).pow(2).mean()
        optimizer.zero_grad()
        own.backward()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), 1.0)
        optimizer.step()
    statistics = hooked.pop_statistics()
    assert statistics["behaviour_cloning/weight"] == beta
    assert ("Loss/behaviour_cloning" in statistics) == (beta != 0)
    with torch.no_grad():
        return float((actor_output(actor, x) - torch.as_tensor(buffer.samples.actions)).pow(2).mean())


def test_the_cloning_term_pulls_the_actor_toward_the_demonstrations():
    untouched = train(beta=0.0)
    cloned = train(beta=5.0)
    reference = float(np.mean(demonstrations().actions ** 2))  # the error of acting zero
    assert untouched > 0.9 * reference
    assert cloned < 0.2 * reference


def test_the_hook_adds_the_term_s_gradient_to_the_step():
    """One step: the gradient the optimizer applies is PPO's plus beta times the cloning loss's."""
    actor = toy_actor()
    data = demonstrations(n=64)
    x, a = torch.as_tensor(data.observations), torch.as_tensor(data.actions)

    def gradient(beta: float) -> torch.Tensor:
        model = toy_actor()
        model.load_state_dict(actor.state_dict())
        optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
        cloning = BehaviourCloning(SimpleNamespace(samples=data), batch_size=64, seed=0, weight=beta)
        AuxiliaryLosses(SimpleNamespace(actor=model, optimizer=optimizer), [cloning], max_grad_norm=1e9)
        before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
        optimizer.zero_grad()
        actor_output(model, x).pow(2).mean().backward()
        optimizer.step()
        return before - torch.cat([p.detach().flatten() for p in model.parameters()])

    model = toy_actor()
    model.load_state_dict(actor.state_dict())
    index = torch.as_tensor(np.random.default_rng(0).integers(0, 64, size=64))
    loss = actor_output(model, x).pow(2).mean() + 2.0 * (actor_output(model, x[index]) - a[index]).pow(2).mean()
    expected = torch.autograd.grad(loss, list(model.parameters()), allow_unused=True)
    expected = torch.cat(
        [(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(expected, model.parameters())]
    )
    torch.testing.assert_close(gradient(2.0), expected, atol=1e-6, rtol=1e-5)


def test_an_output_past_the_clip_matches_a_demonstration_at_it_and_is_pulled_back_from_others():
    """The robot saw clipped actions: a demonstration at the clip stands for any action past it,
    while an output past the clip where the demonstration is inside is pulled back."""
    actor = toy_actor()
    with torch.no_grad():
        actor.mlp[-1].weight.zero_()
        actor.mlp[-1].bias.fill_(5.0)  # every output at 5, past a clip of 1
    x = np.zeros((2, 3), np.float32)
    policy = SimpleNamespace(action_clip=1.0)
    at_clip = SimpleNamespace(samples=RobotSamples(x, np.ones((2, 2), np.float32)), policy=policy)
    assert float(BehaviourCloning(at_clip, batch_size=8, weight=1.0).loss(actor)) == 0.0
    inside = SimpleNamespace(samples=RobotSamples(x, np.full((2, 2), 0.5, np.float32)), policy=policy)
    loss = BehaviourCloning(inside, batch_size=8, weight=1.0).loss(actor)
    loss.backward()
    assert float(loss) == pytest.approx(4.5**2)
    assert float(actor.mlp[-1].bias.grad.abs().min()) > 0
