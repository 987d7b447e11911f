"""Arm reaching (Panda-class): bring the end effector to a goal position."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from sim2real.core.kinematics import Kinematics
from sim2real.core.observation import RobotSignals
from sim2real.core.robot_profile import RobotProfile
from sim2real.train.envs.base import COMMON_PRIOR_SIGNALS, RobotTaskEnv


class PandaReachEnv(RobotTaskEnv):
    """Move a Panda-class arm's end effector (``profile.end_effector_link``) to a goal.

    Positions are in the robot's base frame (``panda_link0``), computed by
    :class:`sim2real.core.kinematics.Kinematics` from joint positions, exactly as the
    deployed runtime does; orientation is free.

    Observation (``config/tasks/panda_reach.yaml``; 27 values for 7 joints)::

        joint_pos_rel x1 | joint_vel x0.5 | goal_position x1 | goal_offset x1 | last_action x1

    Action: 7 joint position offsets from the default ("ready") pose, target = default +
    0.5 * a, ``a`` clipped to +-3, target clipped to the joint limits (the real arm's
    controller refuses targets outside them). An absolute target around a fixed pose,
    rather than a delta on the current position, makes a constant action a fixed pose:
    a deployed policy cannot drift, and the same action always means the same posture.
    Policy 50 Hz, physics 2 ms (the profile's; decimation 10), gravity compensated by the
    simulated robot controller as on the real arm.

    Reward terms (weights per second, x dt; shaped after Isaac Lab's Franka reach: an L2
    distance term for the approach plus a fine-grained tanh kernel near the goal)::

        distance      |goal - ee| (m)                          -1.0
        distance_fine 1 - tanh(|goal - ee| / 0.1 m)            +0.5
        reached       1 while |goal - ee| < success radius     +1.0
        action_rate   |a - a_prev|^2                           -0.01
        joint_vel     |dq|^2                                   -0.001
        joint_vel_limits  sum(max(|dq| - 0.8 x limit, 0))      0 (off, see the task config)

    No termination: only the time limit (6 s) ends an episode.

    Goal: uniform in the workspace box ``goal.box`` (in front of the robot, base frame),
    then pulled towards the end effector's position in the default pose: goal = start +
    difficulty * (box sample - start), so difficulty 0 asks to stay put and 1 spans the
    box. :meth:`set_fixed_goal` or ``eval_goal`` pins the goal. The arm starts at the
    default pose plus uniform joint noise of +-``start_joint_noise`` rad.

    Success: within ``success.radius`` (2 cm) of the goal for ``success.hold_time`` (1 s)
    without interruption, at any time in the episode. ``info["episode"]`` also reports the
    final ``distance`` and ``min_distance`` (m).
    """

    task_name = "reach"
    REWARD_TERMS = ("distance", "distance_fine", "reached", "action_rate", "joint_vel", "joint_vel_limits")
    PRIOR_SIGNALS = {
        **COMMON_PRIOR_SIGNALS,
        "ee_speed": "the end effector's speed, m/s",
        "ee_height": "the end effector's height over the robot's base, m",
        "ee_reach": "the end effector's horizontal distance from the base's axis, m",
        "goal_distance": "the end effector's distance to the goal, m",
    }

    def __init__(self, profile: RobotProfile, config: dict[str, Any], randomization=None, seed: int | None = None):
        if profile.kind != "arm" or profile.end_effector_link is None:
            raise ValueError(f"task 'reach' needs an arm profile with an end_effector_link, got {profile.name!r}")
        super().__init__(profile, config, randomization, seed)
        cfg = self.task_config
        self.kinematics = Kinematics(profile)
        goal = cfg["goal"]
        box = np.asarray(goal["box"], dtype=float)
        if box.shape != (3, 2) or np.any(box[:, 0] > box[:, 1]):
            raise ValueError(
                f"goal.box: expected [[x_lo, x_hi], [y_lo, y_hi], [z_lo, z_hi]] (m, base frame), got {goal['box']!r}"
            )
        self._box = box
        self._start_noise = float(goal["start_joint_noise"])
        self.start_position = self.kinematics.end_effector_position(profile.default_positions)
        self._fixed_goal: np.ndarray | None = None
        if cfg.get("eval_goal") is not None:
            self.set_fixed_goal(cfg["eval_goal"])
        self._fine_std = float(cfg["rewards"]["fine_std"])
        # The supervisor damps the arm above 1.2x a velocity limit: teach the policy the limit.
        self._soft_velocity = float(cfg["rewards"]["soft_velocity_limit"]) * self.profile.velocity_limits
        success = cfg["success"]
        self._radius = float(success["radius"])
        self._hold_steps = max(1, int(round(float(success["hold_time"]) / self.policy_period)))

        n = profile.num_joints
        self._goal = self.start_position.copy()
        self._dq = np.zeros(n)
        self._distance = 0.0
        self._min_distance = math.inf
        self._held = 0
        self._succeeded = False

    # -------------------------------------------------------------------- goals
    def set_fixed_goal(self, position: Sequence[float] | None) -> None:
        """Pin the goal (m, base frame) from now on, also in the running episode; None: random
        goals from the next episode."""
        if position is None:
            self._fixed_goal = None
            return
        value = np.asarray(position, dtype=float)
        if value.shape != (3,) or not np.all(np.isfinite(value)):
            raise ValueError(f"goal must be 3 finite numbers (x, y, z in m, base frame), got {position!r}")
        self._fixed_goal = value
        if self._episode_open:
            self._goal = value.copy()
            self._held = 0

    def sample_goal(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """One random goal at the current difficulty (what an episode would draw)."""
        rng = self.np_random if rng is None else rng
        far = rng.uniform(self._box[:, 0], self._box[:, 1])
        return self.start_position + self.difficulty * (far - self.start_position)

    @property
    def goal(self) -> np.ndarray:
        return self._goal.copy()

    # ------------------------------------------------------------------ episode
    def _initial_joint_positions(self, rng: np.random.Generator) -> np.ndarray:
        q = self.profile.default_positions
        if self._start_noise > 0:
            q = np.clip(
                q + rng.uniform(-self._start_noise, self._start_noise, q.size),
                self.profile.lower_limits,
                self.profile.upper_limits,
            )
        return q

    def _start_episode(self, rng: np.random.Generator, options: dict) -> None:
        self._goal = self._fixed_goal.copy() if self._fixed_goal is not None else self.sample_goal(rng)
        self._held = 0
        self._succeeded = False
        self._distance = float(np.linalg.norm(self._goal - self._ee))
        self._min_distance = self._distance

    def _read_state(self) -> None:
        world = self.world
        true = world.true_joint_state()
        self._q, self._dq = true.position, true.velocity
        self._ee = self.kinematics.end_effector_position(self._q)
        if self._noisy:
            # The policy sees what the robot reports: FK of the noisy joint readings.
            self._measured = world.joint_state(true)
            self._ee_measured = self.kinematics.end_effector_position(self._measured.position)
        else:
            self._measured, self._ee_measured = true, self._ee
        self._distance = float(np.linalg.norm(self._goal - self._ee))

    def _after_step(self) -> None:
        self._min_distance = min(self._min_distance, self._distance)
        self._held = self._held + 1 if self._distance < self._radius else 0
        if self._held >= self._hold_steps:
            self._succeeded = True

    def _success(self) -> bool:
        return self._succeeded

    def _episode_metrics(self) -> dict[str, Any]:
        return {"distance": self._distance, "min_distance": self._min_distance}

    def _signals(self) -> RobotSignals:
        return RobotSignals(
            joint_position=self._measured.position,
            joint_velocity=self._measured.velocity,
            goal_position=self._goal,
            end_effector_position=self._ee_measured,
            last_action=self._action,
            default_joint_position=self.action_offset,
        )

    # ------------------------------------------------------------ prior signals
    def _signal_ee_speed(self) -> float:
        _, jacobian = self.kinematics.end_effector_jacobian(self._q)
        return float(np.linalg.norm(jacobian[:3] @ self._dq))

    def _signal_ee_height(self) -> float:
        return float(self._ee[2])

    def _signal_ee_reach(self) -> float:
        return float(math.hypot(self._ee[0], self._ee[1]))

    def _signal_goal_distance(self) -> float:
        return self._distance

    # ------------------------------------------------------------------ rewards
    def _reward_distance(self) -> float:
        return self._distance

    def _reward_distance_fine(self) -> float:
        return 1.0 - math.tanh(self._distance / self._fine_std)

    def _reward_reached(self) -> float:
        return float(self._distance < self._radius)

    def _reward_action_rate(self) -> float:
        diff = self._action - self._previous_action
        return float(np.dot(diff, diff))

    def _reward_joint_vel(self) -> float:
        return float(np.dot(self._dq, self._dq))

    def _reward_joint_vel_limits(self) -> float:
        return float(np.sum(np.clip(np.abs(self._dq) - self._soft_velocity, 0.0, None)))
