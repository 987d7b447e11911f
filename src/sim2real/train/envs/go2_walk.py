"""Quadruped velocity tracking (Go2-class): walk at a commanded body velocity."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Sequence

import numpy as np
from scipy.ndimage import uniform_filter

from sim2real.core.gait import GaitClock, gait_settings
from sim2real.core.mirror import SignedPermutation
from sim2real.core.observation import RobotSignals
from sim2real.core.robot_profile import RobotProfile
from sim2real.core.rotations import quat_to_matrix
from sim2real.sim.world import TERRAIN_CELL, height_at
from sim2real.train.envs.base import COMMON_PRIOR_SIGNALS, RobotTaskEnv

# Contact forces below these are numerical chatter, not touch (legged_gym's thresholds).
FOOT_CONTACT_FORCE = 1.0
BODY_CONTACT_FORCE = 1.0
PENALIZED_CONTACT_FORCE = 0.1

# np.sum and np.mean without their Python wrappers (~2 us a call): the same pairwise sum, so
# the same bits, for the reward terms' small reductions that run every step.
_sum = partial(np.add.reduce, axis=None)


# rad/s: a slower yaw command with no horizontal one is a stand for the rewards that score standing
# (stand_still, gait_contact's all feet down, no feet_clearance); a faster one turns on the spot.
STANDING_YAW_BELOW = 0.1


class _SegmentMean:
    """Tracking error of the mean velocity over each command segment, averaged over the
    episode weighted by segment length. A gait oscillates the instantaneous velocity by
    more than the error worth measuring; the mean over a segment does not, and per-segment
    means keep opposite commands from cancelling each other's errors."""

    def __init__(self):
        self.total_xy = self.total_yaw = 0.0
        self.count = 0
        self._sum = np.zeros(3)
        self._n = 0

    def add(self, error: np.ndarray) -> None:
        self._sum += error
        self._n += 1

    def close_segment(self) -> None:
        if self._n:
            mean = self._sum / self._n
            self.total_xy += self._n * math.hypot(mean[0], mean[1])
            self.total_yaw += self._n * abs(mean[2])
            self.count += self._n
        self._sum[:] = 0.0
        self._n = 0

    def result(self) -> tuple[float, float] | None:
        self.close_segment()
        return None if not self.count else (self.total_xy / self.count, self.total_yaw / self.count)


