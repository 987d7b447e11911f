"""A 1-D point-mass reach task with the attributes of the project's task envs.

It stands in for the PyBullet tasks in unit tests of the training machinery (vector
env, rsl_rl adapter, export, evaluation): it is exact, fast and fully deterministic.

Dynamics: ``x <- x + step * gain * clip(action)``; the goal is ``goal`` (scaled by the
difficulty); an episode lasts ``max_episode_steps`` and succeeds when the final
distance is below ``tolerance``. ``gain`` is the one physical condition: the
randomization's ``motor_strength``, sampled at reset (1 without randomization).
Setting ``fail_at_step`` makes ``step`` raise there (to test error propagation).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np

from sim2real.core.observation import ObservationSpec, ObservationTerm
from sim2real.sim.randomization import Randomization


@dataclass(frozen=True)
class ToyProfile:
    name: str = "toy"
    joint_names: tuple[str, ...] = ("slider",)
    kp: np.ndarray = field(default_factory=lambda: np.array([10.0]))
    kd: np.ndarray = field(default_factory=lambda: np.array([1.0]))
    default_positions: np.ndarray = field(default_factory=lambda: np.array([0.0]))
    policy_period: float = 0.02
    physics_period: float = 0.005

    @property
    def num_joints(self) -> int:
        return len(self.joint_names)


def toy_randomization(low: float, high: float) -> Randomization:
    return Randomization.from_dict({"name": "toy", "parameters": {"motor_strength": {"uniform": [low, high]}}})


class ToyReach(gym.Env):
    STEP = 0.1

    def __init__(
        self,
        goal: float = 1.0,
        max_episode_steps: int = 20,
        tolerance: float = 0.05,
        randomization: Randomization | None = None,
        fail_at_step: int | None = None,
        obs_noise: float = 0.0,
    ):
        self.profile = ToyProfile()
        # Layout labels only: the toy's values are (x, goal - x).
        self.observation_spec = ObservationSpec(
            [ObservationTerm("joint_pos", 1, 1.0), ObservationTerm("joint_vel", 1, 1.0)]
        )
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_scale = np.array([self.STEP])
        self.action_offset = self.profile.default_positions.copy()
        self.action_clip = 1.0
        self.policy_period = self.profile.policy_period
        self.physics_period = self.profile.physics_period
        self.max_episode_steps = max_episode_steps
        self.task_name = "reach"
        self.task_config = {"goal": goal, "tolerance": tolerance, "max_episode_steps": max_episode_steps}
        self.goal, self.tolerance = goal, tolerance
        self.difficulty = 1.0
        self.randomization = randomization
        self.fail_at_step = fail_at_step
        self.obs_noise = obs_noise
        self.total_steps = 0
        self.x, self.t, self.gain = 0.0, 0, 1.0
        self.episode_conditions: dict = {}

    def set_difficulty(self, difficulty: float) -> None:
        self.difficulty = float(difficulty)

    def set_randomization(self, randomization: Randomization | None) -> None:
        self.randomization = randomization

    def _obs(self) -> np.ndarray:
        noise = self.np_random.normal(0.0, self.obs_noise, 2) if self.obs_noise else 0.0
        return (np.array([self.x, self.goal * self.difficulty - self.x]) + noise).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.x, self.t = 0.0, 0
        conditions = self.randomization.sample(self.np_random) if self.randomization is not None else {}
        self.gain = conditions.get("motor_strength", 1.0)
        self.episode_conditions = conditions
        return self._obs(), {}

    def step(self, action):
        self.total_steps += 1
        if self.fail_at_step is not None and self.total_steps >= self.fail_at_step:
            raise FloatingPointError("toy env exploded on purpose")
        a = float(np.clip(np.asarray(action, dtype=float).reshape(-1)[0], -1.0, 1.0))
        self.x += self.STEP * self.gain * a
        self.t += 1
        error = abs(self.goal * self.difficulty - self.x)
        terms = {"distance": -error, "effort": -0.01 * a * a}
        reward = sum(terms.values())
        terminated = abs(self.x) > 3.0
        truncated = self.t >= self.max_episode_steps
        info = {"reward_terms": terms}
        if terminated or truncated:
            info["episode"] = {"success": float(not terminated and error < self.tolerance), "final_error": error}
        return self._obs(), reward, terminated, truncated, info

    def privileged_observation(self) -> np.ndarray:
        """The toy's one hidden condition, for a privileged critic."""
        return np.array([self.gain], dtype=np.float32)

    def privileged_names(self) -> list[str]:
        return ["motor_strength"]


