"""Losses on robot data added to PPO's own, at each of its gradient steps: L = L_PPO + sum w_i L_i.

rsl_rl's PPO has no hook for an extra loss term, so the terms join at the optimizer: a
pre-step hook on PPO's optimizer runs after PPO has back-propagated (and clipped) its own loss
for a mini-batch and before the step, back-propagates ``w_i * L_i`` of every term into the same
gradients, and clips the actor's gradient again to ``max_grad_norm``. One step then follows the
gradient of the sum, as if the terms had been added to PPO's loss; only the clipping differs
(PPO's part is clipped before the sum as well as after). Each term draws its own batch of robot
data per step.

The terms (:class:`BehaviourCloning`, :class:`sim2real.train.domain_adaptation.DomainAdaptation`)
act on the actor alone; the critic and the exported policy's contract are untouched.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np


class AuxiliaryTerm(Protocol):
    name: str
    weight: float

    def loss(self, actor: Any) -> Any: ...  # a scalar torch tensor

    def after_step(self) -> None: ...  # e.g. step the term's own optimizer

    def statistics(self) -> dict[str, float]: ...  # what to log since the last call


def actor_output(actor: Any, observations: Any) -> Any:
    """The actor's deterministic action (the exported policy's output) for flat observations."""
    from tensordict import TensorDict

    return actor(TensorDict({"policy": observations}, batch_size=[observations.shape[0]]))


def actor_features(actor: Any, observations: Any) -> Any:
    """The actor's last hidden layer (after its activation) for flat observations: the features
    its output layer maps to actions."""
    from tensordict import TensorDict

    features = actor.get_latent(TensorDict({"policy": observations}, batch_size=[observations.shape[0]]))
    for layer in list(actor.mlp)[:-1]:  # rsl_rl's MLP cannot be sliced (its constructor takes sizes)
        features = layer(features)
    return features


class AuxiliaryLosses:
    """The terms hooked onto ``alg`` (rsl_rl PPO); :meth:`remove` unhooks them."""

    def __init__(self, alg: Any, terms: list[AuxiliaryTerm], max_grad_norm: float):
        self.alg = alg
        self.terms = terms
        self.max_grad_norm = float(max_grad_norm)
        self._sums: dict[str, float] = {}
        self._steps = 0
        self._handle = alg.optimizer.register_step_pre_hook(self._before_step)

    def remove(self) -> None:
        self._handle.remove()

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        import torch

        active = [t for t in self.terms if t.weight != 0.0]
        if not active:
            return
        actor = self.alg.actor
        with torch.enable_grad():
            losses = [(t, t.loss(actor)) for t in active]
            total = sum(t.weight * loss for t, loss in losses)
            total.backward()
        torch.nn.utils.clip_grad_norm_(actor.parameters(), self.max_grad_norm)
        for term, loss in losses:
            value = float(loss.detach())
            if math.isfinite(value):
                self._sums[term.name] = self._sums.get(term.name, 0.0) + value
            term.after_step()
        self._steps += 1

    def pop_statistics(self) -> dict[str, float]:
        """Per term: its mean loss over the steps since the last call (``Loss/<name>``), its weight
        and its own figures."""
        out: dict[str, float] = {}
        for term in self.terms:
            if self._steps and term.name in self._sums:
                out[f"Loss/{term.name}"] = self._sums[term.name] / self._steps
            out[f"{term.name}/weight"] = term.weight
            out.update({f"{term.name}/{k}": v for k, v in term.statistics().items()})
        self._sums, self._steps = {}, 0
        return out


class BehaviourCloning:
    """``L_BC``: mean squared error between the actor's action and the demonstrated one, on a
    batch drawn from the robot buffer each step (system-in-the-loop: PPO in simulation, cloning
    on robot data)."""

    name = "behaviour_cloning"

    def __init__(self, buffer: Any, batch_size: int, seed: int = 0, weight: float = 0.0):
        self.buffer = buffer
        self.batch_size = int(batch_size)
        self.weight = float(weight)
        self._rng = np.random.default_rng(seed)
        self._tensors: tuple[Any, Any] | None = None
        self._count = -1

    def loss(self, actor: Any) -> Any:
        import torch

        observations, actions = self._data()
        index = torch.as_tensor(self._rng.integers(0, len(observations), size=self.batch_size))
        predicted = actor_output(actor, observations[index])
        target = actions[index]
        clip = getattr(getattr(self.buffer, "policy", None), "action_clip", None)
        if clip is not None:
            # A demonstration at the clip stands for any action past it (the robot saw the clip):
            # an output past it on the same side matches it. Elsewhere the error pulls as usual.
            beyond = (target.abs() >= clip) & (predicted * torch.sign(target) >= clip)
            predicted = torch.where(beyond, target, predicted)
        return torch.mean((predicted - target) ** 2)

    def _data(self) -> tuple[Any, Any]:
        import torch

        samples = self.buffer.samples
        if self._tensors is None or self._count != len(samples):  # the buffer grew: new tensors
            self._tensors = (torch.as_tensor(samples.observations), torch.as_tensor(samples.actions))
            self._count = len(samples)
        return self._tensors

    def after_step(self) -> None:
        pass

    def statistics(self) -> dict[str, float]:
        return {"samples": float(len(self.buffer.samples))}
