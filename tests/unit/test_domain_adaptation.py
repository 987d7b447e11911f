"""DANN: the gradient reversal is exact, and on a toy shift the actor's features align while the
task stays learned."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sim2real.train.auxiliary import AuxiliaryLosses, actor_features, actor_output
from sim2real.train.domain_adaptation import (
    DomainAdaptation,
    dann_lambda,
    maximum_mean_discrepancy,
    reverse_gradient,
)
from tests.unit.test_behaviour_cloning import toy_actor


def test_the_reversal_is_the_identity_forward_and_minus_lambda_times_the_gradient_backward():
    torch.manual_seed(0)
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, dtype=torch.float64)

    def f(v):
        return torch.sin(v @ w).sum()

    out = reverse_gradient(x, 0.7)
    assert torch.equal(out, x)
    f(out).backward()
    # Finite differences of f itself: the reversal must give exactly -0.7 times them.
    eps = 1e-6
    numeric = torch.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            step = torch.zeros_like(x)
            step[i, j] = eps
            numeric[i, j] = (f(x.detach() + step) - f(x.detach() - step)) / (2 * eps)
    torch.testing.assert_close(x.grad, -0.7 * numeric, atol=1e-8, rtol=1e-6)


def test_lambda_rises_from_zero_to_its_maximum_as_in_dann():
    assert dann_lambda(0.0, 0.3) == 0.0
    assert dann_lambda(1.0, 0.3) == pytest.approx(0.3 * (2 / (1 + np.exp(-10)) - 1))
    assert 0.0 < dann_lambda(0.1, 0.3) < dann_lambda(0.5, 0.3) < 0.3
    assert dann_lambda(0.0, 0.3, "fixed") == 0.3


def shifted_domains(n: int = 2000, seed: int = 0):
    """Observations (x0, x1, x2): the task's action depends on x1 and x2 alone; the robot's x0 is
    offset by 2 (a sensor bias the simulator lacks)."""
    rng = np.random.default_rng(seed)
    sim = rng.standard_normal((n, 3)).astype(np.float32)
    robot = rng.standard_normal((n, 3)).astype(np.float32)
    robot[:, 0] += 2.0
    w = np.array([[0.0, -1.0, 0.5], [0.0, 0.8, -0.6]], np.float32)
    return sim, sim @ w.T, robot


@pytest.fixture(autouse=True)
def one_thread():
    """As the training runner's learner: idle torch threads would only contend here."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def train_with(reversal: float, steps: int = 600):
    """A supervised task on simulated data (standing in for PPO), with the DANN term hooked on."""
    sim, labels, robot = shifted_domains()
    actor = toy_actor(seed=2)
    optimizer = torch.optim.Adam(actor.parameters(), lr=2e-3)
    x, y = torch.as_tensor(sim), torch.as_tensor(labels)
    rng = np.random.default_rng(1)
    adaptation = DomainAdaptation(
        lambda n: x[torch.as_tensor(rng.integers(0, len(x), size=n))],
        lambda: robot,
        feature_size=32,
        batch_size=128,
        learning_rate=2e-3,
        seed=3,
    )
    adaptation.reversal = reversal
    hooked = AuxiliaryLosses(SimpleNamespace(actor=actor, optimizer=optimizer), [adaptation], max_grad_norm=1.0)
    before = adaptation.feature_distance(actor)
    accuracy = []
    for step in range(steps):
        index = torch.as_tensor(rng.integers(0, len(x), size=128))
        task = (actor_output(actor, x[index]) - y[index]).pow(2).mean()
        optimizer.zero_grad()
        task.backward()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), 1.0)
        optimizer.step()
        if step % 100 == 99:
            accuracy.append(hooked.pop_statistics()["domain_adaptation/classifier_accuracy"])
    after = adaptation.feature_distance(actor)
    with torch.no_grad():
        sim_error = float((actor_output(actor, x) - y).pow(2).mean())
    return {"before": before, "after": after, "accuracy": accuracy[-1], "sim": sim_error}


def test_the_reversal_aligns_the_features_and_keeps_the_task():
    plain = train_with(reversal=0.0)
    adapted = train_with(reversal=1.0)
    # Without the reversal the classifier tells the domains apart; with it, hardly better than chance.
    assert plain["accuracy"] > 0.75
    assert adapted["accuracy"] < 0.65
    assert adapted["after"] < 0.5 * plain["after"]
    assert adapted["after"] < 0.2 * adapted["before"]
    # The task is kept in simulation.
    assert adapted["sim"] < 0.01


def test_the_feature_distance_is_zero_for_one_distribution_and_grows_with_a_shift():
    rng = np.random.default_rng(0)
    a = torch.as_tensor(rng.standard_normal((400, 4)), dtype=torch.float32)
    b = torch.as_tensor(rng.standard_normal((400, 4)), dtype=torch.float32)
    assert maximum_mean_discrepancy(a, b) < 0.01
    assert maximum_mean_discrepancy(a, b + 1.0) > 10 * maximum_mean_discrepancy(a, b)


def test_features_are_the_actor_s_last_hidden_layer():
    actor = toy_actor()
    x = torch.randn(7, 3)
    features = actor_features(actor, x)
    assert features.shape == (7, 32)
    torch.testing.assert_close(actor.mlp[-1](features), actor_output(actor, x))


def test_the_classifier_sees_the_operator_s_terms_of_the_simulated_sample_in_both_domains():
    sim = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    robot = -np.ones((10, 6), np.float32)
    adaptation = DomainAdaptation(lambda n: sim[:n], lambda: robot, feature_size=4, shared=[slice(2, 4)])
    a, b = adaptation.pair(4)
    torch.testing.assert_close(b[:, 2:4], a[:, 2:4])
    assert bool((b[:, :2] == -1).all() and (b[:, 4:] == -1).all())
    assert float(robot.min()) == -1.0 and float(robot.max()) == -1.0  # the buffer itself untouched