def make_toy(**kwargs) -> ToyReach:
    """Module-level factory: picklable (with functools.partial) for spawned workers."""
    return ToyReach(**kwargs)


def make_toy_task(
    robot: str,
    task: str,
    seed: int = 0,
    randomization: Randomization | None = None,
    config: dict | None = None,
    engine: str = "pybullet",
) -> ToyReach:
    """``make_env``'s signature over the toy: ``config`` holds ToyReach keyword arguments
    (its ``task_config``: goal, tolerance, max_episode_steps); ``engine`` is ignored (the
    toy has no physics engine)."""
    return ToyReach(randomization=randomization, **(config or {}))


class ToyReachThatDiesOnce(ToyReach):
    """ToyReach whose process dies (``os._exit``: no exception, no clean-up, as a machine that
    loses power) at its ``die_at_step``-th step, if no other env died before: the first to
    create ``marker`` dies, the others and every replacement live on."""

    def __init__(self, marker: str, die_at_step: int, **kwargs):
        super().__init__(**kwargs)
        self.marker, self.die_at_step = marker, die_at_step

    def step(self, action):
        if self.total_steps + 1 == self.die_at_step:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os._exit(17)
        return super().step(action)


def make_toy_task_that_dies_once(robot: str, task: str, marker: str, die_at_step: int, **kwargs) -> ToyReach:
    """``make_toy_task`` whose env kills its process once (:class:`ToyReachThatDiesOnce`);
    bind ``marker`` and ``die_at_step`` with functools.partial."""
    kwargs.pop("engine", None)
    kwargs.pop("seed", None)
    randomization, config = kwargs.pop("randomization", None), kwargs.pop("config", None) or {}
    return ToyReachThatDiesOnce(marker, die_at_step, randomization=randomization, **config)


TOY_TRAIN_CONFIG = """
robot: toy
task: reach
iterations: 3
num_envs: 4
workers: 2
num_steps_per_env: 8
save_interval: 1
min_episodes_per_update: 4
policy: {actor_hidden_dims: [16, 16], critic_hidden_dims: [16, 16]}
ppo: {num_mini_batches: 2, num_learning_epochs: 2}
"""


def toy_training_config(folder) -> dict:
    """A resolved toy training config in ``folder``: randomization, ADR that widens on any
    return, and a linear curriculum over its first two iterations."""
    from sim2real.train.train_config import load_train_config

    randomization = write_toy_randomization(folder / "toy_dr.yaml", 0.9, 1.1)
    path = folder / "toy_reach.yaml"
    path.write_text(
        TOY_TRAIN_CONFIG + f"randomization: {randomization}\n"
        "adr: {enabled: true, target_return: -100.0, rate: 0.1}\n"
        "curriculum: {kind: linear, d_min: 0.5, d_max: 1.0, total_iterations: 2}\n"
    )
    return load_train_config("toy", "reach", path)


def write_toy_randomization(path, low: float, high: float) -> str:
    path.write_text(f"name: {path.stem}\nparameters:\n  motor_strength: {{uniform: [{low}, {high}]}}\n")
    return str(path)


def set_constant_actor(checkpoint: dict, value: float) -> dict:
    """Make the checkpoint's actor output ``value`` for every observation: zero weights
    and ``value`` as the bias of its last layer."""
    state = checkpoint["actor_state_dict"]
    last = max((k for k in state if k.startswith("mlp.") and k.endswith(".weight")), key=lambda k: int(k.split(".")[1]))
    state[last].zero_()
    state[last.replace("weight", "bias")].fill_(value)
    return checkpoint
