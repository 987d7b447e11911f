"""Domain adaptation on robot data: a gradient-reversal domain classifier on the actor's features (DANN).

A small classifier learns to tell the actor's last hidden features of simulated observations
(from the rollout PPO is updating on) from those of robot observations (rebuilt from bags,
:mod:`sim2real.train.robot_data`; no labels needed). Between the features and the classifier
sits a gradient-reversal layer: the identity going forward, ``-lambda`` times the gradient
coming back (Ganin & Lempitsky, "Unsupervised Domain Adaptation by Backpropagation", ICML 2015).
So the same step that makes the classifier better makes the actor's layers worse at telling the
domains apart: the features align while PPO keeps them useful for the task. lambda follows
that paper's schedule, ``lambda_max * (2 / (1 + exp(-10 p)) - 1)`` over the run's progress
``p`` from 0 to 1 (or stays fixed). It joins PPO's steps through
:class:`sim2real.train.auxiliary.AuxiliaryLosses`; the classifier is training-only, and the
exported policy is the actor alone, with the same runtime contract.

Logged per iteration: the classifier's accuracy on its batches (toward 50 % as the features
align), lambda, and the maximum mean discrepancy (Gaussian kernel, median bandwidth) between the
two domains' features on a fresh sample of each: the distance the reversal closes.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Sequence

import numpy as np

from sim2real.train.auxiliary import actor_features

CLASSIFIER_HIDDEN = 64
MMD_SAMPLES = 512


def reverse_gradient(x: Any, weight: float) -> Any:
    """The identity forward; ``-weight`` times the incoming gradient backward."""
    return _gradient_reversal().apply(x, float(weight))


@functools.cache
def _gradient_reversal():
    import torch  # here, not at import: the training config's checks import this module

    class GradientReversal(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            ctx.weight = weight
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            return -ctx.weight * grad, None

    return GradientReversal


def dann_lambda(progress: float, lambda_max: float, schedule: str = "dann") -> float:
    """lambda at ``progress`` (0 at the run's first iteration, 1 at its last)."""
    if schedule == "fixed":
        return float(lambda_max)
    p = min(max(float(progress), 0.0), 1.0)
    return float(lambda_max) * (2.0 / (1.0 + math.exp(-10.0 * p)) - 1.0)


def maximum_mean_discrepancy(a: Any, b: Any) -> float:
    """Squared MMD between two samples of feature vectors, Gaussian kernel with the median
    pairwise distance as its bandwidth (biased estimate; 0 for samples of one distribution in
    the limit)."""
    import torch

    with torch.no_grad():
        both = torch.cat([a, b])
        distances = torch.cdist(both, both).pow(2)
        bandwidth = torch.median(distances[distances > 0]) if bool((distances > 0).any()) else torch.tensor(1.0)
        kernel = torch.exp(-distances / bandwidth)
        n = len(a)
        return float(kernel[:n, :n].mean() + kernel[n:, n:].mean() - 2 * kernel[:n, n:].mean())


class DomainAdaptation:
    """The DANN term: ``loss(actor)`` is the classifier's cross-entropy on a batch of each domain,
    through the reversal. Its weight in the sum stays 1 (the classifier always learns); how hard
    the actor is pushed is :attr:`reversal` (lambda)."""

    name = "domain_adaptation"

    def __init__(
        self,
        sim_observations: Callable[[int], Any],
        robot_observations: Callable[[], np.ndarray],
        feature_size: int,
        batch_size: int = 256,
        learning_rate: float = 1e-3,
        seed: int = 0,
        shared: Sequence[slice] = (),
    ):
        import torch

        self.sim_observations = sim_observations
        self.robot_observations = robot_observations
        self.shared = tuple(shared)
        self.batch_size = int(batch_size)
        self.weight = 1.0
        self.reversal = 0.0
        generator = torch.Generator().manual_seed(seed)
        self.classifier = torch.nn.Sequential(
            torch.nn.Linear(feature_size, CLASSIFIER_HIDDEN), torch.nn.ELU(), torch.nn.Linear(CLASSIFIER_HIDDEN, 1)
        )
        with torch.no_grad():  # its own seed: the actor's initialization does not move with it
            for parameter in self.classifier.parameters():
                parameter.copy_(torch.empty_like(parameter).uniform_(-0.1, 0.1, generator=generator))
        self.optimizer = torch.optim.Adam(self.classifier.parameters(), lr=learning_rate)
        self._rng = np.random.default_rng(seed)
        self._robot: tuple[int, Any] | None = None
        self._correct = 0.0
        self._seen = 0

    def robot_batch(self, n: int) -> Any:
        import torch

        observations = self.robot_observations()
        if self._robot is None or self._robot[0] != len(observations):  # the buffer grew
            self._robot = (len(observations), torch.as_tensor(observations))
        index = torch.as_tensor(self._rng.integers(0, len(observations), size=n))
        return self._robot[1][index]

    def loss(self, actor: Any) -> Any:
        import torch

        sim, robot = self.pair(self.batch_size)
        features = actor_features(actor, torch.cat([sim, robot]))
        logits = self.classifier(reverse_gradient(features, self.reversal)).squeeze(-1)
        labels = torch.cat([torch.zeros(len(sim)), torch.ones(len(robot))])
        self.optimizer.zero_grad()  # the sum's backward fills the classifier's gradients next
        with torch.no_grad():
            self._correct += float(((logits > 0).float() == labels).sum())
            self._seen += len(labels)
        return torch.nn.functional.binary_cross_entropy_with_logits(logits, labels)

    def after_step(self) -> None:
        self.optimizer.step()

    def feature_distance(self, actor: Any, samples: int = MMD_SAMPLES) -> float:
        """MMD between the domains' features now, on ``samples`` of each."""
        import torch

        with torch.no_grad():
            sim, robot = self.pair(samples)
            return maximum_mean_discrepancy(actor_features(actor, sim), actor_features(actor, robot))

    def pair(self, n: int) -> tuple[Any, Any]:
        """``n`` simulated and ``n`` robot observations, the robot's ``shared`` terms (what an
        operator chose, e.g. the velocity command) taken from the simulated ones: the classifier
        must tell the domains apart by the robot, not by what it was asked to do. Otherwise the
        reversal would teach the actor to ignore whatever the operator asked of the robot that
        training did not ask as often."""
        sim, robot = self.sim_observations(n), self.robot_batch(n)
        if self.shared:
            robot = robot.clone()
            for columns in self.shared:
                robot[:, columns] = sim[:, columns]
        return sim, robot

    def statistics(self) -> dict[str, float]:
        out = {"lambda": self.reversal}
        if self._seen:
            out["classifier_accuracy"] = self._correct / self._seen
        self._correct, self._seen = 0.0, 0
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"classifier": self.classifier.state_dict(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """A checkpoint's classifier and its optimizer's moments, at this run's learning rate."""
        rate = self.optimizer.param_groups[0]["lr"]
        self.classifier.load_state_dict(state["classifier"])
        self.optimizer.load_state_dict(state["optimizer"])
        for group in self.optimizer.param_groups:
            group["lr"] = rate
