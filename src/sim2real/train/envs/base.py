"""Machinery every robot task shares: the simulated world, the action mapping, the
episode loop, randomization, pushes and the per-term reward breakdown.

A task (:mod:`.go2_walk`, :mod:`.panda_reach`) adds what is specific to it: what the
episode is about (command, goal), its reward terms, termination and success. The
attributes listed in :class:`RobotTaskEnv` are what the PPO runner and the ONNX
exporter read: keep their names.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

import gymnasium
import numpy as np

from sim2real.core.mirror import SignedPermutation
from sim2real.core.observation import ObservationSpec, RobotSignals
from sim2real.core.robot_profile import RobotProfile
from sim2real.sim.conditions import PhysicalConditions
from sim2real.sim.engines import DEFAULT_ENGINE, check_engine, make_world
from sim2real.sim.world import SimWorld

_NOMINAL = {name: getattr(PhysicalConditions(), name) for name in PhysicalConditions.names()}
_NOISE_CONDITIONS = ("joint_position_noise", "joint_velocity_noise")
# Every numeric condition but the battery (None when nominal: it enters as the torque-limit scale).
_PRIVILEGED_CONDITIONS = tuple(name for name in PhysicalConditions.names() if name != "battery_voltage")
NEAR_LIMIT = 0.1  # rad: a joint this close to a hard limit is "near" it (signal joint_speed_near_limits)
# Signals every task computes for reward priors (sim2real.train.prior), by name: meaning (unit).
COMMON_PRIOR_SIGNALS = {
    "joint_speed_max": "the fastest joint's speed, rad/s",
    "joint_speed_near_limits": f"the fastest speed of a joint within {NEAR_LIMIT} rad of a hard limit (0 if none), rad/s",
    "action_rate": "squared change of the action since the last step, sum over joints",
}


class RobotTaskEnv(gymnasium.Env):
    """A robot task in PyBullet, one policy step per :meth:`step`.

    Action (every task): ``a`` in profile joint order, clipped to ``[-action_clip,
    action_clip]``; joint position target ``q* = action_offset + action_scale * a``
    (``action_offset`` is the profile's default pose), optionally clipped to the joint
    limits (``action.clip_to_joint_limits``). The target is sent as a PD command with the
    profile's kp/kd and held for ``decimation`` physics steps of ``physics_period``
    (``policy_period = decimation * physics_period`` is the profile's policy period).

    Observation: ``observation_spec.observe(signals)``, with the signals a robot would
    report (joint readings with the randomized sensor noise, the IMU).

    Reward: ``sum_k w_k * dt * r_k`` over the task's reward terms with non-zero weight
    (legged_gym convention: weights are per second, ``dt`` is the policy period);
    ``info["reward_terms"]`` holds every weighted term of the step and they sum to the
    reward. With ``rewards.only_positive`` the sum of the other terms is clipped at zero
    (the clip shows up as the term ``positive_clip``) before ``termination`` and a reward prior's
    terms (``prior/<name>``, :meth:`set_prior`) are added.

    Episode: at most ``max_episode_steps`` steps (then ``truncated``); at its end
    ``info["episode"]`` holds ``return``, ``length``, ``success`` and the task's metrics.
    Every random draw (randomization, pushes, commands, goals, the world's terrain and
    sensor noise) follows from ``reset(seed=...)``; a seeded reset rebuilds the world, so
    the same seed and actions give the same observations bit for bit.

    Randomization (:meth:`set_randomization`) is sampled once per episode at reset;
    conditions it does not list are nominal. Pushes follow its ``pushes`` spec.
    Difficulty (:meth:`set_difficulty`, in [0, 1]) is read by the task at each reset.
    """

    metadata = {"render_modes": []}
    task_name = ""
    #: reward terms the task implements, as methods ``_reward_<name>``; ``termination``
    #: (1 on a fall, added after the positive clip) is computed here for tasks that list it
    REWARD_TERMS: tuple[str, ...] = ()
    #: signals a reward prior may read (name: meaning and unit), as methods ``_signal_<name>``
    PRIOR_SIGNALS: dict[str, str] = COMMON_PRIOR_SIGNALS

    def __init__(self, profile: RobotProfile, config: dict[str, Any], randomization=None, seed: int | None = None):
        super().__init__()
        try:
            self.task_config: dict[str, Any] = json.loads(json.dumps(config))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"task config must be JSON-serialisable (numbers, strings, lists, dicts): {exc}") from None
        self.profile = profile
        cfg = self.task_config
        self.policy_period = float(profile.policy_period)
        self.physics_period = float(cfg.get("physics_period") or profile.physics_period)
        ratio = self.policy_period / self.physics_period
        if abs(ratio - round(ratio)) > 1e-6 or round(ratio) < 1:
            raise ValueError(
                f"physics_period {self.physics_period} s does not divide the policy period "
                f"{self.policy_period} s of robot {profile.name!r}"
            )
        self.decimation = int(round(ratio))
        self.max_episode_steps = int(round(float(cfg["episode_length"]) / self.policy_period))

        action = cfg["action"]
        n = profile.num_joints
        self.action_scale = float(action["scale"])
        self.action_clip = float(action["clip"])
        self.action_offset = profile.default_positions.copy()
        self._clip_targets = bool(action.get("clip_to_joint_limits", False))
        self._lower, self._upper = profile.lower_limits, profile.upper_limits

        self.observation_spec = ObservationSpec.from_config(cfg["observation"], n)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (self.observation_spec.size,), np.float32)
        self.action_space = gymnasium.spaces.Box(-self.action_clip, self.action_clip, (n,), np.float32)

        rewards = cfg["rewards"]
        unknown = sorted(set(rewards["weights"]) - set(self.REWARD_TERMS))
        if unknown:
            raise ValueError(
                f"task {self.task_name!r}: unknown reward terms {unknown}; known: {list(self.REWARD_TERMS)}"
            )
        dt = self.policy_period
        # Zero weights cost nothing: only weighted terms are computed each step.
        self._reward_fns: list[tuple[str, float, Callable[[], float]]] = [
            (name, float(w) * dt, getattr(self, f"_reward_{name}"))
            for name, w in rewards["weights"].items()
            if float(w) != 0.0 and name != "termination"
        ]
        self._termination_weight = float(rewards["weights"].get("termination", 0.0)) * dt
        self._only_positive = bool(rewards.get("only_positive", False))

        self.randomization = None
        self.episode_conditions: dict[str, Any] = {}
        self._privileged_conditions = np.zeros(len(_PRIVILEGED_CONDITIONS) + 1)
        self.set_randomization(randomization)
        self.difficulty = 1.0
        self.set_difficulty(float(cfg.get("difficulty", 1.0)))

        self.engine = DEFAULT_ENGINE
        self.model: str | None = None  # another robot model than the profile's (MuJoCo only)
        self._world: SimWorld | None = None
        self._world_fresh = False
        self._pending_seed = seed
        self._action = np.zeros(n)
        self._previous_action = np.zeros(n)
        self._target = self.action_offset.copy()
        self._noisy = False
        self._prior_terms: list[tuple[str, float, Any, Callable[[], float]]] = []
        self._prior_scale = 0.0
        self._next_push: float | None = None
        self._steps = 0
        self._return = 0.0
        self._fell = False
        self._episode_open = False
        self.resets = 0

    # ------------------------------------------------------------ configuration
    @property
    def world(self) -> SimWorld:
        if self._world is None:
            self._build_world(0 if self._pending_seed is None else int(self._pending_seed))
        return self._world

    def _build_world(self, seed: int) -> None:
        if self._world is not None:
            self._world.close()
        self._world = make_world(
            self.engine, self.profile, model=self.model, seed=seed, physics_period=self.physics_period
        )
        self._world_fresh = True
        self._on_world_built()

    def set_engine(self, engine: str, model: str | None = None) -> None:
        """The physics engine of the worlds built from now on (``pybullet`` | ``mujoco``,
        :mod:`sim2real.sim.engines`) and, on MuJoCo, another robot model than the profile's
        (:mod:`sim2real.sim.robot_models`); a world already built is dropped."""
        self.engine = check_engine(engine)
        self.model = model
        if self._world is not None:
            self._world.close()
            self._world = None

    def set_prior(self, spec, scale: float = 1.0) -> None:
        """Reward shaping from prior knowledge from now on: ``spec`` a checked
        :class:`~sim2real.train.prior.PriorSpec` for this task (None: no prior), ``scale`` its
        lambda. Each term is in ``info["reward_terms"]`` as ``prior/<name>``."""
        self._prior_terms = []
        if spec is not None:
            unknown = [term.signal for term in spec.terms if term.signal not in self.PRIOR_SIGNALS]
            if unknown:
                raise ValueError(f"prior {spec.name!r}: signals {unknown} are not signals of task {self.task_name!r}")
            self._prior_terms = [
                (f"prior/{term.name}", term.weight * self.policy_period, term, getattr(self, f"_signal_{term.signal}"))
                for term in spec.terms
            ]
        self.set_prior_scale(scale)

    def set_prior_scale(self, scale: float) -> None:
        """The prior's lambda (the training config's ``prior`` schedule)."""
        scale = float(scale)
        if not math.isfinite(scale):
            raise ValueError(f"prior lambda must be finite, got {scale!r}")
        self._prior_scale = scale

    def prior_signals(self) -> dict[str, float]:
        """Every prior signal's value at the current step."""
        return {name: float(getattr(self, f"_signal_{name}")()) for name in self.PRIOR_SIGNALS}

    def _signal_joint_speed_max(self) -> float:
        return float(np.max(np.abs(self._dq)))

    def _signal_joint_speed_near_limits(self) -> float:
        q = self._q
        near = (q - self._lower < NEAR_LIMIT) | (self._upper - q < NEAR_LIMIT)
        return float(np.max(np.abs(self._dq[near]))) if near.any() else 0.0

    def _signal_action_rate(self) -> float:
        diff = self._action - self._previous_action
        return float(np.dot(diff, diff))

    def set_randomization(self, randomization) -> None:
        """Per-episode physical conditions from now on (next reset); None: nominal world."""
        if randomization is not None and not (hasattr(randomization, "sample") and hasattr(randomization, "pushes")):
            raise TypeError(f"expected a Randomization (sim2real.sim.randomization) or None, got {randomization!r}")
        self.randomization = randomization

    def set_difficulty(self, difficulty: float) -> None:
        """Task difficulty in [0, 1] (what it changes: the task's docstring); from the next reset
        for episode-level draws, immediately for draws made during an episode."""
        d = float(difficulty)
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"difficulty must be in [0, 1], got {difficulty!r}")
        self.difficulty = d

    # ------------------------------------------------------------------ episode
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None and self._pending_seed is not None:
            seed = self._pending_seed
        self._pending_seed = None
        self.resets += 1  # how a batched worker (envs/go2_walk_batch.py) sees a reset it did not make
        super().reset(seed=seed)
        rng = self.np_random
        if seed is not None:
            world_seed = int(rng.integers(2**31 - 1))
            if not (self._world_fresh and self._world is not None and self._world.seed == world_seed):
                self._build_world(world_seed)
        world = self.world
        self._world_fresh = False

        conditions = dict(_NOMINAL)
        if self.randomization is not None:
            conditions.update(self.randomization.sample(rng))
        conditions = self._episode_conditions(conditions)
        world.set_conditions(**conditions)
        # Once per episode, from the world's own state: what a privileged critic reads each step.
        applied = world.conditions
        self._privileged_conditions = np.array(
            [getattr(applied, name) for name in _PRIVILEGED_CONDITIONS] + [world.torque_limit_scale]
        )
        # What this episode drew, as applied (after task scaling): evaluations report it per episode.
        self.episode_conditions = (
            {} if self.randomization is None else {name: conditions[name] for name in self.randomization.parameters}
        )
        self._noisy = any(conditions[name] > 0 for name in _NOISE_CONDITIONS)
        world.reset(joint_positions=self._initial_joint_positions(rng))
        pushes = None if self.randomization is None else self.randomization.pushes
        self._next_push = None if pushes is None else pushes.sample_interval(rng)

        self._action[:] = 0.0
        self._previous_action[:] = 0.0
        self._target[:] = self.action_offset
        self._steps = 0
        self._return = 0.0
        self._fell = False
        self._episode_open = True
        self._read_state()
        self._start_episode(rng, options or {})
        return self._observe(), {}

    def action_targets(
        self, action: np.ndarray, clipped: np.ndarray | None = None, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Joint position targets for actions (the last axis in profile joint order; any
        leading axes, e.g. one row per robot): clip, scale, offset, and the joint limits if the
        task clips to them. ``clipped`` receives the clipped action; ``out`` the targets."""
        clipped = np.clip(action, -self.action_clip, self.action_clip, out=clipped)
        target = np.multiply(clipped, self.action_scale, out=out)
        target += self.action_offset
        if self._clip_targets:
            np.clip(target, self._lower, self._upper, out=target)
        return target

    def step(self, action):
        if not self._episode_open:
            raise RuntimeError("step() called before reset() or after the episode ended; call reset()")
        a = np.asarray(action, dtype=float).reshape(-1)
        if a.shape != self._action.shape:
            raise ValueError(
                f"action must have {self._action.size} values (one per joint), got shape {np.shape(action)}"
            )
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action contains non-finite values: {a}")
        self._previous_action, self._action = self._action, self._previous_action
        self.action_targets(a, clipped=self._action, out=self._target)
        world = self.world
        world.command(self._target)
        if self._next_push is not None and world.time >= self._next_push:
            pushes = self.randomization.pushes
            world.apply_push(pushes.sample_force(self.np_random), pushes.duration)
            self._next_push = world.time + pushes.sample_interval(self.np_random)
        world.step(self.decimation)
        self._steps += 1
        self._read_state()

        terms = {name: weight * fn() for name, weight, fn in self._reward_fns}
        reward = math.fsum(terms.values())
        if self._only_positive:
            terms["positive_clip"] = max(0.0, -reward)
            reward = max(reward, 0.0)
        # r_total = r_env + lambda * r_prior, after the clip: a prior's penalties are not
        # swallowed by it (as termination is not). At lambda 0 its terms are reported as 0, so
        # every episode carries the same terms.
        for name, weight, term, signal in self._prior_terms:
            terms[name] = self._prior_scale * weight * term(signal()) if self._prior_scale else 0.0
            reward += terms[name]
        self._fell = self._check_fall()
        terminated = self._fell
        if self._termination_weight != 0.0:
            terms["termination"] = self._termination_weight * float(terminated)
            reward += terms["termination"]
        truncated = not terminated and self._steps >= self.max_episode_steps
        self._return += reward
        self._after_step()
        info: dict[str, Any] = {"reward_terms": terms}
        if terminated or truncated:
            self._episode_open = False
            info["episode"] = {
                "return": self._return,
                "length": self._steps,
                "success": bool(self._success()),
                **self._episode_metrics(),
            }
        return self._observe(), float(reward), terminated, truncated, info

    def privileged_observation(self) -> np.ndarray:
        """What the simulator knows and the robot does not, for a critic only (asymmetric
        actor-critic): the task's true state (:meth:`_privileged_state`) and the episode's
        physical conditions, in :meth:`privileged_names` order. The deployed actor never
        sees it, so it is no part of the observation contract; unscaled (the critic's
        normalizer scales it)."""
        return np.concatenate([self._privileged_state(), self._privileged_conditions]).astype(np.float32)

    def privileged_names(self) -> list[str]:
        """One name per value of :meth:`privileged_observation`."""
        return [*self._privileged_state_names(), *_PRIVILEGED_CONDITIONS, "torque_limit_scale"]

    def mirrors(self) -> dict[str, SignedPermutation]:
        """The left-right mirror of the policy observation (``policy``), of the privileged
        observation (``privileged``) and of the action (``action``), for symmetric training
        (:mod:`sim2real.core.mirror`). ValueError, naming the fix, for a robot whose profile
        has no ``mirror:`` section or a task that cannot be mirrored."""
        mirror = self.profile.mirror
        if mirror is None:
            raise ValueError(
                f"{self.profile.name} has no left-right twins: add a mirror: section to "
                f"{self.profile.source} (see config/robots/go2.yaml), or train without symmetry"
            )
        conditions = SignedPermutation.identity(len(self._privileged_conditions))  # scalars: a mirror keeps them
        mirrors = {
            "policy": self.observation_spec.mirror(mirror, self._gait_shift()),
            "privileged": SignedPermutation.concatenate([self._privileged_state_mirror(), conditions]),
            "action": mirror.joints,
        }
        sizes = {
            "policy": self.observation_spec.size,
            "privileged": len(self.privileged_names()),
            "action": self.profile.num_joints,
        }
        for name, permutation in mirrors.items():
            if len(permutation) != sizes[name] or not permutation.is_involution():
                raise ValueError(
                    f"{type(self).__name__}: the {name} mirror maps {len(permutation)} values "
                    f"(the {name} vector has {sizes[name]}) or is not its own inverse: "
                    "fix the task's mirror hooks"
                )
        return mirrors

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None

    # -------------------------------------------------------------- task hooks
    def _on_world_built(self) -> None:
        """A new world exists (first use or seeded reset): cache anything derived from it."""

    def _episode_conditions(self, conditions: dict[str, Any]) -> dict[str, Any]:
        """The conditions to apply this episode, given the sampled ones (all names present)."""
        return conditions

    def _initial_joint_positions(self, rng: np.random.Generator) -> np.ndarray:
        return self.profile.default_positions

    def _start_episode(self, rng: np.random.Generator, options: dict) -> None:
        """Draw what the episode is about (command, goal); the state is already read."""

    def _read_state(self) -> None:
        """Read the world once per policy step; rewards and observations use what it stored."""
        raise NotImplementedError

    def _signals(self) -> RobotSignals:
        raise NotImplementedError

    def _observe(self) -> np.ndarray:
        return self.observation_spec.observe(self._signals())

    def _check_fall(self) -> bool:
        return False

    def _after_step(self) -> None:
        """Per-step bookkeeping after the reward (metrics, command resampling)."""

    def _privileged_state(self) -> np.ndarray:
        """The true state a critic may see beyond the observation (none by default)."""
        return np.zeros(0)

    def _privileged_state_names(self) -> list[str]:
        return []

    def _privileged_state_mirror(self) -> SignedPermutation:
        """The left-right mirror of :meth:`_privileged_state` (a task with one must say it).
        A ValueError, as every reason a task cannot be mirrored: the runner reports it by name."""
        if self._privileged_state_names():
            raise ValueError(
                f"{type(self).__name__} has a privileged state but no mirror of it: override "
                "_privileged_state_mirror, or train without symmetry"
            )
        return SignedPermutation.identity(0)

    def _gait_shift(self) -> float | None:
        """How far (cycles) the mirror image's gait clock runs ahead; None without a clock."""
        return None

    def _success(self) -> bool:
        raise NotImplementedError

    def _episode_metrics(self) -> dict[str, Any]:
        return {}