class Go2WalkEnv(RobotTaskEnv):
    """Track a commanded base velocity ``(vx, vy, yaw rate)`` with a Go2-class quadruped.

    Observation (``config/tasks/go2_walk.yaml`` ``observation``; 45 values for 12 joints)::

        base_ang_vel x0.25 | projected_gravity x1 | velocity_command x1 |
        joint_pos_rel x1 | joint_vel x0.05 | last_action x1 | gait_clock x1

    (47 values with the gait clock, core/gait.py: sin and cos of a 2 Hz trot phase.)

    (legged_gym scales; its command scale (2, 2, 0.25) is 1 here, the commands being within
    +-1 already. No base linear velocity: the deployed robot has no direct measurement.)

    Action: 12 joint position offsets from the default pose, target = default + 0.25 * a
    (legged_gym / unitree_rl_gym Go2 ``action_scale``), ``a`` clipped to +-100 (their
    ``clip_actions``). Policy 50 Hz, physics 5 ms (decimation 4) in training.

    Reward terms (weights per second, x dt; unitree_rl_gym GO2RoughCfg = legged_gym
    LeggedRobotCfg defaults with its Go2 overrides, see the YAML for each number)::

        tracking_lin_vel   exp(-|cmd_xy - v_xy|^2 / sigma), body frame, sigma 0.25   +1.0
        tracking_ang_vel   exp(-(cmd_yaw - w_z)^2 / sigma_yaw), sigma_yaw = sigma      +0.5
        lin_vel_z          v_z^2                                                       -2.0
        ang_vel_xy         |w_xy|^2                                                    -0.05
        orientation        |projected_gravity_xy|^2                                    0 (off)
        torques            |tau|^2                                                     -2e-4
        dof_vel            |dq|^2                                                      0 (off)
        dof_acc            |(dq - dq_prev) / dt|^2                                     -2.5e-7
        base_height        (base height over ground - target)^2                        0 (off)
        feet_air_time      sum over touchdowns of (air time - 0.5 s), if |cmd_xy|>0.1  +1.0
        collision          number of thigh/calf links touching the ground              -1.0
        action_rate        |a - a_prev|^2                                              -0.01
        stand_still        |q - q_default|_1 when told to stand (|cmd_xy| under the   0 (off)
                           dead zone, |yaw| under 0.1 rad/s; turning on the spot steps)
        dof_pos_limits     distance beyond 90 % of the joint range, rad                -10.0
        gait_contact       fraction of feet whose contact matches the gait clock       +0.5
                           (trot; all feet down when commanded to stand)
        termination        1 on a fall (after the positive clip)                       0 (off)

    with the step's sum clipped at 0 (``only_positive``, legged_gym).

    Termination (a fall): the trunk touches the ground, tilt above ``max_tilt``, or the
    base below ``min_base_height`` over the ground under it: the mean terrain height of the
    ``ground_patch`` x ``ground_patch`` m square centred under the base (legged_gym measures
    base height over the mean of its height samples). One height-field vertex is not the
    ground a robot stands on: on +-5 cm bumps 10 cm apart, an upright robot whose base
    crossed one peak was counted as fallen. Truncation: 20 s.

    Commands: drawn at reset and every ``resample_interval`` (10 s), uniform in ranges
    interpolated by difficulty between ``ranges_easiest`` (d=0) and ``ranges_hardest``
    (d=1: vx [-1, 1], vy [-0.5, 0.5], yaw rate [-1, 1]); a horizontal command slower than
    ``standing_below`` becomes 0 (stand still), and a ``standing_share`` of the draws are
    the zero command (stand still, yaw included). :meth:`set_fixed_command` or
    ``eval_command`` pins one command for the whole episode (evaluation: 0.5 m/s forward).

    Terrain: the randomization's ``terrain_roughness`` sample times difficulty times
    ``terrain_roughness_scale`` (flat without a randomization that lists it).

    Success: no fall, and the velocity error (per command segment: |mean velocity - command|
    in the body xy plane, ignoring each segment's first ``settle_time``) below
    ``velocity_error`` m/s. ``info["episode"]`` also reports ``yaw_rate_error`` and ``fell``.
    """

    task_name = "walk"
    REWARD_TERMS = (
        "tracking_lin_vel",
        "tracking_ang_vel",
        "lin_vel_z",
        "ang_vel_xy",
        "orientation",
        "torques",
        "dof_vel",
        "dof_acc",
        "base_height",
        "feet_air_time",
        "collision",
        "action_rate",
        "stand_still",
        "dof_pos_limits",
        "gait_contact",
        "feet_clearance",
        "termination",
    )
    PRIOR_SIGNALS = {
        **COMMON_PRIOR_SIGNALS,
        "touchdown_force": "the largest normal force on a foot in the step it touches down, read at the step's end "
        "(0 if none lands), N",
        "foot_force_max": "the largest normal force on a foot this step, N",
        "trunk_tilt": "the trunk's tilt from upright, rad",
        "base_vertical_speed": "the trunk's speed along its own up axis, m/s",
        "base_height_error": "the trunk's height over the ground minus the task's target, m",
        "torque_sq": "squared motor torques, sum over joints, (N*m)^2",
        "body_collisions": "links other than the feet touching the ground (thighs, calves), count",
    }

    def __init__(self, profile: RobotProfile, config: dict[str, Any], randomization=None, seed: int | None = None):
        if profile.kind != "quadruped":
            raise ValueError(f"task 'walk' needs a quadruped profile, got {profile.name!r} ({profile.kind})")
        super().__init__(profile, config, randomization, seed)
        cfg = self.task_config
        commands = cfg["commands"]
        self._easy = self._ranges(commands["ranges_easiest"], "commands.ranges_easiest")
        self._hard = self._ranges(commands["ranges_hardest"], "commands.ranges_hardest")
        self._resample_steps = max(1, int(round(float(commands["resample_interval"]) / self.policy_period)))
        self._standing_below = float(commands["standing_below"])
        share = commands["standing_share"]
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= share <= 1.0:
            raise ValueError(
                f"commands.standing_share must be a fraction in [0, 1] (of command draws that stand), got {share!r}"
            )
        self._standing_share = float(share)
        self._fixed_command: np.ndarray | None = None
        self.command_draws = 0
        if cfg.get("eval_command") is not None:
            self.set_fixed_command(cfg["eval_command"])

        rewards = cfg["rewards"]
        self._sigma = float(rewards["tracking_sigma"])
        yaw_sigma = rewards["tracking_sigma_yaw"]
        self._sigma_yaw = self._sigma if yaw_sigma is None else float(yaw_sigma)
        if not (self._sigma > 0.0 and self._sigma_yaw > 0.0):
            raise ValueError(
                f"rewards.tracking_sigma and tracking_sigma_yaw must be > 0, got {self._sigma}, {self._sigma_yaw}"
            )
        self._air_time_target = float(rewards["feet_air_time_target"])
        self._base_height_target = float(rewards["base_height_target"])
        self._clearance_target = float(rewards["feet_clearance_target"])
        middle = (profile.lower_limits + profile.upper_limits) / 2.0
        half = (profile.upper_limits - profile.lower_limits) / 2.0 * float(rewards["soft_joint_limit"])
        self._soft_lower, self._soft_upper = middle - half, middle + half

        termination = cfg["termination"]
        self._min_height = float(termination["min_base_height"])
        patch = float(termination["ground_patch"])
        if patch < 0:
            raise ValueError(
                f"termination.ground_patch must be >= 0 m (the side of the ground square the base "
                f"height is measured over), got {patch}"
            )
        # Odd so the square is centred on the vertex under the base.
        self._patch_points = 2 * int(round(patch / TERRAIN_CELL / 2.0)) + 1
        self._min_up = math.cos(float(termination["max_tilt"]))
        self._roughness_scale = float(cfg["terrain_roughness_scale"])
        success = cfg["success"]
        self._success_error = float(success["velocity_error"])
        self._settle_steps = int(round(float(success["settle_time"]) / self.policy_period))
        self._contact_links = cfg["contacts"]

        self._gait = gait_settings(
            cfg,
            required="gait_clock" in self.observation_spec.names
            or any(float(rewards["weights"].get(term, 0.0)) != 0.0 for term in ("gait_contact", "feet_clearance")),
        )
        if self._gait is not None and len(self._gait["offsets"]) != len(profile.foot_links):
            raise ValueError(
                f"gait.offsets: one phase offset per foot {list(profile.foot_links)}, got {self._gait['offsets']}"
            )
        self._clock: GaitClock | None = None
        n, feet = profile.num_joints, len(profile.foot_links)
        self._contact = np.zeros(feet, dtype=bool)
        self._command = np.zeros(3)
        self._dq = self._dq_previous = np.zeros(n)
        self._air_time = np.zeros(feet)
        self._last_contact = np.zeros(feet, dtype=bool)
        self._touchdown_air = np.zeros(feet)
        self._ground_means: np.ndarray | None = None  # patch-mean ground height per vertex, m
        self._terrain: np.ndarray | None = None  # the height field's own vertex heights, m

    @staticmethod
    def _ranges(spec: dict, field: str) -> np.ndarray:
        try:
            ranges = np.array([spec["vx"], spec["vy"], spec["yaw_rate"]], dtype=float)
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f"{field}: expected {{vx: [lo, hi], vy: [lo, hi], yaw_rate: [lo, hi]}}, got {spec!r}"
            ) from None
        if ranges.shape != (3, 2) or np.any(ranges[:, 0] > ranges[:, 1]):
            raise ValueError(f"{field}: each range must be [low, high] with low <= high, got {spec!r}")
        return ranges

    # ---------------------------------------------------------------- commands
    def set_fixed_command(self, command: Sequence[float] | None) -> None:
        """Pin the velocity command (vx m/s, vy m/s, yaw rate rad/s) from now on, also in the
        running episode (no resampling); None returns to random commands at the next draw."""
        if command is None:
            self._fixed_command = None
            return
        value = np.asarray(command, dtype=float)
        if value.shape != (3,) or not np.all(np.isfinite(value)):
            raise ValueError(f"velocity command must be 3 finite numbers (vx, vy, yaw rate), got {command!r}")
        self._fixed_command = value
        if self._episode_open:
            self._new_command(self.np_random)

    def command_ranges(self) -> np.ndarray:
        """(3, 2) [low, high] of vx, vy, yaw rate at the current difficulty."""
        return self._easy + self.difficulty * (self._hard - self._easy)

    def sample_command(self, rng: np.random.Generator | None = None) -> np.ndarray:
        """One random command at the current difficulty (what an episode would draw)."""
        rng = self.np_random if rng is None else rng
        ranges = self.command_ranges()
        command = rng.uniform(ranges[:, 0], ranges[:, 1])
        # No extra draw without a share: recipes without one keep their seed's command stream.
        if self._standing_share > 0.0 and rng.uniform() < self._standing_share:
            return np.zeros(3)
        if math.hypot(command[0], command[1]) < self._standing_below:
            command[:2] = 0.0
        return command

    @property
    def command(self) -> np.ndarray:
        return self._command.copy()

    def _new_command(self, rng: np.random.Generator) -> None:
        self._command[:] = self._fixed_command if self._fixed_command is not None else self.sample_command(rng)
        self._command_xy = (float(self._command[0]), float(self._command[1]))
        self._command_yaw = float(self._command[2])
        self._command_speed = math.hypot(*self._command_xy)
        self.command_draws += 1  # how a batched worker (envs/go2_walk_batch.py) sees a new command
        self._settled.close_segment()
        self._all.close_segment()
        self._segment_steps = 0

    # ----------------------------------------------------------------- episode
    def _on_world_built(self) -> None:
        world = self._world
        names = world.link_ids

        def matching(patterns: list[str]) -> set[int]:
            return {link for name, link in names.items() if any(p in name for p in patterns)}

        self._feet_ids = [names[name] for name in self.profile.foot_links]
        # Foot height is the sphere's lowest point: its centre (the link origin) minus its radius.
        self._foot_radius = np.array([world.collision_sphere_radius(foot) for foot in self._feet_ids])
        self._foot_slot = {link: i for i, link in enumerate(self._feet_ids)}
        self._terminate_ids = matching(self._contact_links["terminate_on"])
        self._penalize_ids = matching(self._contact_links["penalize"]) - set(self._feet_ids)

    def _episode_conditions(self, conditions: dict[str, Any]) -> dict[str, Any]:
        conditions["terrain_roughness"] *= self.difficulty * self._roughness_scale
        return conditions

    def _start_episode(self, rng: np.random.Generator, options: dict) -> None:
        heights = self._terrain = self.world.terrain_heights
        # Mean height of the patch around each vertex, once per episode: a lookup per step.
        self._ground_means = (
            None if heights is None else uniform_filter(heights, size=self._patch_points, mode="nearest")
        )
        self._settled, self._all = _SegmentMean(), _SegmentMean()
        self._new_command(rng)
        # A random start phase: the deployed clock starts at 0 whatever the robot is doing.
        self._clock = (
            None
            if self._gait is None
            else GaitClock(self._gait["frequency"], self.policy_period, phase=float(rng.uniform()))
        )
        self._air_time[:] = 0.0
        self._last_contact[:] = False
        self._touchdown_air[:] = 0.0
        self._dq_previous[:] = 0.0

    def _after_step(self) -> None:
        if self._clock is not None:
            self._clock.advance()
        error = np.array([self._v[0], self._v[1], self._w[2]]) - self._command
        self._all.add(error)
        if self._segment_steps >= self._settle_steps:
            self._settled.add(error)
        self._segment_steps += 1
        if self._fixed_command is None and self._steps % self._resample_steps == 0:
            self._new_command(self.np_random)

    def _check_fall(self) -> bool:
        return bool(self._body_contact or self._g[2] > -self._min_up or self._base_height < self._min_height)

    def _success(self) -> bool:
        metrics = self._episode_metrics()
        return not self._fell and metrics["velocity_error"] < self._success_error

    def _episode_metrics(self) -> dict[str, Any]:
        result = self._settled.result() or self._all.result() or (float("nan"), float("nan"))
        return {"velocity_error": float(result[0]), "yaw_rate_error": float(result[1]), "fell": bool(self._fell)}

    # ------------------------------------------------------------------- state
    def _read_state(self) -> None:
        world = self.world
        true = world.true_joint_state()
        self._dq_previous = self._dq
        self._q, self._dq, self._tau = true
        self._measured = world.joint_state(true) if self._noisy else true
        self._imu = world.imu()
        position, orientation, velocity, angular = world.base_pose_and_velocity()
        rotation = quat_to_matrix(orientation)
        self._v_body = rotation.T @ velocity
        self._w_body = rotation.T @ angular
        self._gravity_body = -rotation[2]
        # Plain floats for the scalar reward arithmetic: numpy costs ~1 us per 3-vector op.
        self._v = self._v_body.tolist()
        self._w = self._w_body.tolist()
        self._g = self._gravity_body.tolist()
        self._base_height = position[2] - self._ground_height(position[0], position[1])

        foot_force = np.zeros(len(self._feet_ids))
        touching: set[int] = set()
        body_contact = False
        for link, force in world.ground_contacts():
            slot = self._foot_slot.get(link)
            if slot is not None:
                foot_force[slot] += force
            elif link in self._terminate_ids and force > BODY_CONTACT_FORCE:
                body_contact = True
            elif link in self._penalize_ids and force > PENALIZED_CONTACT_FORCE:
                touching.add(link)
        self._body_contact = body_contact
        self._collisions = len(touching)
        self._foot_force = foot_force

        # Filtered with the previous contact, as in legged_gym: a foot that bounces for one
        # step must not count as a new touchdown.
        contact = foot_force > FOOT_CONTACT_FORCE
        self._contact = contact
        filtered = contact | self._last_contact
        first = (self._air_time > 0.0) & filtered
        self._air_time += self.policy_period
        self._touchdown_air = np.where(first, self._air_time, 0.0)
        self._first_contact = first
        self._air_time[filtered] = 0.0
        self._last_contact = contact

    def _ground_height(self, x: float, y: float) -> float:
        """The ground the base height is measured over: the patch mean around (x, y)."""
        return height_at(self._ground_means, x, y)

    def _signals(self) -> RobotSignals:
        return RobotSignals(
            joint_position=self._measured.position,
            joint_velocity=self._measured.velocity,
            base_orientation=self._imu.orientation,
            base_angular_velocity=self._imu.angular_velocity,
            base_linear_velocity=self._v_body,
            velocity_command=self._command,
            last_action=self._action,
            default_joint_position=self.action_offset,
            gait_phase=None if self._clock is None else self._clock.phase,
        )

    def _privileged_state(self) -> np.ndarray:
        # Noise-free truth the blind actor must infer: body velocity, height over the ground,
        # which feet bear load and for how long they have been up, the joints unperturbed.
        return np.concatenate(
            [
                self._v_body,
                self._w_body,
                [self._base_height],
                self._contact,
                self._air_time,
                self._q - self.action_offset,
                self._dq,
            ]
        )

    def _privileged_state_names(self) -> list[str]:
        feet = list(self.profile.foot_links)
        joints = list(self.profile.joint_names)
        return (
            [f"base_lin_vel_{a}" for a in "xyz"]
            + [f"base_ang_vel_{a}" for a in "xyz"]
            + ["base_height"]
            + [f"{f}_contact" for f in feet]
            + [f"{f}_air_time" for f in feet]
            + [f"{j}_pos_rel_true" for j in joints]
            + [f"{j}_vel_true" for j in joints]
        )

    def _privileged_state_mirror(self) -> SignedPermutation:
        feet, joints = self.profile.mirror.feet, self.profile.mirror.joints
        return SignedPermutation.concatenate(
            [
                SignedPermutation.of_vector("polar"),
                SignedPermutation.of_vector("axial"),
                SignedPermutation.identity(1),
                feet,
                feet,
                joints,
                joints,
            ]
        )

    def _gait_shift(self) -> float | None:
        if self._gait is None:
            return None
        offsets, twin = self._gait["offsets"], self.profile.mirror.feet.index
        shifts = {round((offsets[twin[i]] - offsets[i]) % 1.0, 9) for i in range(len(offsets))}
        if len(shifts) != 1:
            feet = self.profile.foot_links
            pairs = sorted({tuple(sorted((feet[i], feet[twin[i]]))) for i in range(len(feet))})
            raise ValueError(
                f"gait.offsets {offsets} (feet {list(feet)}): the twin feet {pairs} are not all the "
                "same phase apart, so the mirror image of this gait is another gait; train without "
                "symmetry, or use a symmetric gait (a trot, a pace, a bound)"
            )
        return shifts.pop()

    # ------------------------------------------------------------ prior signals
    def _signal_touchdown_force(self) -> float:
        landing = self._foot_force[self._first_contact]
        return float(landing.max()) if landing.size else 0.0

    def _signal_foot_force_max(self) -> float:
        return float(self._foot_force.max())

    def _signal_trunk_tilt(self) -> float:
        return math.atan2(math.hypot(self._g[0], self._g[1]), -self._g[2])

    def _signal_base_vertical_speed(self) -> float:
        return self._v[2]

    def _signal_base_height_error(self) -> float:
        return self._base_height - self._base_height_target

    def _signal_torque_sq(self) -> float:
        return float(np.dot(self._tau, self._tau))

    def _signal_body_collisions(self) -> float:
        return float(self._collisions)

    # ----------------------------------------------------------------- rewards
    def _reward_tracking_lin_vel(self) -> float:
        ex, ey = self._command_xy[0] - self._v[0], self._command_xy[1] - self._v[1]
        return math.exp(-(ex * ex + ey * ey) / self._sigma)

    def _reward_tracking_ang_vel(self) -> float:
        e = self._command_yaw - self._w[2]
        return math.exp(-e * e / self._sigma_yaw)

    def _reward_lin_vel_z(self) -> float:
        return self._v[2] ** 2

    def _reward_ang_vel_xy(self) -> float:
        return self._w[0] ** 2 + self._w[1] ** 2

    def _reward_orientation(self) -> float:
        return self._g[0] ** 2 + self._g[1] ** 2

    def _reward_torques(self) -> float:
        return float(np.dot(self._tau, self._tau))

    def _reward_dof_vel(self) -> float:
        return float(np.dot(self._dq, self._dq))

    def _reward_dof_acc(self) -> float:
        acc = (self._dq - self._dq_previous) / self.policy_period
        return float(np.dot(acc, acc))

    def _reward_base_height(self) -> float:
        return (self._base_height - self._base_height_target) ** 2

    def _reward_feet_air_time(self) -> float:
        if self._command_speed <= 0.1 or not self._first_contact.any():
            return 0.0
        return float(_sum((self._touchdown_air - self._air_time_target) * self._first_contact))

    def _reward_collision(self) -> float:
        return float(self._collisions)

    def _reward_action_rate(self) -> float:
        diff = self._action - self._previous_action
        return float(np.dot(diff, diff))

    def _told_to_stand(self) -> bool:
        # Turning on the spot is not standing: it steps.
        return self._command_speed <= self._standing_below and abs(self._command_yaw) < STANDING_YAW_BELOW

    def _reward_stand_still(self) -> float:
        if not self._told_to_stand():
            return 0.0
        return float(_sum(np.abs(self._q - self.action_offset)))

    def _reward_gait_contact(self) -> float:
        # Feet on the ground when the clock says stance, in the air when it says swing (all
        # down when told to stand): the fraction of feet that agree, at the phase the action
        # was chosen at.
        if self._told_to_stand():
            return float(_sum(self._contact, dtype=float) / self._contact.size)
        wanted = self._clock.stance(self._gait["offsets"], self._gait["stance"])
        return float(_sum(self._contact == wanted, dtype=float) / self._contact.size)

    def _reward_feet_clearance(self) -> float:
        # walk-these-ways' foot clearance: each swinging foot's lowest point over the ground
        # under it, against a target rising to feet_clearance_target at mid-swing. Blind on
        # rough ground, a foot that shuffles catches on bumps; one that lifts steps over them.
        if self._told_to_stand():
            return 0.0
        lift = self._clock.swing_lift(self._gait["offsets"], self._gait["stance"])
        world = self.world
        positions = world.link_positions(self._feet_ids).tolist()
        error = 0.0
        for foot, (x, y, z) in enumerate(positions):
            if lift[foot] > 0.0:
                height = z - self._foot_radius[foot] - height_at(self._terrain, x, y)
                error += (height - self._clearance_target * lift[foot]) ** 2
        return error

    def _reward_dof_pos_limits(self) -> float:
        q = self._q
        return float(_sum(np.maximum(self._soft_lower - q, 0.0)) + _sum(np.maximum(q - self._soft_upper, 0.0)))
